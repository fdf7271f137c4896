from services.dispatcher.service import Dispatcher
from services.runtime.runner import main

if __name__ == "__main__":
    main(Dispatcher)
