"""The web view in a real headless browser (Debian's chromium and chromedriver, driven by selenium) while the
demo's examples run on the real control plane with the demo's queues: the ops table fills, an op waits with its
reason and position, ops reach ``succeeded`` (and the failing example ``failed``), an op's timeline and history
open, the queues show their quota. Screenshots are taken; ``OPSCHED_UI_SCREENSHOTS=<folder>`` keeps copies (the docs' pictures)."""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from opsched.demo import EXAMPLES_DIR
from opsched.polyaxonfile import load_polyaxonfile
from opsched.proto.events import OperationFailed, OperationRunning, OperationSucceeded
from opsched.ui.server import WebView
from tests.ui_browser import Page, chrome

EXAMPLES = ["train-2gpu.yaml", "train-1gpu.yaml", "train-1gpu.yaml", "eval-fails.yaml", "cpu-preprocess.yaml"]


@pytest.fixture
def browser(tmp_path: Path):
    driver = chrome(tmp_path / "chromium-profile")
    yield driver
    driver.quit()


@pytest.fixture
async def demo_stack(control_plane, k8s_namespace, sim_nodes, stack_factory, client):
    sim_nodes(("gpu-ui-a100", 2, "A100"), ("gpu-ui-t4", 1, "T4"))
    # pods of its own namespace only: other tests' pods left on the shared API server make no events here
    await stack_factory(kubeconfig=control_plane.kubeconfig, namespace=k8s_namespace, pod_namespaces=k8s_namespace,
                        queues_file=EXAMPLES_DIR / "queues.yaml")
    view = await WebView(client, port=0, interval=1.0).start()
    yield view
    await view.close()


async def test_the_page_shows_the_demo_ops_move_to_their_ends_with_timelines_and_quota(
        demo_stack, browser, client, events, tmp_path):
    page = Page(browser, demo_stack.url)
    await page.open()
    await page.wait_text("#conn", "live")
    await page.wait_text("#no-ops", "no operations yet")
    await page.wait_text("#queues", "nvidia.com/gpu [a100]")  # admission's queues answer, with quota

    ids = {}
    for name in EXAMPLES:
        op_id = await client.submit(load_polyaxonfile(EXAMPLES_DIR / name), requested_by="demo")
        ids.setdefault(name, []).append(op_id)
    everyone = [i for group in ids.values() for i in group]
    await page.wait_rows(len(everyone))  # the table filled, live

    # five GPUs asked of three (and a preemption, a retry): an op waits, and the page says why and where it stands
    waiting = await page.wait_for_js("""
        const row = [...document.querySelectorAll('#ops tbody tr[data-waiting]')].find(r =>
            r.querySelector('.reason').textContent && r.querySelector('.position').textContent);
        return row ? [row.dataset.opId, row.querySelector('.position').textContent] : null;""",
                                     "a queued op with a reason and a position")
    assert waiting[0] in everyone and " of " in waiting[1]
    shots = [await screenshot(browser, tmp_path / "ui-running.png")]

    for op_id in everyone:
        if op_id in ids["eval-fails.yaml"]:
            await events.expect(OperationFailed, op_id, timeout=90)
        else:
            await events.expect(OperationSucceeded, op_id, timeout=90)
    await page.wait_status(ids["train-2gpu.yaml"][0], "succeeded")
    for op_id in everyone:
        await page.wait_status(op_id, "failed" if op_id in ids["eval-fails.yaml"] else "succeeded")
    assert await page.text("#tally") == f"{len(everyone)} ops: 4 succeeded, 1 failed"

    first = ids["train-2gpu.yaml"][0]
    running = events.of(first, OperationRunning)[0]
    await page.click(f"#ops tbody tr[data-op-id='{first}']")
    timeline = await page.wait_for_js("""
        const items = [...document.querySelectorAll('#timeline li')].map(li => li.dataset.event);
        return items.includes('succeeded') ? items : null;""", "the op's timeline")
    assert timeline[0] == "submitted" and {"cost_estimated", "admitted", "running"} <= set(timeline)
    assert f"node={running.node}" in await page.text("#timeline")
    history = await page.wait_for_js("""
        const items = [...document.querySelectorAll('#detail-history li')].map(li => li.textContent);
        return items.some(t => t.includes('succeeded')) ? items : null;""", "the op's history, as `why` answers it")
    assert any(f"running on {running.node}" in t for t in history)  # its history grouped by attempt (issue 32)
    await page.wait_text("#detail-logs", "epochs=3\n[sim] second 1")  # its last lines, through the API server
    await page.wait_text("#queues .queue[data-queue='default'] .usage", "nvidia.com/gpu [a100] 0/2")
    await page.wait_text("#fragmentation", "nvidia.com/gpu [a100]: 2 free on 1 nodes, 0 stranded")

    shots.append(await screenshot(browser, tmp_path / "ui-timeline.png"))
    if os.environ.get("OPSCHED_UI_SCREENSHOTS"):  # a folder: docs/ui-*.png come from here
        for shot in shots:
            shutil.copy(shot, Path(os.environ["OPSCHED_UI_SCREENSHOTS"]) / shot.name)


async def screenshot(browser, path: Path) -> Path:
    await asyncio.to_thread(browser.save_screenshot, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path
