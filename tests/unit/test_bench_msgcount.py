"""Messages per op from nats-server's counters (bench/msgcount.py), on given /varz and /jsz answers, and their
table and target in the report. No server runs here."""
from __future__ import annotations

import math

import pytest

from bench import msgcount
from bench.report import load_targets, messages_text, summarize


def _jsz(api: int, streams: dict[str, int], consumers: dict[str, tuple[str, int, int, str]]) -> dict:
    """``consumers``: name -> (stream, delivered, ack floor, ack policy)."""
    return {"api": {"total": api, "errors": 0}, "account_details": [{"name": "$G", "stream_detail": [
        {"name": stream, "state": {"messages": last, "last_seq": last},
         "consumer_detail": [{"name": name, "delivered": {"consumer_seq": delivered},
                              "ack_floor": {"consumer_seq": acked}, "config": {"ack_policy": policy}}
                             for name, (of, delivered, acked, policy) in consumers.items() if of == stream]}
        for stream, last in streams.items()]}]}


BEFORE = msgcount.snapshot(
    {"in_msgs": 1000, "out_msgs": 2000},
    _jsz(50, {"OPS": 100, "KV_inhand": 40},
         {"admission": ("OPS", 90, 90, "explicit"), "view": ("OPS", 100, 100, "none")}))


def test_a_snapshot_reads_totals_streams_and_consumers() -> None:
    assert (BEFORE.in_msgs, BEFORE.out_msgs, BEFORE.js_api) == (1000, 2000, 50)
    assert BEFORE.stored == {"$G/OPS": 100, "$G/KV_inhand": 40}
    assert BEFORE.delivered == {"$G/OPS/admission": 90, "$G/OPS/view": 100}
    assert BEFORE.acked == {"$G/OPS/admission": 90}  # an ordered consumer (ack none) acks nothing


def test_counts_break_the_difference_down_by_kind() -> None:
    # 10 ops: 60 events and 20 key-value puts stored; admission fetched and acked 60, the view followed 60;
    # 3 API requests; 30 fetch requests in, 12 expired fetches out
    after = msgcount.snapshot(
        {"in_msgs": 1000 + 80 + 60 + 3 + 30, "out_msgs": 2000 + 80 + 120 + 3 + 12},
        _jsz(53, {"OPS": 160, "KV_inhand": 60},
             {"admission": ("OPS", 150, 150, "explicit"), "view": ("OPS", 160, 160, "none")}))

    got = msgcount.counts(BEFORE, after)

    assert got == {"in": 173, "out": 215, "msgs": 388, "publishes": 80, "pub_acks": 80, "deliveries": 120,
                   "follows": 60, "acks": 60, "js_api": 3, "other_in": 30, "other_out": 12}
    per_op = msgcount.per_op(got, 10)
    assert per_op["msgs_per_op"] == pytest.approx(38.8)
    assert per_op["deliveries_per_op"] == pytest.approx(12.0)
    assert set(per_op) == {f"{k}_per_op" for k in ("msgs", "in", "out", *msgcount.PARTS)}


def test_the_benchs_own_watching_is_taken_off() -> None:
    after = msgcount.snapshot({"in_msgs": 1000, "out_msgs": 2040}, _jsz(50, {"OPS": 100, "KV_inhand": 40}, {
        "admission": ("OPS", 90, 90, "explicit"), "view": ("OPS", 100, 100, "none")}))

    got = msgcount.counts(BEFORE, after, exclude_out=40)

    assert (got["out"], got["msgs"], got["other_out"]) == (0, 0, 0)


def test_a_consumer_born_between_counts_from_zero_and_one_gone_counts_nothing_more() -> None:
    after = msgcount.snapshot({"in_msgs": 1000, "out_msgs": 2000}, _jsz(50, {"OPS": 100, "KV_inhand": 40}, {
        "admission": ("OPS", 90, 90, "explicit"), "fresh": ("OPS", 7, 5, "explicit")}))

    got = msgcount.counts(BEFORE, after)

    assert (got["deliveries"], got["acks"]) == (7, 5)


def test_no_ops_no_figure() -> None:
    assert all(math.isnan(v) for v in msgcount.per_op(msgcount.counts(BEFORE, BEFORE), 0).values())


def test_the_report_shows_each_scenarios_messages_next_to_the_target_even_when_missed() -> None:
    a = {"msgs_per_op": 105.0, "publishes_per_op": 17.0}
    b = {"msgs_per_op": 30.0, "publishes_per_op": 8.0}
    summary, _, verdicts = summarize([{"a_kubernetes": a, "b_pipeline": b}], load_targets())

    text = messages_text(summary, verdicts)

    assert "| per op | (a) | (b) | target |" in text
    assert "| msgs | 105 | 30.0 | (b) ≤ 20 |" in text  # (a)'s count is for reading (issue 36 counted (b)'s path)
    assert "| publishes | 17.0 | 8.00 | – |" in text
    status = {v.name: v.status for v in verdicts}
    assert status["b_pipeline.msgs_per_op"] == "fail" and "a_kubernetes.msgs_per_op" not in status


def test_no_message_table_when_nothing_was_counted() -> None:
    summary, _, verdicts = summarize([{"b_pipeline": {"ops_per_s": 100.0}}], load_targets())

    assert messages_text(summary, verdicts) == ""


def test_by_connection_sums_each_names_connections_and_leaves_the_observer_out() -> None:
    def snap(conns: list[tuple[int, str, int, int]]) -> msgcount.Snapshot:
        return msgcount.snapshot({"in_msgs": 0, "out_msgs": 0}, {}, {"connections": [
            {"cid": cid, "name": name, "in_msgs": i, "out_msgs": o} for cid, name, i, o in conns]})

    before = snap([(1, "admission", 10, 20), (2, "cost", 5, 5), (3, "cost", 1, 1), (4, "bench-observer", 0, 9)])
    after = snap([(1, "admission", 40, 80), (2, "cost", 15, 25), (3, "cost", 1, 1), (4, "bench-observer", 0, 99),
                  (5, "bench-client", 10, 10)])

    assert msgcount.by_connection(before, after, skip=("bench-observer",)) == {
        "admission": 90, "cost": 30, "bench-client": 20}


def test_the_message_table_has_a_row_per_connection_name() -> None:
    summary, _, verdicts = summarize([{"b_pipeline": {"msgs_per_op": 36.0, "conn_admission_msgs_per_op": 12.0,
                                                      "conn_cost_msgs_per_op": 9.5}}], load_targets())

    text = messages_text(summary, verdicts)

    assert "| connection admission | 12.0 | – |" in text
    assert "| connection cost | 9.50 | – |" in text
