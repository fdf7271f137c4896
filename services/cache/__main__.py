from opsched.services.cache.service import Cache
from opsched.services.runtime.runner import main

if __name__ == "__main__":
    main(Cache)
