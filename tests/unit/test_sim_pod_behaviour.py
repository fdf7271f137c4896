"""What a simulated pod does: run time and exit codes from annotations or its command, and the termination message
its script writes (an op's outputs)."""
from __future__ import annotations

import pytest

from opsched.localcluster.nodes import (
    ATTEMPT_LABEL,
    EXIT_CODE_ANNOTATION,
    EXIT_CODES_ANNOTATION,
    RUNTIME_ANNOTATION,
    pod_behaviour,
    terminal_status,
    termination_message,
)
from tests.builders import case, case_name


def pod(*, script: str = "sleep 2", attempt: str | None = None, **annotations: str) -> dict:
    labels = {ATTEMPT_LABEL: attempt} if attempt is not None else {}
    return {"metadata": {"namespace": "ns", "name": "p", "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "main", "command": ["sh", "-c", script]},
                                    {"name": "side", "command": ["sh", "-c", "exit 3"]}]}}


CASES = [
    case("sleep and exit in the command give the run time and exit code",
         pod=pod(script="sleep 1.5; exit 2"), runtime=1.5, code=2),
    case("the runtime and exit-code annotations win over the command",
         pod=pod(script="sleep 9; exit 2", **{RUNTIME_ANNOTATION: "0.5", EXIT_CODE_ANNOTATION: "7"}),
         runtime=0.5, code=7),
    case("exit codes per attempt pick the pod's attempt",
         pod=pod(attempt="1", **{EXIT_CODES_ANNOTATION: "1,2,0"}), runtime=2.0, code=2),
    case("attempt 0 is the first exit code", pod=pod(attempt="0", **{EXIT_CODES_ANNOTATION: "1,1,0"}),
         runtime=2.0, code=1),
    case("attempts beyond the list repeat its last value",
         pod=pod(attempt="5", **{EXIT_CODES_ANNOTATION: "1, 1, 0"}), runtime=2.0, code=0),
    case("a pod without an attempt label is attempt 0", pod=pod(**{EXIT_CODES_ANNOTATION: "4,0"}),
         runtime=2.0, code=4),
    case("per-attempt exit codes win over the single exit code",
         pod=pod(attempt="2", **{EXIT_CODES_ANNOTATION: "1,1,0", EXIT_CODE_ANNOTATION: "9"}), runtime=2.0, code=0),
    case("malformed per-attempt codes fall back to the single exit code",
         pod=pod(attempt="0", **{EXIT_CODES_ANNOTATION: "1,x", EXIT_CODE_ANNOTATION: "9"}), runtime=2.0, code=9),
    case("a malformed runtime keeps the exit-code annotation",
         pod=pod(**{RUNTIME_ANNOTATION: "soon", EXIT_CODES_ANNOTATION: "6"}), runtime=2.0, code=6),
]


@pytest.mark.parametrize("c", CASES, ids=case_name)
def test_pod_behaviour(c):
    behaviour = pod_behaviour(c.pod)
    assert behaviour.runtime == c.runtime
    assert behaviour.exit_codes == {"main": c.code, "side": 3}  # annotations act on the first container only


MESSAGES = [
    case("echo to the default termination log", container={"args": ["echo '{\"loss\": 0.1}' > /dev/termination-log"]},
         message='{"loss": 0.1}'),
    case("sh -c SCRIPT, after other commands, before an exit",
         container={"command": ["sh", "-c", "sleep 1; echo \"{\\\"a\\\": 1}\" > /dev/termination-log && exit 0"]},
         message='{"a": 1}'),
    case("printf with a format", container={"args": ["printf '%s' '{\"acc\": 0.9}' >/dev/termination-log"]},
         message='{"acc": 0.9}'),
    case("an append adds to what was written",
         container={"args": ["echo -n '{\"a\":' > /dev/termination-log; echo ' 1}' >> /dev/termination-log"]},
         message='{"a": 1}'),
    case("the container's own terminationMessagePath",
         container={"terminationMessagePath": "/tmp/out", "args": ["echo '{\"x\": 1}' > /tmp/out"]},
         message='{"x": 1}'),
    case("another file is not the termination message", container={"args": ["echo '{\"x\": 1}' > /tmp/out"]},
         message=None),
    case("nothing written", container={"command": ["python", "train.py"]}, message=None),
    case("unbalanced quotes are no write", container={"args": ["echo '{ > /dev/termination-log"]}, message=None),
]


@pytest.mark.parametrize("c", MESSAGES, ids=case_name)
def test_the_termination_message_a_script_writes(c):
    assert termination_message(c.container) == c.message


def test_a_pod_that_writes_outputs_ends_with_them_as_its_main_containers_termination_message():
    p = pod(script="sleep 1; echo '{\"loss\": 0.1}' > /dev/termination-log")
    p["metadata"]["uid"] = "u1"
    behaviour = pod_behaviour(p)
    status = terminal_status(p, behaviour.exit_codes, messages=behaviour.messages)
    terminated = {s["name"]: s["state"]["terminated"] for s in status["containerStatuses"]}
    assert terminated["main"]["message"] == '{"loss": 0.1}' and "message" not in terminated["side"]
