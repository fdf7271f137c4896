from services.admission.service import build
from services.runtime.runner import main

if __name__ == "__main__":
    main(build, "admission")
