"""What a simulated container prints (``nodes.container_log``) and how the simulated kubelet's log endpoint reads
its options and picks lines (``kubeletlogs``): the pure parts; tests/integration/test_logs.py reads them through the
real API server."""
from __future__ import annotations

import pytest

from opsched.localcluster.kubeletlogs import (
    LogOptions,
    LogRequestError,
    backlog,
    check_loggable,
    parse_options,
    parse_path,
    rendered,
    stamp,
)
from opsched.localcluster.nodes import LogLine, container_log, next_tick, printed_lines

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
STARTED = "2027-01-15T08:00:00Z"


def pod(state: dict | None, command: list[str] | None = None) -> dict:
    statuses = [{"name": "main", "state": state}] if state is not None else []
    return {"metadata": {"name": "op-a-0", "namespace": "q"},
            "spec": {"containers": [{"name": "main", "command": command or ["sh", "-c", "echo hello; sleep 3"]}]},
            "status": {"containerStatuses": statuses}}


def test_a_container_prints_its_echoes_in_order_and_never_what_goes_to_a_file():
    container = {"command": ["sh", "-c", "echo 'step one' && echo two > /tmp/x; printf 'a\\nb'"],
                 "args": ["echo done"]}
    assert printed_lines(container) == ["step one", "a", "b", "done"]


def test_a_running_container_prints_its_echoes_at_its_start_then_a_line_per_second():
    lines = container_log(pod({"running": {"startedAt": STARTED}}), "main", T0 + 2.5)
    assert [line.text for line in lines] == ["hello", "[sim] second 1", "[sim] second 2"]
    assert [line.at for line in lines] == [T0, T0 + 1, T0 + 2]
    assert next_tick(pod({"running": {"startedAt": STARTED}}), "main", T0 + 2.5) == T0 + 3


def test_an_ended_container_prints_nothing_after_its_end_and_a_waiting_one_nothing_at_all():
    ended = pod({"terminated": {"startedAt": STARTED, "finishedAt": "2027-01-15T08:00:01Z", "exitCode": 0}})
    assert [line.text for line in container_log(ended, "main", T0 + 60)] == ["hello", "[sim] second 1"]
    assert next_tick(ended, "main", T0 + 60) is None
    assert container_log(pod({"waiting": {"reason": "ContainerCreating"}}), "main", T0 + 60) == []


def test_options_are_read_as_the_kubelet_reads_them():
    options = parse_options("follow=true&tailLines=2&timestamps=1&sinceSeconds=10&limitBytes=100", T0)
    assert options == LogOptions(follow=True, tail_lines=2, since=T0 - 10, timestamps=True, limit_bytes=100)
    assert parse_options("sinceTime=2027-01-15T08:00:00Z", T0).since == T0
    for bad, named in (("tailLines=x", "tailLines"), ("sinceSeconds=0", "sinceSeconds"), ("follow=maybe", "follow"),
                       ("sinceSeconds=1&sinceTime=2027-01-15T08:00:00Z", "sinceTime")):
        with pytest.raises(LogRequestError, match=named) as refused:
            parse_options(bad, T0)
        assert refused.value.status == 400
    assert parse_path("/containerLogs/q/op-a-0/main") == ("q", "op-a-0", "main")
    with pytest.raises(LogRequestError) as refused:
        parse_path("/containerLogs/q/op-a-0")
    assert refused.value.status == 404


def test_the_backlog_is_the_lines_since_then_its_tail_and_a_line_may_carry_its_time():
    lines = [LogLine(T0 + i, f"l{i}") for i in range(5)]
    assert [x.text for x in backlog(lines, LogOptions(since=T0 + 1, tail_lines=2))] == ["l3", "l4"]
    assert backlog(lines, LogOptions(tail_lines=0)) == []
    assert rendered(LogLine(T0 + 0.000001, "x"), timestamps=True) == b"2027-01-15T08:00:00.000001000Z x\n"
    assert stamp(T0 + 1) == "2027-01-15T08:00:01.000000000Z"


def test_a_container_not_started_or_a_previous_instance_is_refused_as_the_kubelet_refuses_them():
    with pytest.raises(LogRequestError, match="is waiting to start: ContainerCreating"):
        check_loggable(pod(None), "main", LogOptions())
    with pytest.raises(LogRequestError, match='previous terminated container "main"'):
        check_loggable(pod({"running": {"startedAt": STARTED}}), "main", LogOptions(previous=True))
