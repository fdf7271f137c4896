"""Queue configuration: every mistake gets a readable error naming its path; the example compiles."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched.rules.queues_file import QueuesConfigError, load_queues, parse_queues
from opsched.services.admission.model.queues import QuotaLine, compile_book
from tests.builders import GPU, GPU_PRODUCT, case, case_name

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def config(flavors: str = "[{name: h100}, {name: a100}]", *, quota: str = "{name: h100, nominal: 2}",
           extra: str = "") -> str:
    """A queue file with one GPU queue "a" whose single flavor quota is ``quota``."""
    return (f"defaultQueue: a\nflavors: {flavors}\n{extra}queues:\n  - name: a\n    resources:\n"
            f"      - resource: nvidia.com/gpu\n        flavors:\n          - {quota}\n")


@pytest.mark.parametrize("c", [
    case("a quota naming a flavor that is not defined",
         text=config("[{name: a100}]"),
         says=["queues[0].resources[0].flavors[0].name: unknown flavor 'h100'", "known: a100, default"]),
    case("a guaranteed quota above the nominal",
         text=config(quota="{name: h100, nominal: 2, guaranteed: 3}"),
         says=["queues[0].resources[0].flavors[0].guaranteed: 3 is more than nominal 2"]),
    case("a nominal that is not a quantity",
         text=config(quota="{name: h100, nominal: two}"),
         says=["queues[0].resources[0].flavors[0].nominal: 'two' is not a Kubernetes quantity"]),
    case("a negative borrowing limit",
         text=config(quota="{name: h100, nominal: 2, borrowingLimit: -1}"),
         says=["queues[0].resources[0].flavors[0].borrowingLimit:", "non-negative", "-1"]),
    case("a lending limit that is not a quantity",
         text=config(quota="{name: h100, nominal: 2, lendingLimit: lots}"),
         says=["queues[0].resources[0].flavors[0].lendingLimit: 'lots' is not a Kubernetes quantity"]),
    case("a nominal that is neither a number nor a string",
         text=config(quota="{name: h100, nominal: true}"),
         says=["queues[0].resources[0].flavors[0].nominal", "bool"]),
    case("a misspelt field of a flavor quota",
         text=config(quota="{name: h100, nominl: 2}"),
         says=["unknown field `nominl`", "queues[0].resources[0].flavors[0]"]),
    case("a misspelt field of a queue",
         text="queues:\n  - {name: default, maxQueud: 3}\n", says=["unknown field `maxQueud`", "queues[0]"]),
    case("a misspelt top-level field",
         text="queues:\n  - {name: default}\nprojectQueue: {vision: default}\n",
         says=["unknown field `projectQueue`"]),
    case("duplicate queue names",
         text="queues:\n  - {name: default}\n  - {name: gpu}\n  - {name: gpu}\n",
         says=["queues: the name 'gpu' is used twice"]),
    case("a project routed to a queue that does not exist",
         text="queues:\n  - {name: default}\nprojectQueues: {vision: gpu}\n",
         says=["projectQueues.vision: 'gpu' is not one of the queues ['default']"]),
    case("a cohort name that is not a DNS label",
         text="queues:\n  - {name: default, cohort: Research_Lab}\n", says=["queues[0].cohort: 'Research_Lab'"]),
    case("a resource listing no flavors",
         text="queues:\n  - name: default\n    resources:\n      - {resource: cpu, flavors: []}\n",
         says=["queues[0].resources[0].flavors: list at least one flavor"]),
    case("a negative cost quota",
         text="queues:\n  - {name: default, costQuota: -1}\n", says=["queues[0].costQuota"]),
    case("a negative maxQueued",
         text="queues:\n  - {name: default, maxQueued: -1}\n", says=["queues[0].maxQueued"]),
    case("duplicate flavor names",
             text=config("[{name: h100}, {name: h100, nodeLabels: {pool: spot}}]"),
             says=["flavors", "'h100' is used twice"]),
    case("the same flavor twice in one resource of a queue",
             text=config(quota="{name: h100, nominal: 2}\n          - {name: h100, nominal: 4}"),
             says=["queues[0].resources[0].flavors[1].name", "'h100'"]),
    case("the same resource twice in one queue",
             text=config(quota="{name: h100, nominal: 2}\n      - resource: nvidia.com/gpu\n        flavors:\n"
                               "          - {name: a100, nominal: 4}"),
             says=["queues[0].resources[1].resource", "nvidia.com/gpu"]),
], ids=case_name)
def test_a_bad_queue_config_gives_a_readable_error_naming_the_path(c):
    with pytest.raises(QueuesConfigError) as info:
        parse_queues(c.text, "team.yaml")
    message = str(info.value)
    assert message.startswith("team.yaml: ")
    for text in c.says:
        assert text in message
    assert "Traceback" not in message


def test_every_problem_is_listed_at_once():
    text = ("defaultQueue: nope\nqueues:\n  - name: a\n    resources:\n      - resource: nvidia.com/gpu\n"
            "        flavors:\n          - {name: h100, nominal: two}\n          - {name: default, nominal: 1, "
            "guaranteed: 2}\n")
    message = str(pytest.raises(QueuesConfigError, parse_queues, text).value)
    assert "defaultQueue: 'nope'" in message
    assert "queues[0].resources[0].flavors[0].name: unknown flavor 'h100'" in message
    assert "queues[0].resources[0].flavors[0].nominal: 'two' is not a Kubernetes quantity" in message
    assert "queues[0].resources[0].flavors[1].guaranteed: 2 is more than nominal 1" in message


def test_a_file_with_a_bad_quota_names_the_file_and_the_path(tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(config(quota="{name: h100, nominal: 2, guaranteed: 3}"))
    with pytest.raises(QueuesConfigError) as info:
        load_queues(path)
    assert str(info.value).startswith(str(path))
    assert "queues[0].resources[0].flavors[0].guaranteed" in str(info.value)


def test_a_good_config_compiles_quantities_into_numbers():
    text = config(quota="{name: h100, nominal: '4', borrowingLimit: 2, lendingLimit: 1, guaranteed: 1}")
    b = compile_book(parse_queues(text))
    assert b.quotas["a"] == {(GPU, "h100"): QuotaLine(nominal=4.0, borrowing_limit=2.0, lendable=1.0)}


@pytest.mark.parametrize("c", [
    case("without limits everything is lendable", quota="{name: h100, nominal: 4}", lendable=4.0),
    case("the guaranteed part is not lendable", quota="{name: h100, nominal: 4, guaranteed: 3}", lendable=1.0),
    case("the lending limit caps what is lendable", quota="{name: h100, nominal: 4, lendingLimit: 2}", lendable=2.0),
    case("the smaller of the guaranteed rest and the lending limit wins",
         quota="{name: h100, nominal: 4, guaranteed: 3, lendingLimit: 2}", lendable=1.0),
    case("a quantity in milli-units is a fraction", quota="{name: h100, nominal: 1500m}", lendable=1.5),
], ids=case_name)
def test_lendable_quota(c):
    assert compile_book(parse_queues(config(quota=c.quota))).quotas["a"][(GPU, "h100")].lendable == c.lendable


def test_the_example_queue_file_parses_and_compiles():
    cfg = load_queues(EXAMPLES / "queues.yaml")
    b = compile_book(cfg)
    assert b.default_queue == "default"
    assert b.order == ["a100", "cpu", "default"]  # queue priority, then name
    assert b.cohorts == {"research": ["default", "a100"]}
    assert b.flavor_order["default"] == {GPU: ["a100", "t4"]}
    assert b.flavors["a100"].node_labels == {GPU_PRODUCT: "A100"}
    assert b.quotas["a100"][(GPU, "a100")] == QuotaLine(nominal=1.0, borrowing_limit=1.0, lendable=1.0)
    assert b.queues["cpu"].max_queued == 100 and b.quotas["cpu"] == {}
