"""Cost where it runs (``rules.pricing``): an op's price points, the point that prices a set of labels (a flavor's,
a node's), and the bound on a catalogue's points. The issue's test (the same op on a T4 flavor and on an A100 flavor:
two estimates, each the catalogue's) is here on the pure functions; its charges are in test_cost_ledger.py."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto.events import CostEstimated, Money, PricePoint
from opsched.proto.limits import MAX_PRICE_POINTS
from opsched.proto.prices import PricePool, Prices
from opsched.rules.pricing import point_count, point_for, product_of
from opsched.services.cost.estimator import estimate
from opsched.services.cost.prices import load_prices
from tests.builders import GPU, T0, case, case_name, op

PRODUCT = "nvidia.com/gpu.product"
POOL = "cloud.google.com/gke-nodepool"
CATALOGUE = Prices(cpu_hour=0.0, gib_hour=0.0, accelerators={GPU: {"A100": 3.0, "T4": 0.35, "*": 2.0}}, pools=[
    PricePool(name="spot", match={POOL: "spot"}, accelerators={GPU: {"A100": 1.2, "*": 0.8}}),
    PricePool(name="any-spot", match={POOL: "spot"}, cpu_hour=0.0),  # never chosen: "spot" comes first
])


def points_of(spec, prices: Prices = CATALOGUE) -> list[PricePoint]:
    return estimate(spec, prices, 3600.0).points


def test_the_same_op_on_a_t4_flavor_and_on_an_a100_flavor_is_estimated_at_each_catalogue_price():
    spec = op().gpus(2).timeout(3600).build()  # routed by flavor: no product in its own nodeSelector
    points = points_of(spec)
    t4, a100 = point_for(points, {PRODUCT: "T4"}), point_for(points, {PRODUCT: "A100"})
    assert t4 is not None and a100 is not None
    assert (t4.pool, t4.product, t4.amount) == ("", "T4", pytest.approx(0.7))
    assert (a100.pool, a100.product, a100.amount) == ("", "A100", pytest.approx(6.0))
    assert estimate(spec, CATALOGUE, 3600.0).money.amount == pytest.approx(4.0)  # its own selector: any product


@pytest.mark.parametrize("c", [
    case("a product the pool's table names", labels={POOL: "spot", PRODUCT: "A100"}, point=("spot", "A100", 1.2)),
    case("a product the pool's table does not name: its any-product price", labels={POOL: "spot", PRODUCT: "T4"},
         point=("spot", "*", 0.8)),
    case("no pool matches: the defaults", labels={POOL: "standard", PRODUCT: "T4"}, point=("", "T4", 0.35)),
    case("no labels: the defaults for any product", labels={}, point=("", "*", 2.0)),
    case("the GKE accelerator label names the product", labels={"cloud.google.com/gke-accelerator": "A100"},
         point=("", "A100", 3.0)),
    case("the first matching pool wins", labels={POOL: "spot"}, point=("spot", "*", 0.8)),
], ids=case_name)
def test_the_point_for_a_set_of_labels(c):
    found = point_for(points_of(op().gpus(1).timeout(3600).build()), c.labels)
    assert found is not None and (found.pool, found.product, found.hourly) == (c.point[0], c.point[1],
                                                                              pytest.approx(c.point[2]))


def test_points_cover_every_pool_then_the_defaults_for_the_products_of_the_accelerators_asked():
    gpu = [(p.pool, p.product) for p in points_of(op().gpus(1).build())]
    assert gpu == [("spot", "*"), ("spot", "A100"),  # its own table replaces the default one: no T4 there
                   ("any-spot", "*"), ("any-spot", "A100"), ("any-spot", "T4"), ("", "*"), ("", "A100"), ("", "T4")]
    cpu = [(p.pool, p.product) for p in points_of(op().cpu("1").build())]
    assert cpu == [("spot", "*"), ("any-spot", "*"), ("", "*")]  # no accelerator: its price is one per pool


def test_a_point_is_raised_to_the_ops_own_cost_like_the_estimate():
    spec = op().gpus(1).timeout(3600).build()
    spec.cost = 2.5
    found = point_for(points_of(spec), {PRODUCT: "T4"})
    assert found is not None and (found.hourly, found.amount) == (pytest.approx(0.35), 2.5)


def test_no_points_prices_nothing():
    assert point_for([], {PRODUCT: "T4"}) is None
    assert product_of({}) == "*"


def test_a_catalogue_with_more_price_points_than_the_bound_is_refused(tmp_path):
    table = "{" + ", ".join(f"P{i}: 1.0" for i in range(MAX_PRICE_POINTS)) + "}"
    path = tmp_path / "prices.yaml"
    path.write_text(f"accelerators:\n  nvidia.com/gpu: {table}\n")
    with pytest.raises(msgspec.ValidationError, match=f"{MAX_PRICE_POINTS + 1} price points"):
        load_prices(path)
    assert point_count(Prices()) == 5  # the built-in catalogue, no pool: H100, A100, L4, T4 and "*"
    path.write_text("pools: [{name: '', match: {a: b}}]\n")
    with pytest.raises(msgspec.ValidationError, match="needs a name"):
        load_prices(path)


def test_an_estimates_points_are_bounded_on_the_wire():
    point = PricePoint(hourly=1.0, amount=1.0)
    with pytest.raises(msgspec.ValidationError, match="length"):
        msgspec.convert({"opId": "x", "at": T0.isoformat(), "estimate": {"amount": 1.0}, "basis": "default",
                         "durationS": 1.0, "points": [msgspec.to_builtins(point)] * (MAX_PRICE_POINTS + 1)},
                        CostEstimated)
    assert CostEstimated(op_id="x", at=T0, estimate=Money(amount=1.0), basis="default", duration_s=1.0).points == []
