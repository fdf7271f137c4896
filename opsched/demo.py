"""The demo `opsched up --demo` runs: submit the examples, show progress, show the pods they got."""
from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from opsched.client import Client
from opsched.polyaxonfile import load_polyaxonfile
from opsched.tables import queues_table
from opsched.view import table

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
EXPECTED_FAILURES = {"eval-fails.yaml"}
TIMEOUT_S = 240


LATE_EXAMPLES = ["urgent-1gpu.yaml", "ddp-3x1gpu.yaml"]  # once GPUs are busy: preemption, then a gang


async def run_demo(nats_url: str, kubeconfig: Path | None, namespace: str, examples: list[str],
                   credentials=None, ca_file: Path | None = None, agents: dict[str, Path] | None = None) -> int:
    client = await Client.connect(nats_url, "opsched-demo", credentials=credentials, ca_file=ca_file)
    try:
        expected = await _submit_all(client, examples)
        print("\n" + queues_table(await client.queues()), flush=True)
        await _until_busy(client, set(expected))
        print("\nGPUs are busy; now an urgent op (priority class urgent) and a 3-pod DDP gang:", flush=True)
        expected.update(await _submit_all(client, LATE_EXAMPLES))
        rows = await _show_progress(client, set(expected))
    finally:
        await client.close()
    if kubeconfig is not None:
        await _print_pods(kubeconfig, namespace)
    for agent, cluster in (agents or {}).items():
        await _print_pods(cluster, namespace, f"{agent}'s API server")
    return _verdict(rows, expected)


async def _submit_all(client: Client, examples: list[str]) -> dict[str, str]:
    expected: dict[str, str] = {}
    for name in examples:
        spec = load_polyaxonfile(EXAMPLES_DIR / name)
        op_id = await client.submit(spec, requested_by="demo")
        expected[op_id] = "failed" if name in EXPECTED_FAILURES else "succeeded"
        print(f"submitted {name:<22} as {op_id}", flush=True)
    return expected


async def _until_busy(client: Client, ids: set[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = [r for r in await client.ops() if r.op_id in ids]
        if sum(r.status == "running" for r in rows) >= 3 or all(r.terminal for r in rows):
            return
        await asyncio.sleep(0.3)


async def _show_progress(client: Client, ids: set[str]):
    deadline = time.monotonic() + TIMEOUT_S
    last = ""
    while True:
        rows = [r for r in await client.ops() if r.op_id in ids]
        await _explain_waiting(client, rows)
        text = table(sorted(rows, key=lambda r: r.op_id))
        if text != last:
            print(f"\n--- {time.strftime('%H:%M:%S')} ---\n{text}", flush=True)
            last = text
        if len(rows) == len(ids) and all(r.terminal for r in rows):
            return rows
        if time.monotonic() > deadline:
            print(f"demo: gave up after {TIMEOUT_S}s", file=sys.stderr)
            return rows
        await asyncio.sleep(1.0)


async def _explain_waiting(client: Client, rows) -> None:
    """Show admission's first reason for every op still waiting (`opsched why`)."""
    for row in rows:
        if row.status != "pending":
            continue
        try:
            answer = await client.why(row.op_id, timeout=2)
        except Exception:  # noqa: BLE001 - admission busy: show the table without it
            return
        if answer.reasons:
            row.reason = f"waiting: {answer.reasons[0].message}"


async def _print_pods(kubeconfig: Path, namespace: str, where: str = "the API server") -> None:
    """The pods opsched made, as the API server holds them."""
    from opsched.localcluster.pods import listed
    from opsched.rules.podspec import SELECTOR

    pods = await asyncio.to_thread(listed, kubeconfig, SELECTOR, namespace)
    print(f"\npods on {where} (namespace {namespace}):")
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
        print(f"  {pod['metadata']['name']:<22} node={pod['spec'].get('nodeName') or '-':<12} "
              f"phase={pod['status'].get('phase', '?'):<10} limits={limits}")


def _verdict(rows, expected: dict[str, str]) -> int:
    wrong = [r for r in rows if r.status != expected.get(r.op_id)]
    if wrong or len(rows) != len(expected):
        print(f"\ndemo: unexpected outcome for {[r.op_id for r in wrong]}", file=sys.stderr)
        return 1
    print("\ndemo: every operation ended as expected (the failing example fails on purpose)")
    return 0
