"""What the CLI's read commands print with ``--output json|yaml``: one type per command (``OUTPUTS``), each
printed in full by ``opsched.output.full`` (every field, defaults and nulls included, camelCase names). Their JSON
Schemas are checked in under ``proto/schemas/output/<command>.json``. No service sends these; scripts read them."""
from __future__ import annotations

from opsched.proto.queries import CostAnswer, QueuesAnswer, WhyAnswer

# command -> the type its JSON/YAML output is (the schema snapshot and the contract test walk this)
OUTPUTS: dict[str, type] = {
    "why": WhyAnswer,
    "queues": QueuesAnswer,
    "cost": CostAnswer,
}
