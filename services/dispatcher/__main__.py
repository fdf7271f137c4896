"""`python -m opsched.services.dispatcher`: the service as a process (opsched.services.runtime.runner)."""
from opsched import entrypoint

entrypoint.begin(service=True)  # before anything imports nats-py; SIGTERM: exit 0 until it serves

from opsched.services.dispatcher.service import Dispatcher  # noqa: E402
from opsched.services.runtime.runner import main  # noqa: E402

if __name__ == "__main__":
    main(Dispatcher)
