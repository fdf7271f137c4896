"""deploy/grafana/opsched-dashboard.json reads only series the services expose, with labels they carry: a
renamed metric or label fails here, not on someone's dashboard."""
from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client.core import Metric

from opsched.proto.queries import CostAnswer
from opsched.services.admission import metrics as admission_metrics
from opsched.services.admission.measures import Measures
from opsched.services.admission.model.queues import compile_book
from opsched.services.admission.state.admission_state import AdmissionState
from opsched.services.cost import metrics as cost_metrics
from opsched.services.dispatcher.metrics import PodMeasures
from opsched.services.runtime import metrics
from tests.builders import t
from tests.unit.test_runtime_metrics import fake

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "opsched-dashboard.json"
SUFFIXES = ("_bucket", "_sum", "_count", "_total")
SELECTOR = re.compile(r"(opsched_[a-z_]+)(?:\{([^}]*)\})?")
GROUPING = re.compile(r"\bby \(([^)]*)\)")


def exposed() -> dict[str, set[str]]:
    """Every family the services expose (name -> label names), from empty state."""
    from opsched.proto.queues import QueuesConfig

    families: list[Metric] = [
        *metrics.ServicesCollector([fake("admission", leading="leader")]).collect(),
        *admission_metrics.families(AdmissionState(), compile_book(QueuesConfig())),
        *Measures().families(), *PodMeasures().families(), *cost_metrics.families(CostAnswer(at=t(0)))]
    out: dict[str, set[str]] = {}
    for family in families:
        out[family.name] = set(getattr(family, "_labelnames", ()) or ())
    for name, collector in _labelled().items():
        out[name] = collector
    return out


def _labelled() -> dict[str, set[str]]:
    """Label names of the instrumented metrics (their families have no samples until something is counted)."""
    out: dict[str, set[str]] = {}
    for holder in (Measures(), PodMeasures()):
        for metric in vars(holder).values():
            name = metric._name.removesuffix("_total")  # noqa: SLF001 - prometheus_client keeps it there
            out[name] = set(metric._labelnames)  # noqa: SLF001
    return out


def test_the_label_names_are_read_from_the_families():
    known = exposed()
    assert known["opsched_ops"] == {"queue", "status"}
    assert known["opsched_preempted_workloads"] == {"preempting_queue", "reason"}
    assert known["opsched_pending_workloads"] == {"queue", "status"}
    assert known["opsched_consumer_pending_messages"] == {"service", "durable"}


def queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def base(name: str) -> str:
    for suffix in SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def test_every_query_reads_an_exposed_series_by_labels_it_has():
    known = exposed()
    names = {base(n) for n in known}
    for expr in queries():
        used = SELECTOR.findall(expr)
        assert used, expr
        for name, _ in used:
            assert base(name) in names, f"{name} in {expr!r} is not exposed"
        have = set().union(*(known.get(base(n), set()) | known.get(n, set()) for n, _ in used)) | {"le"}
        for _, selector in used:
            for label in re.findall(r"(\w+)\s*=~?", selector):
                assert label in have, f"label {label} in {expr!r}"
        for group in GROUPING.findall(expr):
            for label in (x.strip() for x in group.split(",")):
                assert label in have, f"by ({label}) in {expr!r}"


def test_the_dashboard_is_grafana_json_with_a_datasource_variable_and_unique_panel_ids():
    board = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)) >= 15
    assert {v["name"] for v in board["templating"]["list"]} == {"datasource", "queue"}
    assert all(t["datasource"]["uid"] == "${datasource}" for p in board["panels"] for t in p["targets"])
