"""The client half of the runtime: the NATS connection (``Bus``), credentials, connecting, requests, tracing and
logging, and the errors a publish can end in. The SDK and the CLI use it; the services' runtime
(``services.runtime``: the handler loop, leases, health) builds on it. It imports ``proto``, never a service."""

if __name__ != "opsched.bus":  # bus/ is the package opsched.bus (opsched/bus links to it): one name, one copy
    raise ImportError("import opsched.bus, not bus: the repository's bus/ is installed as opsched.bus")
