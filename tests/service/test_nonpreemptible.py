"""Through the running admission service: a queue's services settings are written into a service op's recorded
spec, that non-preemptible service waits where a preemptible op borrows (``why`` says why), and the queue's
``maxServices`` holds the next service back."""
from __future__ import annotations

import msgspec

from opsched.proto.events import OperationAdmitted, OperationSubmitted
from opsched.proto.spec import SERVICE_KIND, ServiceSpec
from tests.builders import op
from tests.waiting import eventually, waiting_on

BUSES = ["memory"]  # admission's decisions, not the bus: on the in-memory bus alone (tests/service/conftest.py)

QUEUES = """defaultQueue: a
priorityClasses: [{name: interactive, value: 500}]
queues:
  - name: a
    cohort: lab
    preemption: {withinQueue: Never}
    services: {maxServices: 1, defaultPriorityClass: interactive, defaultPreemptible: false}
    resources: [{resource: nvidia.com/gpu, flavors: [{name: default, nominal: 1}]}]
  - {name: b, cohort: lab, resources: [{resource: nvidia.com/gpu, flavors: [{name: default, nominal: 2}]}]}
"""


def service(name: str, gpus: int = 0):
    spec = op(name).queue("a").gpus(gpus).build() if gpus else op(name).queue("a").build()
    return msgspec.structs.replace(spec, run_kind=SERVICE_KIND, service=ServiceSpec(ports=[8888]))


async def test_a_queues_service_is_not_preemptible_waits_rather_than_borrow_and_is_capped(stack_factory, client,
                                                                                          events, tmp_path):
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES)
    await stack_factory(queues_file=path, dispatcher_mode="null")
    job = await client.submit(op("job").queue("a").gpus(1).build())  # a's whole nominal
    await events.expect(OperationAdmitted, job)

    notebook = await client.submit(service("notebook", gpus=1))
    recorded = await events.expect(OperationSubmitted, notebook)
    assert (recorded.spec.preemptible, recorded.spec.priority_class, recorded.priority) == (False, "interactive", 500)
    answer = await eventually(lambda: waiting_on(client, notebook, "nonpreemptible_over_nominal"),
                              "the notebook waits for a's nominal")
    assert "never borrow from cohort lab (1 in use + 1 asked > 1 nominal)" in answer.reasons[0].message

    borrower = await client.submit(op("borrower").queue("a").gpus(1).build())  # preemptible: borrows b's idle quota
    assert (await events.expect(OperationAdmitted, borrower)).borrowing

    board = await client.submit(service("tensorboard"))  # no GPU: within quota, it runs ...
    await events.expect(OperationAdmitted, board)
    second = await client.submit(service("second"))  # ... and is a's one service (maxServices 1)
    await eventually(lambda: waiting_on(client, second, "max_services"), "the second service waits for the first")
    assert not events.of(notebook, OperationAdmitted)
