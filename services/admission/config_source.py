"""Where the queue configuration in force comes from: the latest ``QueuesConfigured`` in the config stream,
with the queues file (``OPSCHED_QUEUES_FILE``) published there when its content is new — the runtime's one
file-backed config mechanism (``services.runtime.config_file``); the ``set_queues`` command publishes
there too, so a configuration set by command survives restarts until the file's content changes."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from opsched.bus.addressing import config_digest
from opsched.bus.errors import InvalidInput
from opsched.proto import codec, subjects
from opsched.proto.config import QueuesConfigured, SetQueues, from_resources, resources_source
from opsched.proto.permissions import DISPATCHER
from opsched.proto.reasons import Refusal
from opsched.rules.queues_file import QueuesConfigError, load_queues
from opsched.services.admission.model.queues import compile_book
from opsched.services.runtime.clock import Clock
from opsched.services.runtime.config_file import ConfigKind, FileConfigSource

QUEUES: ConfigKind[QueuesConfigured] = ConfigKind(
    name="queues", message_type=QueuesConfigured, load=load_queues, errors=(QueuesConfigError,),
    message=lambda config, at, source: QueuesConfigured(config=config, at=at, source=source),
    subject=subjects.CONFIG_QUEUES, msg_id=lambda digest: f"queues.{digest}",
    summary=lambda config: {"queues": [q.name for q in config.queues]})


class ConfigSource(FileConfigSource[QueuesConfigured]):
    def __init__(self, path: Path | None, clock: Clock, log: Any) -> None:
        super().__init__(QUEUES, path, clock, log)

    async def on_message(self, data: bytes, seq: int) -> None:
        """A message of the config stream: the queues in force when it is a ``QueuesConfigured``."""
        try:
            self.apply(codec.decode_config(data))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.log.error("bad_config_message", seq=seq, error=str(exc))


def queues_configured(cmd: SetQueues, now: datetime, in_force: str) -> QueuesConfigured:
    """The answer to ``set_queues``: the configuration, published to the config stream, once it compiles. The
    dispatcher's (``requested_by`` is the user of the command's subject) is the cluster's queue resources': while one
    is in force (``in_force``: its source), a user's is refused; the dispatcher hands it back when they are gone."""
    resources = cmd.requested_by == DISPATCHER and not cmd.handback
    if from_resources(in_force) and cmd.requested_by != DISPATCHER:
        raise InvalidInput(Refusal.QUEUES_FROM_RESOURCES, (
            "the queue configuration in force is the cluster's queue resources (kubectl get opsched: OpsQueue, "
            "OpsCohort, OpsFlavor, ... of opsched.io): change those with kubectl; `opsched queues --apply` works "
            "again once they are all deleted"))
    try:
        compile_book(cmd.config)
    except QueuesConfigError as exc:
        raise InvalidInput(Refusal.INVALID_QUEUES, str(exc)) from None
    digest = config_digest(cmd.config)
    source = resources_source(digest) if resources else f"command:{cmd.requested_by or '?'}#{digest}"
    return QueuesConfigured(config=cmd.config, at=now, source=source, request_id=cmd.request_id)
