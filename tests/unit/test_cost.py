"""The cost estimator: resources x price x expected duration, from a price table."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import Money
from opsched.proto.limits import MAX_COST
from opsched.services.cost.estimator import Prices, estimate, expected_duration
from opsched.services.cost.prices import load_prices
from tests.builders import GPU, case, case_name, op

DEFAULT_S = 3600.0
PRICES = Prices(currency="USD", cpu_hour=0.04, gib_hour=0.005, accelerators={
    GPU: {"A100": 3.0, "T4": 0.35, "*": 2.0},
    "amd.com/gpu": {"*": 1.5},
    "cloud-tpus.google.com/v2": {"MI": 9.0},  # no "*" price
})
NO_FLOOR = msgspec.structs.replace(PRICES, history_floor_seconds=0.0)  # past runs may shorten an estimate


def breakdown_of(builder, prices: Prices = PRICES) -> dict[str, float]:
    return estimate(builder.build(), prices, DEFAULT_S).breakdown


@pytest.mark.parametrize("c", [
    case("an A100 by its product label", builder=op().gpus(2, product="A100"), cost={GPU: 6.0}),
    case("a T4 by its product label", builder=op().gpus(1, product="T4"), cost={GPU: 0.35}),
    case("a product without a price falls back to the any-product price",
         builder=op().gpus(1, product="V100"), cost={GPU: 2.0}),
    case("no product label uses the any-product price", builder=op().gpus(3), cost={GPU: 6.0}),
    case("the GKE accelerator label names the product too",
         builder=op().gpus(1).node_selector("cloud.google.com/gke-accelerator", "A100"), cost={GPU: 3.0}),
    case("another vendor's accelerator has its own table", builder=op().gpus(2, resource="amd.com/gpu"),
         cost={"amd.com/gpu": 3.0}),
    case("an accelerator without a matching price costs nothing",
         builder=op().gpus(1, resource="cloud-tpus.google.com/v2"), cost={"cloud-tpus.google.com/v2": 0.0}),
    case("cpu by the core-hour, millicores included", builder=op().cpu("500m"), cost={"cpu": 0.02}),
    case("memory by the GiB-hour", builder=op().memory("4Gi"), cost={"memory": 0.02}),
    case("memory in decimal units is converted to GiB", builder=op().memory("1073741824"), cost={"memory": 0.005}),
    case("a limit wins over a request of the same resource",
         builder=op().cpu("1").limits(cpu="2"), cost={"cpu": 0.08}),
    case("gpus, cpu and memory together",
         builder=op().gpus(1, product="A100").cpu("4").memory("16Gi"),
         cost={GPU: 3.0, "cpu": 0.16, "memory": 0.08}),
    case("nothing requested costs nothing", builder=op(), cost={}),
], ids=case_name)
def test_hourly_price_of_the_resources(c):
    assert breakdown_of(c.builder) == pytest.approx(c.cost)


def test_the_estimate_is_the_sum_of_its_breakdown_in_the_table_currency():
    prices = msgspec.structs.replace(PRICES, currency="EUR")
    est = estimate(op().gpus(1, product="A100").cpu("4").build(), prices, DEFAULT_S)
    assert est.money == Money(amount=pytest.approx(3.16), currency="EUR")
    assert est.money.amount == pytest.approx(sum(est.breakdown.values()))


@pytest.mark.parametrize("c", [
    case("the termination timeout is the expected duration", timeout=1800, duration=1800.0, basis="timeout"),
    case("without a timeout the default duration is used", timeout=None, duration=DEFAULT_S, basis="default"),
], ids=case_name)
def test_duration_from_termination_timeout_else_default(c):
    spec = op().gpus(1, product="A100").timeout(c.timeout).build()
    assert expected_duration(spec, DEFAULT_S) == (c.duration, c.basis)
    est = estimate(spec, PRICES, DEFAULT_S)
    assert (est.duration_s, est.basis) == (c.duration, c.basis)
    assert est.money.amount == pytest.approx(3.0 * c.duration / 3600)


@pytest.mark.parametrize("c", [
    case("an op's own cost above the catalogue's raises the estimate, and the breakdown says by how much",
         cost=30.0, amount=30.0, basis="explicit", breakdown={GPU: 24.0, "explicit": 6.0}),
    case("an op's own cost below the catalogue's does not lower the estimate", cost=1.25, amount=24.0,
         basis="timeout", breakdown={GPU: 24.0}),
    case("a cost of zero in a spec does not make the op free", cost=0.0, amount=24.0, basis="timeout",
         breakdown={GPU: 24.0}),
    case("a negative cost (the contract refuses it) is ignored, never credited", cost=-10_000.0, amount=24.0,
         basis="timeout", breakdown={GPU: 24.0}),
    case("an infinite cost (the contract refuses it) is ignored", cost=float("inf"), amount=24.0,
         basis="timeout", breakdown={GPU: 24.0}),
    case("a cost that is not a number is ignored", cost=float("nan"), amount=24.0, basis="timeout",
         breakdown={GPU: 24.0}),
], ids=case_name)
def test_an_ops_own_cost_may_only_raise_the_catalogue_estimate(c):
    spec = op().gpus(8, product="A100").timeout(3600).build()  # 8 x 3.0 an hour, one hour
    spec.cost = c.cost  # set after building: a value the contract refuses still arrives here intact
    est = estimate(spec, PRICES, DEFAULT_S)
    assert (est.money, est.basis, est.breakdown) == (Money(amount=c.amount, currency="USD"), c.basis, c.breakdown)
    assert est.money.amount == pytest.approx(sum(est.breakdown.values()))
    assert est.duration_s == 3600.0


def test_the_built_in_prices_know_the_common_gpus():
    est = estimate(op().gpus(1, product="H100").build(), Prices(), DEFAULT_S)
    assert est.money.amount == pytest.approx(6.0)


def test_prices_are_loaded_from_a_yaml_file(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("currency: EUR\ncpuHour: 0.1\ngibHour: 0.01\n"
                    "accelerators:\n  nvidia.com/gpu: {A100: 4.0, '*': 1.0}\n")
    prices = load_prices(path)
    assert prices == Prices(currency="EUR", cpu_hour=0.1, gib_hour=0.01, accelerators={GPU: {"A100": 4.0, "*": 1.0}})
    est = estimate(op().gpus(1, product="A100").cpu("2").timeout(1800).build(), prices, DEFAULT_S)
    assert est.breakdown == pytest.approx({GPU: 2.0, "cpu": 0.1})
    assert est.money.currency == "EUR"


def test_without_a_file_the_built_in_prices_are_used(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_prices(None) == Prices() == load_prices(empty)


def test_a_price_of_the_wrong_type_is_refused(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("cpuHour: cheap\n")
    with pytest.raises(msgspec.ValidationError, match="cpuHour"):
        load_prices(path)


def test_a_misspelt_price_key_is_refused_not_ignored(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("cpu_hour: 1.0\n")
    with pytest.raises(msgspec.ValidationError):
        load_prices(path)


TPU = "cloud-tpus.google.com/v2"


@pytest.mark.parametrize("c", [
    case("an H100-hour", builder=op().gpus(1, product="H100"), cost={GPU: 6.0}),
    case("an A100-hour", builder=op().gpus(1, product="A100"), cost={GPU: 3.0}),
    case("a T4-hour", builder=op().gpus(1, product="T4"), cost={GPU: 0.35}),
    case("a TPU v2 by the device-hour", builder=op().gpus(8, resource=TPU), cost={TPU: 36.0}),
    case("a CPU-hour", builder=op().cpu("1"), cost={"cpu": 0.04}),
    case("a GiB-hour", builder=op().memory("1Gi"), cost={"memory": 0.005}),
], ids=case_name)
def test_the_built_in_catalogue_prices_every_kind_of_resource(c):
    assert breakdown_of(c.builder, Prices()) == pytest.approx(c.cost)


def test_a_gang_prices_every_pod_per_resource():
    # the master and two workers, each one A100, 2 cores and 4 GiB
    spec = op().gpus(1, product="A100").cpu("2").memory("4Gi").replicas("worker", 2).build()
    est = estimate(spec, PRICES, DEFAULT_S)
    assert est.breakdown == pytest.approx({GPU: 9.0, "cpu": 0.24, "memory": 0.06})
    assert est.money.amount == pytest.approx(9.3)


def test_replica_groups_of_different_sizes_add_up():
    spec = op().gpus(2, product="T4").replicas("worker", 3).replicas("ps", 1).build()
    assert estimate(spec, PRICES, DEFAULT_S).breakdown == pytest.approx({GPU: 5 * 2 * 0.35})


@pytest.mark.parametrize("c", [
    case("without past runs the default is used", timeout=None, runs=[], duration=DEFAULT_S, basis="default"),
    case("fewer than three past runs are not enough", timeout=None, runs=[60.0, 120.0], duration=DEFAULT_S,
         basis="default"),
    case("three past runs give their median", timeout=None, runs=[600.0, 60.0, 120.0], duration=120.0,
         basis="history"),
    case("an even number of runs gives the mean of the middle two", timeout=None, runs=[10.0, 20.0, 30.0, 40.0],
         duration=25.0, basis="history"),
    case("only the last twenty runs count", timeout=None, runs=[10_000.0] * 15 + [100.0] * 20, duration=100.0,
         basis="history"),
    case("the termination timeout wins over past runs", timeout=900, runs=[60.0, 60.0, 60.0], duration=900.0,
         basis="timeout"),
], ids=case_name)
def test_the_expected_duration_order_is_timeout_then_median_of_past_runs_then_default(c):
    """With the catalogue's history floor at 0 (``historyFloorSeconds: 0``), past runs may shorten an estimate."""
    spec = op().gpus(1, product="A100").timeout(c.timeout).build()
    assert expected_duration(spec, DEFAULT_S, c.runs, floor_s=0.0) == (c.duration, c.basis)
    est = estimate(spec, NO_FLOOR, DEFAULT_S, c.runs)
    assert (est.duration_s, est.basis) == (c.duration, c.basis)
    assert est.money.amount == pytest.approx(3.0 * c.duration / 3600, abs=1e-6)
    assert est.runs == (min(len(c.runs), 20) if c.basis == "history" else 0)


@pytest.mark.parametrize("runs,floor,duration,basis", [
    ([60.0, 60.0, 60.0], None, DEFAULT_S, "floor"),  # unset: the default duration is the floor
    ([60.0, 60.0, 60.0], 600.0, 600.0, "floor"),  # an admin's floor
    ([7200.0, 7200.0, 7200.0], None, 7200.0, "history"),  # past runs still lengthen it
    ([900.0, 900.0, 900.0], 600.0, 900.0, "history"),
])
def test_short_past_runs_never_drive_an_estimate_below_the_catalogues_price_for_the_floor(runs, floor, duration,
                                                                                         basis):
    prices = msgspec.structs.replace(PRICES, history_floor_seconds=floor)
    est = estimate(op().gpus(1, product="A100").build(), prices, DEFAULT_S, runs)
    assert (est.duration_s, est.basis, est.runs) == (duration, basis, 3)
    assert est.money.amount == pytest.approx(3.0 * duration / 3600, abs=1e-6)


def test_a_timeout_is_priced_whatever_the_past_runs_and_the_floor():
    prices = msgspec.structs.replace(PRICES, history_floor_seconds=7200.0)
    est = estimate(op().gpus(1, product="A100").timeout(900).build(), prices, DEFAULT_S, [60.0] * 3)
    assert (est.duration_s, est.basis) == (900.0, "timeout")


def test_the_history_floor_is_read_from_the_catalogue_in_camel_case():
    assert msgspec.yaml.decode(b"historyFloorSeconds: 60", type=Prices).history_floor_seconds == 60.0
    with pytest.raises(msgspec.ValidationError):
        msgspec.yaml.decode(b"historyFloorSeconds: -1", type=Prices)


def test_an_ops_own_cost_that_raises_the_estimate_keeps_the_duration_of_past_runs():
    est = estimate(op().gpus(1).cost(4.0).build(), NO_FLOOR, DEFAULT_S, [300.0, 300.0, 300.0])
    assert (est.money.amount, est.basis, est.duration_s, est.runs) == (4.0, "explicit", 300.0, 3)
    assert est.breakdown == pytest.approx({GPU: 2.0 * 300 / 3600, "explicit": 4.0 - 2.0 * 300 / 3600}, abs=1e-6)


def test_a_negative_or_infinite_price_never_makes_a_negative_or_infinite_estimate():
    prices = msgspec.structs.replace(PRICES, cpu_hour=-1.0, accelerators={GPU: {"*": float("inf")}})
    est = estimate(op().gpus(1).cpu("4").build(), prices, DEFAULT_S)
    assert est.breakdown == {"cpu": 0.0, GPU: MAX_COST}
    assert est.money.amount == MAX_COST
