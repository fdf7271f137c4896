"""The faults production brings, each as ``strike`` (inject it), ``hold`` (let it last) and ``heal``: kill -9
of a service (started again after a while, or left dead while a replica serves), kill -9 of one node of the
NATS cluster, kill -9 of the API server for a while, and kill -9 of the only nats-server (while it is down,
a submit through the CLI must be refused with a clear message); and several of them, in turn or at once.

Processes are started on the event loop's thread: a child of this harness dies with the thread that
started it (Linux's parent-death signal), and a worker thread may end before the run does."""
from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.faults.stage import Stage
from opsched import natsauth
from opsched.natsserver import NatsCluster, NatsServer
from opsched.proto import subjects

# What each service publishes about ops: the first of these after a heal says the service works again.
# The cache: any op event (empty), as these ops have caching off: it answers none of them (issue 36).
EMITS = {"admission": ("submitted", "admitted"), "cost": ("cost_estimated",), "cache": (),
         "dispatcher": ("dispatched", "running", "succeeded", "failed")}
FROM_KUBERNETES = ("dispatched", "running", "succeeded", "failed")
# The op a CLI submit tries while NATS is down (NatsDown): one GPU, 0.2 s.
CLI_OP_FILE = """\
version: 1.1
kind: component
name: while-nats-is-down
run:
  kind: job
  container:
    image: python:3.11-slim
    command: sh -c "sleep 0.2"
    resources: {limits: {nvidia.com/gpu: 1}}
"""


@dataclass(kw_only=True)
class Fault:
    kind: str = "none"
    lasts_s: float = 0.0  # from strike to heal
    emits: tuple[str, ...] = ()  # op events that flow again once it is healed (any when empty)

    @property
    def name(self) -> str:
        return self.kind

    async def strike(self, stage: Stage) -> None:
        """Inject the fault."""

    async def hold(self, stage: Stage) -> None:
        """While it lasts (the outage itself: time passes, nothing is waited on)."""
        await asyncio.sleep(self.lasts_s)

    async def heal(self, stage: Stage) -> None:
        """Undo it: start again what was killed."""


@dataclass(kw_only=True)
class KillService(Fault):
    """kill -9 of one replica of ``service``; started again after ``lasts_s``, unless ``restart`` is False
    (the other replicas carry on alone)."""

    service: str
    replica: int = 0
    restart: bool = True
    leader: bool = False  # kill the replica that leads now (admission), whichever it is

    def __post_init__(self) -> None:
        self.kind = f"kill {self.service}" + (" leader" if self.leader else "") + \
            ("" if self.restart else " (a replica left)")
        self.emits = EMITS[self.service]

    async def strike(self, stage: Stage) -> None:
        assert stage.services is not None
        if self.leader:
            self.replica = await stage.services.leader(self.service)
        stage.services.kill(self.service, self.replica)

    async def hold(self, stage: Stage) -> None:
        if self.restart:
            await super().hold(stage)

    async def heal(self, stage: Stage) -> None:
        assert stage.services is not None
        if self.restart:
            stage.services.start_one(self.service, self.replica)
            await stage.services.until_ready([(self.service, self.replica)])


@dataclass(kw_only=True)
class KillNatsNode(Fault):
    """kill -9 of the node leading the op stream (of a cluster); restarted on its store after ``lasts_s``."""

    kind: str = "kill a NATS node"
    lasts_s: float = 5.0
    node: int = -1

    async def strike(self, stage: Stage) -> None:
        assert isinstance(stage.nats, NatsCluster) and stage.bus is not None
        info = await stage.bus.js.stream_info(subjects.OPS_STREAM)
        leader = info.cluster.leader if info.cluster else None
        self.node = stage.nats.index(leader) if leader else 0
        stage.nats.kill(self.node)

    async def heal(self, stage: Stage) -> None:
        assert isinstance(stage.nats, NatsCluster)
        stage.nats.restart(self.node)


@dataclass(kw_only=True)
class ApiServerOutage(Fault):
    """kill -9 of kube-apiserver; started again with the same flags and etcd after ``lasts_s``."""

    kind: str = "API server down"
    lasts_s: float = 30.0
    emits: tuple[str, ...] = FROM_KUBERNETES

    async def strike(self, stage: Stage) -> None:
        stage.control_plane.kill()

    async def heal(self, stage: Stage) -> None:
        stage.control_plane.revive()  # blocks until /readyz; on this thread (see the module's docstring)


@dataclass(kw_only=True)
class NatsDown(Fault):
    """kill -9 of every nats-server (the only one, or each node of a cluster); while they are down
    ``opsched submit`` is tried (``refusals``: its exit code and stderr), then they are started again on
    the same ports and stores."""

    kind: str = "NATS down"
    lasts_s: float = 5.0
    op_file: Path | None = None
    refusals: list[tuple[int, str]] = field(default_factory=list)

    async def strike(self, stage: Stage) -> None:
        for node in nodes_of(stage.nats):
            node.kill()

    async def hold(self, stage: Stage) -> None:
        began = asyncio.get_running_loop().time()
        if self.op_file is not None:
            self.refusals.append(await cli_submit(stage.nats_url, self.op_file, stage.user_env(natsauth.ADMIN)))
        await asyncio.sleep(max(0.0, self.lasts_s - (asyncio.get_running_loop().time() - began)))

    async def heal(self, stage: Stage) -> None:
        for node in nodes_of(stage.nats):
            node.start()
        if isinstance(stage.nats, NatsCluster):
            stage.nats.wait_meta_leader()


@dataclass(kw_only=True)
class InTurn(Fault):
    """Several faults one after the other: each struck, held and healed before the next strikes (the last one's
    hold and heal are the run's). Ops that arrive meanwhile meet each of them in turn."""

    parts: list[Fault]

    def __post_init__(self) -> None:
        self.kind = "in turn: " + ", then ".join(part.name for part in self.parts)
        self.lasts_s = self.parts[-1].lasts_s
        self.emits = self.parts[-1].emits

    async def strike(self, stage: Stage) -> None:
        for part in self.parts[:-1]:
            await part.strike(stage)
            await part.hold(stage)
            await part.heal(stage)
        await self.parts[-1].strike(stage)

    async def hold(self, stage: Stage) -> None:
        await self.parts[-1].hold(stage)

    async def heal(self, stage: Stage) -> None:
        await self.parts[-1].heal(stage)


@dataclass(kw_only=True)
class AtOnce(Fault):
    """Several faults struck together, held together and healed together."""

    parts: list[Fault]

    def __post_init__(self) -> None:
        self.kind = "at once: " + ", ".join(part.name for part in self.parts)
        self.lasts_s = max(part.lasts_s for part in self.parts)
        self.emits = tuple(dict.fromkeys(e for part in self.parts for e in part.emits))

    async def strike(self, stage: Stage) -> None:
        for part in self.parts:  # in order, on this thread (see the module's docstring)
            await part.strike(stage)

    async def hold(self, stage: Stage) -> None:
        await asyncio.gather(*(part.hold(stage) for part in self.parts))

    async def heal(self, stage: Stage) -> None:
        for part in self.parts:
            await part.heal(stage)


def nodes_of(nats: NatsServer | NatsCluster) -> list[NatsServer]:
    return list(nats.nodes) if isinstance(nats, NatsCluster) else [nats]


async def cli_submit(nats_url: str, op_file: Path, env: dict[str, str]) -> tuple[int, str]:
    """``opsched --nats URL submit FILE`` as a user runs it (``env``: its NATS user and CA): its exit code and what
    it printed on stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "opsched.cli", "--nats", nats_url, "submit", str(op_file),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **env})
    _, err = await proc.communicate()
    return proc.returncode if proc.returncode is not None else -1, err.decode(errors="replace")
