"""An op's outputs: what its main container wrote to its termination message, read from the pod as the API returns
it (JSON decoded by the dispatcher's own decoder), onto the ``succeeded`` event; never a failure."""
from __future__ import annotations

import json

import pytest

from opsched.proto.events import OperationSucceeded
from opsched.proto.limits import MAX_OUTPUTS_BYTES
from opsched.services.dispatcher.gang import assess
from opsched.services.dispatcher.kobjects import PODS
from opsched.services.dispatcher.podstatus import view_of
from tests.builders import T0, case, case_name


def api_pod(messages: dict[str, str | None], phase: str = "Succeeded", order: tuple[str, ...] = ("main", "side")):
    """A pod of op ``o`` as the API server returns it: its containers in ``order``, each ended with its message."""
    statuses = [{"name": name, "state": {"terminated": {"exitCode": 0, **({"message": m} if m is not None else {})}}}
                for name, m in messages.items()]
    pod = {"metadata": {"name": "op-o-0", "namespace": "ns",
                        "labels": {"app.kubernetes.io/managed-by": "opsched", "opsched.io/op-id": "o",
                                   "opsched.io/attempt": "0"}},
           "spec": {"nodeName": "n1", "containers": [{"name": n, "image": "i"} for n in order]},
           "status": {"phase": phase, "containerStatuses": statuses}}
    return PODS.object.decode(json.dumps(pod).encode())


def succeeded(pod) -> OperationSucceeded:
    event = assess([view_of(pod)], None, T0)
    assert isinstance(event, OperationSucceeded)
    return event


CASES = [
    case("a JSON object", message='{"loss": 0.25, "model": "m.pt", "epochs": [1, 2]}',
         outputs={"loss": 0.25, "model": "m.pt", "epochs": [1, 2]}, warning=""),
    case("with the newline echo leaves", message='{"a": 1}\n', outputs={"a": 1}, warning=""),
    case("nothing written", message=None, outputs={}, warning=""),
    case("only blanks", message="  \n", outputs={}, warning=""),
    case("not JSON: a warning, no outputs", message="done!", outputs={}, warning="not JSON"),
    case("JSON but not an object", message="[1, 2]", outputs={}, warning="not an object"),
    case("larger than the bound", message=json.dumps({"x": "y" * MAX_OUTPUTS_BYTES}), outputs={},
         warning=f"above {MAX_OUTPUTS_BYTES}"),
]


@pytest.mark.parametrize("c", CASES, ids=case_name)
def test_the_main_containers_termination_message_is_the_ops_outputs(c):
    event = succeeded(api_pod({"main": c.message, "side": '{"not": "mine"}'}))
    assert event.outputs == c.outputs
    assert (c.warning in event.outputs_warning) if c.warning else event.outputs_warning == ""


def test_the_main_container_is_the_pods_first_whatever_the_order_of_the_statuses():
    pod = api_pod({"side": '{"side": 1}', "trainer": '{"main": 1}'}, order=("trainer", "side"))
    assert succeeded(pod).outputs == {"main": 1}


def test_a_pod_that_has_not_succeeded_has_no_outputs_read():
    assert view_of(api_pod({"main": '{"a": 1}'}, phase="Running")).outputs is None
