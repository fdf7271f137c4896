"""Red-team tests: what someone holding a service's NATS identity can make opsched do, against the real parts
(the secured nats-server, the control plane). They take the integration tests' Kubernetes fixtures and, like
them, the ``integration`` marker (``tests/conftest.py`` MARKS)."""
from tests.integration.conftest import core_v1, k8s_api, k8s_namespace, sim_nodes, wait_for  # noqa: F401
