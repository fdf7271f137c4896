"""``python -m bench.batches [--n N] [--rounds R]``: what a JetStream atomic batch (nats-server 2.12+) costs the
server, beside the same messages published one by one with 64 in flight (each a request and its ack).

Issue 36 asked for acks per batch instead of per message. Sending the publishes that meet on one connection as one
atomic batch (every message but the last without a reply, one ack for all) was built and measured side by side in
the pipeline ((b): 2.1 x the server CPU per op, half the rate, 1.4 fewer messages an op) and reverted; this
measures why, on a bare server: nats-server's CPU per message stored, for single publishes and for batches of
8, 32 and 128 (300-byte payloads, a Nats-Msg-Id each, as the services publish). Medians of ``--rounds``. A
micro-benchmark (not part of ``python -m bench``), not a test."""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from bench.common import fresh_nats, proc_cpu_s

SIZES = (8, 32, 128)
IN_FLIGHT = 64
PAYLOAD = b"x" * 300


async def one_round(url: str, pid: int, n: int, tag: str) -> dict[str, float]:
    """Server CPU (ms) per message stored: one by one, then in batches of each size."""
    import nats
    from nats.js import api

    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(api.StreamConfig(name=f"B{tag}", subjects=[f"b{tag}.>"], allow_atomic=True))
        out: dict[str, float] = {}

        async def singles(k: int) -> None:
            for j in range(n // IN_FLIGHT):
                await nc.request(f"b{tag}.s.{k}.{j}", PAYLOAD, headers={"Nats-Msg-Id": f"s{k}-{j}"}, timeout=5)
        cpu = proc_cpu_s(pid)
        await asyncio.gather(*(singles(k) for k in range(IN_FLIGHT)))
        out["single"] = (proc_cpu_s(pid) - cpu) * 1000 / (n // IN_FLIGHT * IN_FLIGHT)
        for size in SIZES:
            cpu = proc_cpu_s(pid)
            for b in range(n // size):
                bid = f"{size}-{b}"
                for i in range(1, size):
                    await nc.publish(f"b{tag}.{bid}.{i}", PAYLOAD, headers={
                        "Nats-Msg-Id": f"{bid}-{i}", "Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(i)})
                ack = await nc.request(f"b{tag}.{bid}.{size}", PAYLOAD, timeout=5, headers={
                    "Nats-Msg-Id": f"{bid}-{size}", "Nats-Batch-Id": bid, "Nats-Batch-Sequence": str(size),
                    "Nats-Batch-Commit": "1"})
                if b'"batch"' not in ack.data:
                    raise RuntimeError(f"the server did not take the batch: {ack.data!r}")
            out[f"batch_{size}"] = (proc_cpu_s(pid) - cpu) * 1000 / (n // size * size)
        return out
    finally:
        await nc.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4096, help="messages per way of publishing, per round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as root, fresh_nats(Path(root), "batches") as server:
        assert server.proc is not None
        for r in range(args.rounds):
            rounds.append(asyncio.run(one_round(server.url, server.proc.pid, args.n, str(r))))
    single = statistics.median(r["single"] for r in rounds)
    print(f"| way of publishing (nats-server CPU, median of {args.rounds}) | ms per message | per batch | x one by one |")
    print("|---|---:|---:|---:|")
    print(f"| one by one, {IN_FLIGHT} in flight | {single:.3f} | | 1.00 |")
    for size in SIZES:
        per = statistics.median(r[f"batch_{size}"] for r in rounds)
        print(f"| atomic batches of {size} | {per:.3f} | {per * size:.2f} | {per / single:.2f} |")


if __name__ == "__main__":
    main()
