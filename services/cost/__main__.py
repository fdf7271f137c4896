"""`python -m opsched.services.cost`: the service as a process (opsched.services.runtime.runner)."""
from opsched import entrypoint

entrypoint.begin(service=True)  # before anything imports nats-py; SIGTERM: exit 0 until it serves

from opsched.services.cost.service import Cost  # noqa: E402
from opsched.services.runtime.runner import main  # noqa: E402

if __name__ == "__main__":
    main(Cost)
