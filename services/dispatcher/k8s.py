"""The Kubernetes API, through the official client. Blocking calls run in the dispatcher's own threads
(``kube_concurrency`` of them, and as many pooled connections), never on the loop nor on asyncio's default
executor, so that the pods of a window of admitted ops are created together.

Raw JSON only: every call passes ``_preload_content=False`` and reads the body in its thread (which also
returns the connection to the pool: a response left unread costs a new TLS handshake on the next call,
about 25 ms of CPU); what is read is decoded with msgspec (``kobjects``), never into the client's models.

Every call has a timeout (``_request_timeout``: a black-holed API server must not hang the dispatcher),
and every failure that means the API server cannot take the call now (``unavailable``: no connection,
a timeout, 5xx, 429) is raised as ``DependencyUnavailable("kubernetes", ...)``, which the handler loop
waits out. 404 and 409 are answers; other 4xx refuse the pod for good (``PodRejected``). A 409 on a pod's
create is success only when the pod already there is of the same op and attempt (its opsched labels):
another's is never adopted (``PodConflict``).

Least privilege (deploy/base/20-rbac.yaml): given its queue namespaces (``OPSCHED_POD_NAMESPACES``),
the dispatcher touches pods only there, one namespace at a time, and creates no namespace. A pod in a
namespace that is not one of them, does not exist, or forbids it (403) is refused for good with the reason
(``NamespaceRefused``): an admin declares each queue namespace and its Role."""
from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import urllib3
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from opsched.bus.errors import DependencyUnavailable
from opsched.proto.reasons import Failure
from opsched.rules.podspec import LABEL_ATTEMPT, LABEL_OP
from opsched.services.dispatcher.kobjects import Pod, decode_pod_list
from opsched.services.dispatcher.metrics import PodMeasures

KUBERNETES = "kubernetes"
DEFAULT_TIMEOUT_S = 15.0
# The transport failing: nothing (or nothing in time) came back from the API server.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    urllib3.exceptions.MaxRetryError, urllib3.exceptions.ProtocolError, urllib3.exceptions.TimeoutError,
    urllib3.exceptions.NewConnectionError, ConnectionError, TimeoutError,
)


def unavailable(exc: BaseException) -> DependencyUnavailable | None:
    """``exc`` as an outage of the API server, or None when it is an answer (404, 409, another 4xx) or a bug.
    Unavailable: connection refused or reset, a timeout, urllib3's MaxRetryError and ProtocolError, a status
    of 5xx, 429 (throttled) or 408, and the client's status 0 (no HTTP answer at all, e.g. a TLS failure)."""
    if isinstance(exc, ApiException):
        status = exc.status or 0
        if status == 0 or status >= 500 or status in (408, 429):
            return DependencyUnavailable(KUBERNETES, f"{status} {exc.reason}".strip())
        return None
    if isinstance(exc, TRANSPORT_ERRORS):
        return DependencyUnavailable(KUBERNETES, f"{type(exc).__name__}: {exc}"[:300])
    return None


@dataclass(frozen=True)
class CreateResult:
    created: bool  # False when the pod already existed (409: a redelivery)


class PodRejected(Exception):
    """The API refused the pod for good (4xx other than 409/429)."""

    reason = Failure.POD_REJECTED  # of the attempt's ``failed``

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class PodConflict(PodRejected):
    """A pod of that name exists (409) and is not of the same op and attempt: it is not adopted."""

    reason = Failure.POD_CONFLICT

    def __init__(self, name: str, namespace: str, owner: str) -> None:
        super().__init__(409, f"pod {name} already exists in namespace {namespace} and belongs to {owner}, "
                              "not to this attempt; it is not adopted")


class NamespaceRefused(PodRejected):
    """The pod's namespace is not the dispatcher's to use: not one of its queue namespaces, missing, or
    forbidden by RBAC. An admin fixes it (deploy/base/22-queue-namespace-*.yaml)."""

    reason = Failure.NAMESPACE_REFUSED

    def __init__(self, status: int, namespace: str, why: str) -> None:
        super().__init__(status, f"namespace {namespace} {why}; an admin declares each queue namespace with the "
                                 "dispatcher's Role there and lists it in OPSCHED_POD_NAMESPACES "
                                 "(deploy/base/22-queue-namespace-*.yaml)")
        self.namespace = namespace


def load_api_client(kubeconfig: Path | None, connections: int = 16) -> client.ApiClient:
    """From an explicit kubeconfig, else $KUBECONFIG/~/.kube/config, else in-cluster; with a pool of at
    least ``connections`` connections to the API server (one per call in flight)."""
    if kubeconfig is not None:
        api = config.new_client_from_config(config_file=str(kubeconfig))
    else:
        try:
            api = config.new_client_from_config()
        except config.ConfigException:
            config.load_incluster_config()
            api = client.ApiClient()
    if not api.configuration.verify_ssl:  # the kubeconfig asked for it (e.g. the local control plane)
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    if (api.configuration.connection_pool_maxsize or 0) < connections:
        api.configuration.connection_pool_maxsize = connections
        api.rest_client = type(api.rest_client)(api.configuration)  # its pool is sized when it is built
    return api


class Kube:
    namespaces: tuple[str, ...] = ()  # the queue namespaces it may use; empty: every namespace
    executor: Executor | None = None  # its threads (None: asyncio's default executor)

    def __init__(self, api_client: client.ApiClient, request_timeout_s: float = DEFAULT_TIMEOUT_S,
                 namespaces: tuple[str, ...] = (), concurrency: int = 16) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.request_timeout_s = request_timeout_s
        self.namespaces = namespaces
        self.executor = ThreadPoolExecutor(concurrency, thread_name_prefix="kube")
        self.measures = PodMeasures()

    async def call(self, method: Callable[..., Any], *args: Any, timeout_s: float | None = None,
                   **kwargs: Any) -> bytes:
        """``method(*args, **kwargs)`` in one of its threads, with the request timeout (or ``timeout_s``),
        for the raw body (``_preload_content=False``), which is returned; an outage of the API server
        raised as ``DependencyUnavailable``."""
        call = functools.partial(_body, method, *args, _request_timeout=timeout_s or self.request_timeout_s,
                                 _preload_content=False, **kwargs)
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, call)
        except Exception as exc:
            outage = unavailable(exc)
            if outage is None:
                raise
            raise outage from exc

    async def create_pod(self, body: dict[str, Any]) -> CreateResult:
        """``_create_or_own``, timed and counted (``measures``)."""
        began = time.perf_counter()
        try:
            result = await self._create_or_own(body)
        except Exception as exc:
            self.measures.failed(exc)
            raise
        self.measures.done(time.perf_counter() - began, result.created)
        return result

    async def _create_or_own(self, body: dict[str, Any]) -> CreateResult:
        """Create the pod (``NamespaceRefused`` if its namespace is not to be used, see above). A pod already
        there (409) is this one (``created=False``) if it carries the same op and attempt labels; else
        ``PodConflict``. One created and deleted between the 409 and the read is created again, once."""
        name, ns = body["metadata"]["name"], body["metadata"]["namespace"]
        for _ in range(2):
            try:
                await self._create(body)
                return CreateResult(created=True)
            except ApiException as exc:
                if exc.status != 409:
                    _raise_permanent(exc)
                    raise
            labels = await self.pod_labels(name, ns)
            if labels is not None:
                _check_owner(body, labels)
                return CreateResult(created=False)
        raise DependencyUnavailable(KUBERNETES, f"pod {name} in {ns} exists (409) then does not (404) again")

    async def _create(self, body: dict[str, Any]) -> None:
        ns = body["metadata"]["namespace"]
        if self.namespaces and ns not in self.namespaces:
            raise NamespaceRefused(403, ns, f"is not one of the dispatcher's ({', '.join(self.namespaces)})")
        try:
            await self.call(self.core.create_namespaced_pod, ns, body)
        except ApiException as exc:
            if _namespace_missing(exc):
                raise NamespaceRefused(404, ns, "does not exist (the dispatcher creates no namespace)") from None
            if exc.status == 403:
                raise NamespaceRefused(403, ns, f"forbids the dispatcher's pods ({_api_message(exc)})") from None
            raise

    async def pod_labels(self, name: str, namespace: str) -> dict[str, str] | None:
        """The labels of a pod; None if it does not exist."""
        try:
            data = await self.call(self.core.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return _POD.decode(data).metadata.labels or {}

    async def annotate_pod(self, name: str, namespace: str, annotations: dict[str, str]) -> bool:
        """Merge ``annotations`` into the pod's; False if the pod does not exist."""
        body = {"metadata": {"annotations": annotations}}
        try:
            await self.call(self.core.patch_namespaced_pod, name, namespace, body,
                            _content_type="application/merge-patch+json")
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def list_pods(self, selector: str, timeout_s: float | None = None) -> list[Pod]:
        """Pods of its namespaces (else of every namespace) with these labels, decoded into what the
        dispatcher reads of them (``kobjects.Pod``); ``timeout_s`` instead of the request timeout (a long list)."""
        items: list[Pod] = []
        for list_call in self.pod_lists():
            data = await self.call(list_call, label_selector=selector, timeout_s=timeout_s)
            items += decode_pod_list(data).items
        return items

    def pod_lists(self) -> list[Callable[..., Any]]:
        """One list call per queue namespace (RBAC grants no more); one of every namespace without them."""
        if not self.namespaces:
            return [self.core.list_pod_for_all_namespaces]
        return [functools.partial(self.core.list_namespaced_pod, ns) for ns in self.namespaces]

    async def pod_names(self, namespace: str, selector: str) -> list[str]:
        data = await self.call(self.core.list_namespaced_pod, namespace, label_selector=selector)
        return [pod.metadata.name for pod in decode_pod_list(data).items]

    async def create_service(self, body: dict[str, Any]) -> bool:
        """Create an attempt's Service (a gang's rendezvous: ``rules.rendezvous``; a service's: ``rules.serving``);
        False when it exists (409: its name is
        the attempt's). A refusal is the attempt's (``PodRejected``), as a pod's is."""
        return await self._create_owned(self.core.create_namespaced_service, body, "Service")

    async def create_config_map(self, body: dict[str, Any]) -> bool:
        """Create an mpijob attempt's hostfile ConfigMap (``rules.rendezvous``); as ``create_service``."""
        return await self._create_owned(self.core.create_namespaced_config_map, body, "hostfile ConfigMap")

    async def _create_owned(self, create: Callable[..., Any], body: dict[str, Any], what: str) -> bool:
        name, ns = body["metadata"]["name"], body["metadata"]["namespace"]
        if self.namespaces and ns not in self.namespaces:
            raise NamespaceRefused(403, ns, f"is not one of the dispatcher's ({', '.join(self.namespaces)})")
        try:
            await self.call(create, ns, body)
        except ApiException as exc:
            if exc.status == 409:
                return False
            if 400 <= exc.status < 500 and exc.status != 429:
                raise PodRejected(exc.status, f"the attempt's {what} {name} in {ns} was refused: "
                                              f"{_api_message(exc)}") from None
            raise
        return True

    async def delete_service(self, name: str, namespace: str) -> bool:
        """Delete an attempt's Service (a gang's rendezvous, a service's); False if it was not there."""
        return await self._delete_owned(self.core.delete_namespaced_service, name, namespace)

    async def delete_config_map(self, name: str, namespace: str) -> bool:
        """Delete an mpijob attempt's hostfile ConfigMap; False if it was not there."""
        return await self._delete_owned(self.core.delete_namespaced_config_map, name, namespace)

    async def _delete_owned(self, delete: Callable[..., Any], name: str, namespace: str) -> bool:
        try:
            await self.call(delete, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def delete_pod(self, name: str, namespace: str, grace_s: int) -> bool:
        try:
            await self.call(self.core.delete_namespaced_pod, name, namespace,
                            grace_period_seconds=grace_s)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


def _body(method: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
    """The raw body of the call's answer, read in full: only then does the connection go back to the pool."""
    return getattr(method(*args, **kwargs), "data", None) or b""


_POD = msgspec.json.Decoder(Pod)


def _namespace_missing(exc: ApiException) -> bool:
    if exc.status != 404:
        return False
    try:
        details = json.loads(exc.body).get("details") or {}
    except (TypeError, ValueError, AttributeError):
        return True  # no readable body: a 404 on a pod create can only be its namespace
    return details.get("kind", "namespaces") == "namespaces"


def _check_owner(body: dict[str, Any], existing: dict[str, str]) -> None:
    """Raise ``PodConflict`` unless the existing pod's op and attempt labels are the body's."""
    wanted = body["metadata"].get("labels") or {}
    if all(existing.get(key) == wanted.get(key) for key in (LABEL_OP, LABEL_ATTEMPT)):
        return
    op, attempt = existing.get(LABEL_OP), existing.get(LABEL_ATTEMPT)
    owner = (f"op {op} attempt {attempt}" if op is not None else
             f"no opsched op (no {LABEL_OP} label)")
    raise PodConflict(body["metadata"]["name"], body["metadata"]["namespace"], owner)


def _raise_permanent(exc: ApiException) -> None:
    if exc.status is not None and 400 <= exc.status < 500 and exc.status not in (408, 429):
        raise PodRejected(exc.status, _api_message(exc)) from None


def _api_message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body).get("message", str(exc.reason))
    except (TypeError, ValueError):
        return str(exc.reason)
