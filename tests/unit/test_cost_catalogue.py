"""The price catalogue: per node-pool prices, the YAML file, and how a file becomes the catalogue in
force on the config stream (published when its content is new, an invalid one refused)."""
from __future__ import annotations

import msgspec
import pytest

from opsched.proto import codec, subjects
from opsched.proto.config import PricesConfigured, QueuesConfigured
from opsched.proto.prices import PricePool, Prices
from opsched.proto.queues import QueuesConfig
from opsched.services.admission.config_source import ConfigSource
from opsched.services.cost.estimator import estimate
from opsched.services.cost.prices import BUILTIN, PricesSource, load_prices
from opsched.services.runtime.config_file import ConfigFileError
from tests.builders import GPU, T0, case, case_name, op
from tests.builders.bus import memory_bus
from tests.builders.clock import FakeClock

POOL = "cloud.google.com/gke-nodepool"
CATALOGUE = Prices(cpu_hour=0.04, gib_hour=0.005, accelerators={GPU: {"A100": 3.0, "T4": 0.35, "*": 2.0}}, pools=[
    PricePool(name="spot", match={POOL: "spot"}, cpu_hour=0.01, accelerators={GPU: {"A100": 1.2, "*": 0.8}}),
    PricePool(name="reserved-a100", match={POOL: "reserved", "nvidia.com/gpu.product": "A100"}, cpu_hour=0.02),
    PricePool(name="any-spot", match={POOL: "spot"}, cpu_hour=0.0),  # never chosen: "spot" comes first
])
YAML = """\
currency: EUR
cpuHour: 0.05
accelerators:
  nvidia.com/gpu: {H100: 5.0, A100: 2.5, T4: 0.3, "*": 1.5}
  cloud-tpus.google.com/v2: {"*": 4.0}
pools:
  - name: spot
    match: {cloud.google.com/gke-nodepool: spot}
    cpuHour: 0.01
    accelerators:
      nvidia.com/gpu: {A100: 1.0, "*": 0.6}
"""


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def __getattr__(self, level: str):
        return lambda event, **kw: self.lines.append((level, event, kw))

    def events(self, level: str) -> list[str]:
        return [event for lvl, event, _ in self.lines if lvl == level]


@pytest.mark.parametrize("c", [
    case("an op pinned to the spot pool pays its prices",
         builder=op().gpus(1, product="A100").cpu("2").node_selector(POOL, "spot"),
         pool="spot", cost={GPU: 1.2, "cpu": 0.02}),
    case("a product the pool table lacks takes the pool's any-product price, not the default's",
         builder=op().gpus(1, product="T4").node_selector(POOL, "spot"), pool="spot", cost={GPU: 0.8}),
    case("what a pool leaves unset keeps the default price",
         builder=op().gpus(1, product="A100").cpu("1").memory("2Gi").node_selector(POOL, "reserved")
         .node_selector("nvidia.com/gpu.product", "A100"),
         pool="reserved-a100", cost={GPU: 3.0, "cpu": 0.02, "memory": 0.01}),
    case("a pool matches only when all its labels are in the nodeSelector",
         builder=op().gpus(1, product="T4").cpu("1").node_selector(POOL, "reserved"), pool="",
         cost={GPU: 0.35, "cpu": 0.04}),
    case("an op without a nodeSelector pays the defaults", builder=op().gpus(1), pool="", cost={GPU: 2.0}),
], ids=case_name)
def test_the_first_pool_whose_labels_are_all_in_the_node_selector_prices_the_op(c):
    est = estimate(c.builder.build(), CATALOGUE, 3600.0)
    assert est.pool == c.pool
    assert est.breakdown == pytest.approx(c.cost)


def test_a_catalogue_with_pools_is_loaded_from_yaml(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(YAML)
    prices = load_prices(path)
    assert (prices.currency, prices.cpu_hour, prices.gib_hour) == ("EUR", 0.05, 0.005)
    assert prices.accelerators["cloud-tpus.google.com/v2"] == {"*": 4.0}
    assert prices.pools == [PricePool(name="spot", match={POOL: "spot"}, cpu_hour=0.01,
                                      accelerators={GPU: {"A100": 1.0, "*": 0.6}})]
    assert codec.decode_config(codec.encode(PricesConfigured(prices=prices, at=T0, source="s"))).prices == prices


@pytest.mark.parametrize("c", [
    case("two pools of the same name", text="pools:\n  - {name: a, match: {x: '1'}}\n  - {name: a, match: {y: '1'}}\n",
         error="unique"),
    case("a pool matching every node", text="pools:\n  - {name: a, match: {}}\n", error="match"),
    case("a misspelt pool field", text="pools:\n  - {name: a, match: {x: '1'}, cpu_hour: 1}\n", error="cpu_hour"),
    case("a negative price", text="gibHour: -1\n", error="gibHour"),
], ids=case_name)
def test_an_invalid_catalogue_is_refused(tmp_path, c):
    path = tmp_path / "prices.yaml"
    path.write_text(c.text)
    with pytest.raises(msgspec.ValidationError, match=c.error):
        load_prices(path)


async def test_a_prices_file_is_published_once_per_content_and_put_in_force(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(YAML)
    source, bus = PricesSource(path, FakeClock(), Log()), memory_bus()
    assert (source.source, source.prices) == (BUILTIN, Prices())
    await source.publish_file(bus, at_start=True)
    await source.publish_file(bus, at_start=False)
    [published] = bus.published
    message = codec.decode_config(published.data)
    assert published.subject == subjects.CONFIG_PRICES and published.msg_id.startswith("prices.")
    assert source.prices == load_prices(path) and source.source == message.source
    assert message.source.startswith(f"file:{path}#")
    path.write_text(YAML.replace("cpuHour: 0.05", "cpuHour: 0.06"))
    await source.publish_file(bus, at_start=False)
    assert len(bus.published) == 2 and source.prices.cpu_hour == 0.06


async def test_a_file_already_in_the_stream_is_not_published_again_after_a_restart(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(YAML)
    first, bus = PricesSource(path, FakeClock(), Log()), memory_bus()
    published = await first.publish_file(bus, at_start=True)
    again = PricesSource(path, FakeClock(), Log())
    again.apply(published)  # replayed from the config stream
    assert await again.publish_file(bus, at_start=True) is None and len(bus.published) == 1


async def test_an_invalid_file_at_a_first_start_refuses_to_start(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text("cpuHour: cheap\n")
    with pytest.raises(ConfigFileError, match="cpuHour"):
        await PricesSource(path, FakeClock(), Log()).publish_file(memory_bus(), at_start=True)


async def test_an_invalid_edit_is_refused_with_an_error_and_the_catalogue_in_force_stays(tmp_path):
    path = tmp_path / "prices.yaml"
    path.write_text(YAML)
    log, bus = Log(), memory_bus()
    source = PricesSource(path, FakeClock(), log)
    await source.publish_file(bus, at_start=True)
    in_force = source.source
    path.write_text("pools: [{name: broken}]\n")
    assert await source.publish_file(bus, at_start=False) is None
    assert source.source == in_force and len(bus.published) == 1
    assert log.events("error") == ["prices_file_rejected"]
    path.unlink()
    assert await source.publish_file(bus, at_start=True) is None  # something is in force: a restart keeps it


async def test_admission_ignores_the_price_catalogue_on_the_config_stream():
    log = Log()
    config = ConfigSource(None, FakeClock(), log)
    queues = QueuesConfigured(config=QueuesConfig(), at=T0, source="command:a#1")
    await config.on_message(codec.encode(queues), 1)
    await config.on_message(codec.encode(PricesConfigured(prices=CATALOGUE, at=T0, source="file:p#2")), 2)
    assert config.latest == queues and log.events("error") == []


def test_the_example_catalogue_loads():
    from pathlib import Path

    prices = load_prices(Path(__file__).resolve().parents[2] / "examples" / "cost" / "prices.yaml")
    assert [p.name for p in prices.pools] == ["spot", "reserved-a100"]
    assert prices.accelerators["cloud-tpus.google.com/v2"] == {"*": 4.5}
