from services.cost.service import Cost
from services.runtime.runner import main

if __name__ == "__main__":
    main(Cost)
