from opsched.services.cost.service import Cost
from opsched.services.runtime.runner import main

if __name__ == "__main__":
    main(Cost)
