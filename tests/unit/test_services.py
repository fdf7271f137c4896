"""Services (``run.kind: service``): the parser, their pods and ClusterIP Service, when one is running, culling on a
fake clock, touch, and how ``opsched ops`` shows one."""
from __future__ import annotations

import asyncio
import textwrap

import msgspec
import pytest

from opsched.bus.errors import InvalidInput
from opsched.bus.logging import get as get_log
from opsched.polyaxonfile import SpecError, parse_polyaxonfile
from opsched.proto.commands import TouchOperation
from opsched.proto.events import OperationRunning, OperationStopped, OperationTouched, ServiceEndpoint
from opsched.proto.pod_resources import pod_requests
from opsched.proto.reasons import Ending, Refusal
from opsched.rules.podspec import build_pods, rendezvous_service
from opsched.services.dispatcher.attempts import Attempts
from opsched.services.dispatcher.culling import check_culling, culled
from opsched.services.dispatcher.gang import PodView, assess
from opsched.services.runtime.settings import Settings
from opsched.view import OpsView, table
from tests.builders import T0, admitted, t
from tests.builders.clock import FakeClock

SERVICE = """
version: 1.1
kind: component
name: nb
termination: {culling: {timeout: 600}}
run:
  kind: service
  ports: [8888, 6006]
  replicas: 2
  container:
    image: jupyter:1
    resources: {limits: {cpu: "1"}}
"""


def service(text: str = SERVICE):
    return parse_polyaxonfile(textwrap.dedent(text))


def errors(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as raised:
        parse_polyaxonfile(textwrap.dedent(text))
    return {e.loc: e.msg for e in raised.value.errors}


# ---- the parser ------------------------------------------------------------------------------------------------

def test_a_service_file_gives_its_ports_replicas_and_culling():
    spec = service()
    assert spec.run_kind == "service" and spec.service is not None
    assert (spec.service.ports, spec.service.replicas, spec.termination.culling.timeout) == ([8888, 6006], 2, 600)
    assert [n for _, n in pod_requests(spec)] == [2]  # both replicas hold quota


@pytest.mark.parametrize("change, loc, words", [
    ("  ports: [8888, 6006]\n", "run.ports", "needs 'ports'"),
    ("  ports: [8888, 8888]\n", "run.ports.1", "named twice"),
    ("  ports: [70000]\n", "run.ports.0", "less than or equal to 65535"),
    ("  ports: [8888]\n  isExternal: true\n", "run.isExternal", "ClusterIP Service only"),
    ("  ports: [8888]\n  environment: {restartPolicy: Never}\n", "run.environment.restartPolicy", "runs until it is stopped"),
    ("  ports: [8888]\n  replicas: 0\n", "run.replicas", "greater than or equal to 1"),
])
def test_a_service_field_that_cannot_be_honoured_is_refused_at_its_line(change, loc, words):
    text = SERVICE.replace("  ports: [8888, 6006]\n  replicas: 2\n",
                           "" if change.startswith("  ports: [8888, 6006]") else change)
    found = errors(text)
    assert loc in found and words in found[loc], found


def test_culling_on_a_job_and_an_activity_probe_are_refused():
    job = SERVICE.replace("kind: service", "kind: job").replace("  ports: [8888, 6006]\n  replicas: 2\n", "")
    assert "culling stops a service" in errors(job)["termination.culling"]
    probe = SERVICE.replace("{culling: {timeout: 600}}", "{culling: {timeout: 600}, probe: {http: {port: 8888}}}")
    assert "opsched touch" in errors(probe)["termination.probe"]


def test_rewrite_path_is_warned_and_recorded():
    with pytest.warns(UserWarning, match="run.rewritePath"):
        spec = service(SERVICE.replace("  replicas: 2\n", "  replicas: 2\n  rewritePath: true\n"))
    assert spec.ignored == ["run.rewritePath"]


# ---- pods and the Service ---------------------------------------------------------------------------------------

def test_a_service_is_its_replicas_restarted_always_probed_on_its_first_port_behind_a_cluster_ip_service():
    event = admitted(service(), op_id="nb1")
    pods = build_pods(event)
    assert [p["metadata"]["name"] for p in pods] == ["op-nb1-0", "op-nb1-0-replica-1"]
    assert [p["metadata"]["labels"]["opsched.io/replica"] for p in pods] == ["main", "replica-1"]
    for p in pods:
        assert p["spec"]["restartPolicy"] == "Always"
        assert p["metadata"]["annotations"]["opsched.io/service-ports"] == "8888,6006"
        main = p["spec"]["containers"][0]
        assert main["readinessProbe"] == {"tcpSocket": {"port": 8888}, "periodSeconds": 5}
        assert not {"MASTER_ADDR", "RANK"} & {e["name"] for e in main["env"]}  # no rendezvous
    svc = rendezvous_service(event)
    assert svc["metadata"]["name"] == "op-nb1-0" and svc["spec"]["type"] == "ClusterIP"
    assert svc["spec"]["selector"] == {"app.kubernetes.io/managed-by": "opsched", "opsched.io/op-id": "nb1",
                                       "opsched.io/attempt": "0"}
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(8888, 8888), (6006, 6006)]


def test_a_service_keeps_its_own_readiness_probe():
    own = SERVICE.replace("    image: jupyter:1\n", "    image: jupyter:1\n    readinessProbe: {httpGet: {path: /api, port: 8888}}\n")
    [main, _] = build_pods(admitted(service(own), op_id="nb1"))
    assert main["spec"]["containers"][0]["readinessProbe"] == {"httpGet": {"path": "/api", "port": 8888}}


def view(name: str, replica: str, *, ready: bool, phase: str = "Running") -> PodView:
    return PodView(name=name, namespace="ns", op_id="nb1", attempt=0, replica=replica, gang_size=2, phase=phase,
                   node="n1", ready=ready, annotations={"opsched.io/service-ports": "8888,6006"})


def test_a_service_is_running_only_once_every_pod_is_ready_with_its_endpoint():
    main, other = view("op-nb1-0", "main", ready=True), view("op-nb1-0-replica-1", "replica-1", ready=False)
    assert assess([main, other], "dispatched", T0) is None  # Running, not Ready: still dispatched
    running = assess([main, view("op-nb1-0-replica-1", "replica-1", ready=True)], "dispatched", T0)
    assert isinstance(running, OperationRunning)
    assert running.endpoint == ServiceEndpoint(name="op-nb1-0", namespace="ns", ports=[8888, 6006])
    assert running.endpoint.host == "op-nb1-0.ns.svc"
    assert running.endpoint.port_forward() == "kubectl port-forward -n ns svc/op-nb1-0 8888:8888 6006:6006"


# ---- culling on a fake clock -------------------------------------------------------------------------------------

def attempts_of(*events) -> Attempts:
    table_ = Attempts()
    for e in events:
        table_.apply(e)
    return table_


def running_service(culling: int = 600) -> list:
    spec = service(SERVICE.replace("timeout: 600", f"timeout: {culling}"))
    return [admitted(spec, op_id="nb1", at=T0), OperationRunning(op_id="nb1", at=t(10), pod_name="op-nb1-0")]


def test_a_service_is_culled_once_idle_for_its_timeout_from_its_start_or_last_touch():
    [attempt] = attempts_of(*running_service()).snapshot()
    assert culled(attempt, t(609)) is None
    stopped = culled(attempt, t(610))
    assert isinstance(stopped, OperationStopped) and stopped.reason == Ending.CULLED
    assert "idle for 600s" in stopped.message and "opsched touch nb1" in stopped.message
    [touched] = attempts_of(*running_service(), OperationTouched(op_id="nb1", at=t(300))).snapshot()
    assert culled(touched, t(899)) is None and culled(touched, t(900)) is not None


def test_a_service_not_running_or_without_culling_is_never_culled():
    [admitted_only] = attempts_of(running_service()[0]).snapshot()
    assert culled(admitted_only, t(10**6)) is None
    spec = msgspec.structs.replace(service(), termination=msgspec.structs.replace(service().termination, culling=None))
    [plain] = attempts_of(admitted(spec, op_id="nb1"), OperationRunning(op_id="nb1", at=T0, pod_name="p")).snapshot()
    assert culled(plain, t(10**6)) is None


class Releaser:
    settings = Settings(stop_grace_s=11)

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def attempt_pods(self, namespace, op_id, attempt, *known):
        return [*known, f"{known[0]}-replica-1"]

    async def release(self, namespace, names, annotations, grace_s, main=None):
        self.calls.append((namespace, names, annotations, grace_s, main))
        return True


async def test_the_culling_check_stops_an_idle_service_when_the_fake_clock_passes_its_timeout():
    table_ = attempts_of(*running_service(culling=60))
    clock, releaser, published, stop = FakeClock(t(10)), Releaser(), [], asyncio.Event()

    async def publish(event):
        published.append(event)
        table_.apply(event)  # as the dispatcher folds what it published
    task = asyncio.create_task(check_culling(table_.snapshot, releaser, publish, clock, stop, get_log("test")))
    await asyncio.sleep(0)
    assert published == []
    for _ in range(12):  # 5 s checks: culled at the first check at or past 70 s
        clock.advance(5)
        for _ in range(5):
            await asyncio.sleep(0)
    stop.set()
    await task
    [event] = published
    assert (event.reason, event.at) == (Ending.CULLED, t(70))
    assert releaser.calls == [("opsched", ["op-nb1-0", "op-nb1-0-replica-1"], {"opsched.io/stopped": "true"}, 11,
                               "op-nb1-0")]


# ---- touch ------------------------------------------------------------------------------------------------------

def test_touch_is_answered_for_a_running_service_and_refused_otherwise():
    from opsched.services.admission.handlers import on_touch
    from opsched.services.runtime.service import Context
    from tests.builders.admission import fold, queued
    from tests.builders.events import dispatched, running

    ctx = Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=get_log("test"))
    job = service(SERVICE.replace("kind: service", "kind: job").replace("  ports: [8888, 6006]\n  replicas: 2\n", "")
                  .replace("termination: {culling: {timeout: 600}}\n", ""))
    state = fold(queued(service(), op_id="nb1"), queued(job, op_id="job1"))
    with pytest.raises(InvalidInput) as refused:
        on_touch(TouchOperation(op_id="nb1"), ctx, state)  # not running yet
    assert refused.value.reason == Refusal.NOT_A_RUNNING_SERVICE and "not running" in str(refused.value)
    with pytest.raises(InvalidInput) as refused:
        on_touch(TouchOperation(op_id="job1"), ctx, state)
    assert refused.value.reason == Refusal.NOT_A_RUNNING_SERVICE and "not a service" in str(refused.value)
    fold(admitted(service(), op_id="nb1"), dispatched("nb1"), running("nb1"), state=state)
    touched = on_touch(TouchOperation(op_id="nb1", requested_by="alice", request_id="r1"), ctx, state)
    assert isinstance(touched, OperationTouched) and (touched.touched_by, touched.request_id) == ("alice", "r1")


# ---- ops ---------------------------------------------------------------------------------------------------------

def test_ops_shows_a_running_service_with_how_to_reach_it():
    v = OpsView()
    v.fold(OperationRunning(op_id="nb1", at=T0, pod_name="op-nb1-0", node="n1",
                            endpoint=ServiceEndpoint(name="op-nb1-0", namespace="ml", ports=[8888])))
    text = table(list(v.rows.values()))
    assert "running" in text
    assert "nb1  serving at op-nb1-0.ml.svc:8888; from here: kubectl port-forward -n ml svc/op-nb1-0 8888:8888" in text
    v.fold(OperationStopped(op_id="nb1", at=t(5), reason=Ending.CULLED, message="idle for 600s"))
    assert "services:" not in table(list(v.rows.values()))
