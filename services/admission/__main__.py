from services.admission.service import Admission
from services.runtime.runner import main

if __name__ == "__main__":
    main(Admission)
