"""One reason vocabulary (issue 29): every reason a service or the client puts on the wire is a member of a
family of ``proto.reasons``, defined once. Read from the source: a ``reason=`` given as a bare string to a wire
message (or to ``InvalidInput``, a dead letter, a ``structs.replace``) fails here, so the vocabulary stays
single; and the members' texts are pinned, since the wire (and every consumer matching on it) reads the text."""
from __future__ import annotations

import ast
import importlib
import pkgutil
from enum import StrEnum
from pathlib import Path

import msgspec
import pytest

from opsched import proto
from opsched.proto import reasons

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("services", "opsched", "proto", "rules", "bus")
VOCABULARY = ROOT / "proto" / "reasons.py"
REASON_KEYWORDS = frozenset({"reason", "end_reason"})


def _wire_classes() -> frozenset[str]:
    """The names of every msgspec struct ``proto`` defines: what goes on the wire (or into a bucket)."""
    names = set()
    for info in pkgutil.iter_modules(proto.__path__):
        module = importlib.import_module(f"opsched.proto.{info.name}")
        names.update(name for name, cls in vars(module).items()
                     if isinstance(cls, type) and issubclass(cls, msgspec.Struct) and cls.__module__ == module.__name__)
    return frozenset(names)


# besides the wire classes: what carries a reason onto the wire (an error event, a dead letter, a copy of a struct)
CARRIERS = _wire_classes() | {"InvalidInput", "dead_letter", "replace", "_invalid", "terminal_status"}


def _spelled(node: ast.expr | None) -> bool:
    """A reason written out in place: a string literal or an f-string (not a member of ``proto.reasons``); "" is
    no reason (a field's "none given")."""
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)
                                               and node.value != "")


def _callee(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def spelled_reasons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of every reason spelled as a string where it is put on the wire."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _callee(node) in CARRIERS:
            callee = _callee(node)
            spelled = [k.arg for k in node.keywords if k.arg in REASON_KEYWORDS and _spelled(k.value)]
            if callee == "InvalidInput" and node.args and _spelled(node.args[0]):
                spelled.append("its first argument")
            found += [(node.lineno, f"{callee}({arg}=...)") for arg in spelled]
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id in REASON_KEYWORDS and _spelled(node.value)):
            found.append((node.lineno, f"the default of field {node.target.id}"))  # a wire class's default
    return found


def _sources() -> list[Path]:
    return [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py")) if p != VOCABULARY]


# words, not codes: a stop command's ``reason`` is what its user wrote (``opsched stop --reason``)
FREE_TEXT = {"proto/commands.py": ["the default of field reason"]}


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reason_is_spelled_outside_the_vocabulary(path: Path) -> None:
    free = FREE_TEXT.get(str(path.relative_to(ROOT)), [])
    spelled = [(line, what) for line, what in spelled_reasons(ast.parse(path.read_text(), str(path)))
               if what not in free]
    assert not spelled, (f"{path.relative_to(ROOT)}: reasons spelled as strings: {spelled}; "
                         "use (or add) a member of a family of proto/reasons.py")


def test_the_scan_finds_a_spelled_reason() -> None:
    source = '''
OperationRejected(op_id="a", at=now, reason="unknown_queue", message="m")
InvalidInput("not_allowed", "m")
OperationFailed(op_id="a", at=now, reason=f"{x}")
msgspec.structs.replace(run, reason="disabled")
OperationRejected(op_id="a", at=now, reason=Refusal.UNKNOWN_QUEUE, message="m")
class E(Event):
    reason: str = "stopped"
'''
    assert [line for line, _ in spelled_reasons(ast.parse(source))] == [2, 3, 4, 5, 8]


FAMILIES = [v for v in vars(reasons).values() if isinstance(v, type) and issubclass(v, StrEnum) and v is not StrEnum]
# the wire's texts, as they were before the vocabulary: a change here is a wire change (and every consumer's)
PINNED = {
    "Failure": "HandlerFailed AgentLost PodDeleted PodRejected PodConflict NamespaceRefused DeadlineExceeded Error "
               "Failed NodeLost NodeShutdown Evicted Preempted Terminated Shutdown UnexpectedAdmissionError OutOfcpu "
               "OutOfmemory OutOfnvidia.com/gpu message_too_large publish_refused fold_failed",
    "Ending": "Completed cache_hit stopped condition_false resumed culled",
    "Refusal": "invalid_spec invalid_op_id unknown_queue agent_mismatch queue_full unknown_priority_class "
               "priority_too_high approval_rejected not_allowed spec_too_large forbidden_pod_spec unsealable_env "
               "invalid_template invalid_condition rate_limited already_ended already_approved already_stopping "
               "not_on_hold duplicate_op_id not_resumable invalid_queues queues_from_resources invalid_schedule invalid_schedule_id "
               "schedule_exists unknown_schedule malformed_message unknown_connection not_a_running_service queue_unchanged",
    "Eviction": "gang_timeout gang_failed gang_finished pod_rejected unwanted orphaned unschedulable "
                "node_not_provisioned",
    "Preemption": "within_queue reclaim queue_drained",
    "Hold": "is_approved_false cost_above_threshold gpus_above_threshold",
    "CacheMiss": "disabled not_found expired original_failed",
    "DeadLetter": "max_deliveries poison_message notification_undeliverable",
    "ScheduleEnd": "failed max_runs completed no_more_slots end_at",
    "LogsRefusal": "invalid_logs_request no_pod_yet pod_gone unknown_attempt unknown_replica "
                   "unknown_container not_started logs_busy kubernetes_unavailable",
}


def test_the_texts_are_pinned() -> None:
    families = {f.__name__: " ".join(m.value for m in f) for f in FAMILIES if f is not reasons.Reason}
    assert families == PINNED


def test_each_text_means_one_thing() -> None:
    seen: dict[str, str] = {}
    for family in FAMILIES:
        for member in family:
            assert member.value not in seen, f"{family.__name__}.{member.name} repeats {seen[member.value]}"
            seen[member.value] = f"{family.__name__}.{member.name}"


def test_handler_failed_is_defined_once() -> None:
    """The op's end (and dead letter) reason is ``Reason.HANDLER_FAILED``; the attempt's failure, retried as the
    infrastructure's, is ``Failure.HANDLER_GAVE_UP`` (``HandlerFailed``): no other name spells either."""
    defined = []
    for path in [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            names = [n for t in targets for n in ([t, *t.elts] if isinstance(t, ast.Tuple) else [t])]
            defined += [str(path.relative_to(ROOT)) for n in names if isinstance(n, ast.Name) and n.id == "HANDLER_FAILED"]
    assert defined == ["proto/reasons.py"]


def test_members_go_on_the_wire_as_their_text() -> None:
    from datetime import UTC, datetime

    from opsched.proto.codec import decode_event, encode
    from opsched.proto.events import OperationFailed

    event = OperationFailed(op_id="a", at=datetime(2026, 1, 1, tzinfo=UTC), reason=reasons.Failure.AGENT_LOST)
    assert b'"AgentLost"' in encode(event)
    again = decode_event(encode(event))
    assert again == event and type(again.reason) is str  # old and foreign producers' texts decode as before
