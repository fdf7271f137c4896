from opsched.services.admission.service import Admission
from opsched.services.runtime.runner import main

if __name__ == "__main__":
    main(Admission)
