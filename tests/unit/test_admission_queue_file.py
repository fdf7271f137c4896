"""Admission: the queue configuration file (defaults, the example, readable errors)."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsched.proto.queues import Queue as QueueConfig
from opsched.rules.queues_file import QueuesConfigError, load_queues
from opsched.services.admission.model.queues import compile_book
from tests.builders import case, case_name

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# ---- queue configuration ----------------------------------------------------------------------

def test_without_a_file_there_is_one_default_queue():
    config = load_queues(None)
    assert [q.name for q in config.queues] == ["default"] and config.default_queue == "default"


def test_the_example_queue_file_loads():
    config = load_queues(EXAMPLES / "queues.yaml")
    assert config.default_queue in [q.name for q in config.queues]
    assert all(q.concurrency >= 1 for q in config.queues)


def test_a_queue_file_loads_with_its_fields(tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text("defaultQueue: cpu\nqueues:\n  - {name: cpu, concurrency: 8}\n"
                    "  - {name: a100, concurrency: 2, priority: 10, namespace: gpu}\n")
    config = load_queues(path)
    assert config.default_queue == "cpu"
    book = compile_book(config)
    assert book.queues["a100"] == QueueConfig(name="a100", concurrency=2, priority=10, namespace="gpu")
    assert "nope" not in book.queues


@pytest.mark.parametrize("c", [
    case("duplicate queue names",
         text="queues:\n  - {name: default}\n  - {name: default}\n", says="'default' is used twice"),
    case("a defaultQueue that is not a queue",
         text="defaultQueue: gpu\nqueues:\n  - {name: default}\n", says="defaultQueue: 'gpu' is not one of the queues"),
    case("a queue name that is not a DNS label",
         text="queues:\n  - {name: Default_Q}\n", says="queues[0].name"),
    case("a concurrency below one",
         text="queues:\n  - {name: default, concurrency: 0}\n", says="queues[0].concurrency"),
    case("an unknown field",
         text="queues:\n  - {name: default, concurency: 3}\n", says="concurency"),
    case("yaml that does not parse",
         text="queues: [\n", says="queues.yaml"),
], ids=case_name)
def test_a_bad_queue_file_raises_a_readable_error(c, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(c.text)
    with pytest.raises(QueuesConfigError) as info:
        load_queues(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert c.says in message
    assert "pydantic" not in message and "Traceback" not in message


def test_a_missing_queue_file_raises_a_readable_error(tmp_path):
    with pytest.raises(QueuesConfigError, match="no-such.yaml"):
        load_queues(tmp_path / "no-such.yaml")
