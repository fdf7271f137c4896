"""`opsched logs`' pure parts: which pod and container a request reads (``services.dispatcher.logs.choose_pod``), how
lines are chunked within the bounds, how a line's time is read, and how the client continues an answer cut short
(``opsched.logstream.continued``); the CLI's exit codes. The whole path: tests/integration/test_backbone.py."""
from __future__ import annotations

import pytest

from opsched.logs_cli import exit_code
from opsched.logstream import continued
from opsched.proto.queries import LOGS_CHUNK_BYTES, LOGS_CHUNK_LINES, LogsChunk, LogsRequest
from opsched.proto.reasons import LogsRefusal, Reason
from opsched.services.dispatcher.attempts import Attempt, Stage
from opsched.services.dispatcher.kobjects import ContainerRef, ObjectMeta, Pod, PodSpec
from opsched.services.dispatcher.logs import (
    LogsRefused,
    PodChoice,
    choose_pod,
    chunks_of,
    parse_stamp,
    since_seconds,
    split_stamp,
)


def pod(name: str, attempt: int, replica: str = "main", hostname: str | None = None,
        containers: tuple[str, ...] = ("main",), node: str | None = "gpu-a") -> Pod:
    return Pod(metadata=ObjectMeta(name=name, namespace="q", labels={"opsched.io/attempt": str(attempt),
                                                                    "opsched.io/replica": replica}),
               spec=PodSpec(containers=[ContainerRef(name=c) for c in containers], hostname=hostname,
                            node_name=node))


GANG = [pod("op-a-1", 1, hostname="master-0", containers=("main", "sidecar")),
        pod("op-a-1-worker-0", 1, "worker-0", hostname="worker-0"), pod("op-a-0", 0)]


def choose(latest: Attempt | None = Attempt("a", 1, Stage.RUNNING), pods: list[Pod] = GANG, known: bool = True,
           **fields) -> PodChoice:
    return choose_pod(LogsRequest(op_id="a", **fields), latest, known, pods)


def refused(**fields) -> LogsRefused:
    with pytest.raises(LogsRefused) as caught:
        choose(**fields)
    return caught.value


def test_the_default_is_the_latest_attempts_main_pod_and_its_first_container():
    assert choose() == PodChoice("q", "op-a-1", "main", 1)
    assert choose(attempt=0) == PodChoice("q", "op-a-0", "main", 0)
    assert choose(container="sidecar").container == "sidecar"


def test_a_replica_is_named_by_its_label_or_its_hostname_in_the_gang():
    assert choose(replica="worker-0").pod == "op-a-1-worker-0"
    assert choose(replica="master-0").pod == "op-a-1"
    assert choose(replica="main").pod == "op-a-1"


def test_each_refusal_names_what_is_wrong_and_what_there_is():
    unknown = refused(replica="worker-7")
    assert unknown.reason == LogsRefusal.UNKNOWN_REPLICA
    assert "main (master-0), worker-0" in str(unknown)
    assert refused(attempt=2).reason == LogsRefusal.UNKNOWN_ATTEMPT
    assert "its containers: main, sidecar" in str(refused(container="x"))
    assert refused(latest=None, known=False).reason == Reason.UNKNOWN_OP
    assert refused(latest=None, known=True).reason == LogsRefusal.NO_POD_YET  # queued: not admitted yet


def test_no_pod_is_not_created_yet_while_dispatching_and_gone_once_it_ran():
    assert refused(latest=Attempt("a", 1, Stage.ADMITTED), pods=[]).reason == LogsRefusal.NO_POD_YET
    assert refused(latest=Attempt("a", 1, Stage.ENDED), pods=[]).reason == LogsRefusal.POD_GONE
    assert refused(latest=Attempt("a", 1, Stage.RUNNING), pods=GANG[2:]).reason == LogsRefusal.POD_GONE
    unbound = refused(pods=[pod("op-a-1", 1, node=None)])  # the API server would answer its log with nothing
    assert unbound.reason == LogsRefusal.NOT_STARTED and "not on a node yet" in str(unbound)


def test_lines_go_in_chunks_within_the_line_and_byte_bounds_and_a_long_line_is_cut():
    lines = [f"line {i}" for i in range(LOGS_CHUNK_LINES * 2 + 1)]
    chunks = chunks_of(lines)
    assert [len(c) for c in chunks] == [LOGS_CHUNK_LINES, LOGS_CHUNK_LINES, 1]
    assert sum(chunks, []) == lines
    big = chunks_of(["x" * (LOGS_CHUNK_BYTES + 10), "y" * (LOGS_CHUNK_BYTES // 2), "z" * (LOGS_CHUNK_BYTES // 2 + 1)])
    assert [[len(line) for line in c] for c in big] == [[LOGS_CHUNK_BYTES], [LOGS_CHUNK_BYTES // 2],
                                                        [LOGS_CHUNK_BYTES // 2 + 1]]


def test_a_lines_time_is_read_to_the_nanosecond_however_the_kubelet_trims_it():
    assert parse_stamp("2027-01-15T08:00:00Z") == 1_800_000_000 * 10**9
    assert parse_stamp("2027-01-15T08:00:00.5Z") == 1_800_000_000 * 10**9 + 500_000_000
    assert parse_stamp("2027-01-15T08:00:00.000000001Z") == 1_800_000_000 * 10**9 + 1
    assert parse_stamp("hello") is None
    assert split_stamp("2027-01-15T08:00:00.5Z hello world") == (1_800_000_000_500_000_000,
                                                                 "2027-01-15T08:00:00.5Z", "hello world")
    assert split_stamp("no time here") == (None, "", "no time here")
    assert since_seconds("2027-01-15T08:00:00Z", 1_800_000_010.2) == 13  # covers it, with a margin
    assert since_seconds("", 0) is None


def test_an_answer_cut_short_is_continued_after_its_last_line_without_the_tail():
    request = LogsRequest(op_id="a", follow=True, tail=5)
    end = LogsChunk(op_id="a", end=True, more=True, last_at="2027-01-15T08:00:00Z", attempt=2)
    again = continued(request, end)
    assert again is not None and (again.after, again.tail, again.attempt, again.follow) == (
        "2027-01-15T08:00:00Z", None, 2, True)
    assert continued(request, LogsChunk(op_id="a", end=True)) is None


def test_the_cli_exits_2_when_what_was_typed_names_nothing_and_1_when_there_is_nothing_now():
    assert exit_code(Reason.UNKNOWN_OP) == exit_code(LogsRefusal.UNKNOWN_REPLICA) == 2
    assert exit_code(LogsRefusal.POD_GONE) == exit_code(LogsRefusal.NO_POD_YET) == 1


async def test_an_answer_drops_the_lines_up_to_after_keeps_the_last_time_and_knows_when_it_is_full():
    from opsched.proto import codec
    from opsched.proto.queries import LOGS_ANSWER_CHUNKS
    from opsched.services.dispatcher.logs import _Answer

    sent: list[LogsChunk] = []

    async def respond(data: bytes) -> None:
        sent.append(codec.decode_logs_chunk(data))
    answer = _Answer(LogsRequest(op_id="a", after="2027-01-15T08:00:01Z"), respond)
    await answer.lines(["2027-01-15T08:00:00Z old", "2027-01-15T08:00:01Z seen", "2027-01-15T08:00:02.5Z new"])
    assert [(c.seq, c.lines, c.last_at) for c in sent] == [(0, ["new"], "2027-01-15T08:00:02.5Z")]
    many = [f"2027-01-15T08:00:03.{i:09d}Z line {i}" for i in range(LOGS_CHUNK_LINES * 70)]
    assert not await answer.lines(many)  # more than an answer holds: it stops when full, never past its bound
    assert answer.seq == LOGS_ANSWER_CHUNKS - 1  # the last message an answer may send is its end
    last = (LOGS_ANSWER_CHUNKS - 2) * LOGS_CHUNK_LINES - 1  # the first chunk held "new"
    assert sent[-1].lines[-1] == f"line {last}" and sent[-1].last_at == f"2027-01-15T08:00:03.{last:09d}Z"
