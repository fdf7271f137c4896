"""Every polyaxonfile of ``examples/polyaxon/`` (the fields opsched honours, as Polyaxon users write them) submitted
with the CLI to `opsched up` as it starts by default, and run to success on the real control plane. The files at the
top of the folder are operations; its subfolders hold what they reference (components, a hub, overlays). A service
(``SERVICES``) never succeeds: once it is running with its endpoint shown, `opsched stop` ends it ``stopped``, its
normal end."""
from __future__ import annotations

import json

from opsched.proto.lifecycle import TERMINAL_LABELS
from tests.e2e.firstday import ROOT

EXAMPLES = sorted((ROOT / "examples" / "polyaxon").glob("*.yaml"))
HUB = "examples/polyaxon/hub"  # the component library of the examples' hubRefs
SERVICES = ("notebook.yaml",)  # run until stopped


def submitted(user, path, *more: str) -> list[str]:
    """The ids of the file's ops (a sweep prints each op's id, then its batch id)."""
    lines = user.ok("submit", str(path.relative_to(ROOT)), "--hub", HUB, *more).split()
    return lines[:-1] if len(lines) > 1 else lines


def test_every_example_runs_to_success_its_outputs_and_hooks_included(default_up):
    assert EXAMPLES, "examples/polyaxon/ holds the example operations"
    ids = {path.name: submitted(default_up, path) for path in EXAMPLES}
    overlay = "examples/polyaxon/overlays/lr-small.yaml"  # a later -f file: params only
    ids["train-pathref.yaml -f lr-small.yaml"] = submitted(default_up, ROOT / "examples/polyaxon/train-pathref.yaml",
                                                           "-f", overlay)
    hooked = ids["hooks.yaml"][0]
    report, paged = f"{hooked}-hook-0", f"{hooked}-hook-1"  # the succeeded hook runs; the failed one never exists
    every = [op_id for file_ids in ids.values() for op_id in file_ids] + [report]
    services = [op_id for name in SERVICES for op_id in ids[name]]

    def serving(rows):
        return rows if all(rows.get(i, {}).get("status") == "running" and rows[i]["endpoint"] for i in services) \
            else None
    rows = default_up.until(serving, "every service example running, its endpoint shown", timeout=120)
    for op_id in services:
        assert rows[op_id]["endpoint"]["portForward"].startswith("kubectl port-forward -n ")
        default_up.ok("stop", op_id)

    def ended(rows):
        return rows if all(rows.get(i, {}).get("status") in TERMINAL_LABELS for i in every) else None
    rows = default_up.until(ended, "every example op (and the hook it triggers) ended", timeout=240)
    failed = {name: [(i, rows[i]["status"], rows[i]["reason"]) for i in file_ids
                     if rows[i]["status"] != ("stopped" if name in SERVICES else "succeeded")]
              for name, file_ids in ids.items()}
    assert not any(failed.values()), failed
    assert rows[report]["status"] == "succeeded" and rows[report]["name"] == "report" and paged not in rows

    [row] = json.loads(default_up.ok("ops", ids["outputs.yaml"][0], "-o", "json"))["items"]  # that op only
    assert row["outputs"] == {"loss": 0.12, "model": "runs/m.pt"}
    assert default_up.run("ops", "no-such-op").returncode == 2
