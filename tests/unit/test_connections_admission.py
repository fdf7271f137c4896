"""Connections through the services: admission refuses an op naming a connection its queue's configuration does
not declare for it (``unknown_connection``, at submit and again when it admits), and puts the declarations and the
init image on ``admitted``; the dispatcher refuses an ``admitted`` whose connections or init image are not its own
configuration's; the CLI refuses the same before publishing; env values of every container are sealed."""
from __future__ import annotations

import base64

import msgspec
import pytest

from opsched import dryrun
from opsched.bus import logging as oplog
from opsched.proto import codec
from opsched.proto.config import QueuesConfigured
from opsched.proto.events import OperationAdmitted, OperationRejected
from opsched.proto.spec import Container, EnvVar, FileInit, GitInit, InitStep, OpSpec, ReplicaGroup
from opsched.rules.queues_file import parse_queues
from opsched.services.admission.handlers import on_submit
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.cache.fingerprint import fingerprint, key_document
from opsched.services.dispatcher.admitted_checks import QueuesInForce
from opsched.services.runtime.sealing import PREFIX, Sealer
from opsched.services.runtime.service import Context
from opsched.services.runtime.settings import Settings
from tests.builders import T0, gates_cleared, submit, submitted
from tests.builders.clock import FakeClock
from tests.unit.admission_scenarios import NS, decide, fold

QUEUES = """
queues: [{name: default}, {name: gpu, initImage: "registry.local/git:2"}]
connections:
  - {name: repo, kind: git, schema: {url: "https://git.example/ml/models.git"}, secret: {name: repo-token}}
"""
CONFIG = parse_queues(QUEUES)


def spec(*connections: str, queue: str = "default") -> OpSpec:
    return OpSpec(name="train", queue=queue, container=Container(image="t"), connections=list(connections),
                  init=[InitStep(git=GitInit(), connection="repo"), InitStep(file=FileInit(content="x"))])


@pytest.fixture
def ctx() -> Context:
    return Context(service="admission", clock=FakeClock(T0), settings=Settings(), log=oplog.get("test"))


def test_a_submit_naming_an_undeclared_connection_is_rejected_saying_which(ctx):
    event = on_submit(submit(spec("repo", "vault"), op_id="a"), ctx, AdmissionState(), compile_book(CONFIG))
    assert isinstance(event, OperationRejected) and event.reason == "unknown_connection"
    assert event.message == ("connections[1]: connection 'vault' is not declared in the queue configuration "
                             "(declared: repo)")


def test_admission_puts_the_connections_declarations_and_the_queues_init_image_on_admitted():
    state = fold(submitted(spec("repo", queue="gpu"), op_id="a"), *gates_cleared("a"))
    [event] = decide(state, compile_book(CONFIG))
    assert isinstance(event, OperationAdmitted)
    assert event.connections == CONFIG.connections and event.init_image == "registry.local/git:2"
    assert b"repo-token" in codec.encode(event)  # the Secret's name, and nothing of its value, is on the bus


def test_an_op_whose_connection_was_removed_since_its_submit_is_rejected_when_it_would_be_admitted():
    state = fold(submitted(spec("repo"), op_id="a"), *gates_cleared("a"))
    [event] = decide(state, compile_book(parse_queues("queues: [{name: default}]")))
    assert isinstance(event, OperationRejected) and event.reason == "unknown_connection"
    assert "connection 'repo' is not declared" in event.message


async def test_the_dispatcher_refuses_an_admitted_whose_connections_are_not_its_configurations():
    queues = QueuesInForce(NS, oplog.get("test"))
    await queues.on_message(codec.encode(QueuesConfigured(config=CONFIG, at=T0, source="test")), 1)
    state = fold(submitted(spec("repo"), op_id="a"), *gates_cleared("a"))
    [event] = decide(state, compile_book(CONFIG))
    assert queues.problems(event) == []
    other = msgspec.structs.replace(CONFIG.connections[0], secret=msgspec.structs.replace(
        CONFIG.connections[0].secret, name="cluster-admin"))
    assert queues.problems(msgspec.structs.replace(event, connections=[other], init_image="evil:1")) == [
        "connections ['repo'] are not those the configuration declares for the op in queue default (['repo']), or "
        "not as it declares them", "init image 'evil:1' is not queue default's ('alpine/git:v2.36.1')"]


def test_the_cli_refuses_an_undeclared_connection_and_builds_the_pods_of_a_declared_one():
    specs = [spec("repo"), spec("vault")]
    found = dryrun.refusals(specs, specs, ["a", "b"], CONFIG)
    assert found == ["connections[0]: connection 'vault' is not declared in the queue configuration (declared: repo)"]
    pod = dryrun.pods_of(specs[0], "a", CONFIG)[0]
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["init-git-0", "init-file-1"]
    assert {"name": "opsched-conn-repo", "secret": {"secretName": "repo-token"}} in pod["spec"]["volumes"]


def test_the_env_of_init_containers_and_sidecars_is_sealed_on_the_bus_and_opened_for_the_pod():
    sealer = Sealer(base64.b64decode(base64.b64encode(b"k" * 64)))
    secret = [EnvVar(name="TOKEN", value="s3cr3t")]
    s = OpSpec(name="t", container=Container(image="m"),
               init=[InitStep(container=Container(image="i", name="i", env=secret))],
               sidecars=[Container(image="s", name="s", env=secret)],
               replicas=[ReplicaGroup(name="w", container=Container(image="w"),
                                      sidecars=[Container(image="s", name="s", env=secret)])])
    sealed = sealer.seal(s)
    values = [sealed.init[0].container.env[0].value, sealed.sidecars[0].env[0].value,
              sealed.replicas[0].sidecars[0].env[0].value]
    assert all(v.startswith(PREFIX) for v in values) and b"s3cr3t" not in codec.encode(sealed)
    assert sealer.unseal(sealed) == s


def test_the_cache_keys_on_every_init_step_sidecar_and_connection_and_an_op_without_keys_as_before():
    plain = OpSpec(name="t", container=Container(image="m"))
    assert set(key_document(plain)["component"]) == {"main", "replicas", "volumes"}
    step = InitStep(git=GitInit(url="https://h/r.git", revision="v1"))
    with_init = msgspec.structs.replace(plain, init=[step])
    other_revision = msgspec.structs.replace(plain, init=[InitStep(git=GitInit(url="https://h/r.git", revision="v2"))])
    keys = {fingerprint(s) for s in (plain, with_init, other_revision,
                                     msgspec.structs.replace(plain, sidecars=[Container(image="s", name="s")]),
                                     msgspec.structs.replace(plain, connections=["repo"]))}
    assert len(keys) == 5
    unkeyed = msgspec.structs.replace(plain, cache=msgspec.structs.replace(plain.cache, sections=["containers"]))
    assert fingerprint(msgspec.structs.replace(unkeyed, init=[step])) == fingerprint(unkeyed)  # sections say so


async def test_the_dispatcher_refuses_an_admitted_naming_a_connection_it_does_not_declare_creating_nothing():
    from opsched.services.dispatcher.dispatch import dispatch
    from opsched.services.runtime.service import Context

    event = msgspec.structs.replace(decide(fold(submitted(spec("repo"), op_id="a"), *gates_cleared("a")),
                                           compile_book(CONFIG))[0], connections=[])
    outcome = await dispatch(event, Context("dispatcher", FakeClock(T0), Settings(), oplog.get("test")), None, None)
    assert isinstance(outcome, OperationRejected) and outcome.reason == "forbidden_pod_spec"
    assert outcome.message == ("connections[0]: connection 'repo' is not declared on the admitted event; "
                               "init[0].connection: connection 'repo' is not declared on the admitted event")
