from services.cache.service import Cache
from services.runtime.runner import main

if __name__ == "__main__":
    main(Cache)
