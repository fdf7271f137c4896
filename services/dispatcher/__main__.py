from opsched.services.dispatcher.service import Dispatcher
from opsched.services.runtime.runner import main

if __name__ == "__main__":
    main(Dispatcher)
