"""`python -m opsched.services.admission`: the service as a process (opsched.services.runtime.runner)."""
from opsched import entrypoint

entrypoint.begin(service=True)  # before anything imports nats-py; SIGTERM: exit 0 until it serves

from opsched.services.admission.service import Admission  # noqa: E402
from opsched.services.runtime.runner import main  # noqa: E402

if __name__ == "__main__":
    main(Admission)
