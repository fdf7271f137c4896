"""The admission service: folds every op event into state (rebuilt from the stream on start),
handles commands, and runs the scheduling cycle whenever something changed."""
from __future__ import annotations

import asyncio

import msgspec

from proto import codec, subjects
from proto.commands import StopOperation, SubmitOperation
from services.admission import cycle, handlers
from services.admission.queues import load_queues
from services.admission.state import AdmissionState
from services.runtime.bus import Bus
from services.runtime.service import Context, Service
from services.runtime.settings import Settings


class Admission:
    def __init__(self, service: Service, settings: Settings) -> None:
        self.service = service
        self.settings = settings
        self.config = load_queues(settings.queues_file)
        self.state = AdmissionState()
        self.wake = asyncio.Event()
        self.caught_up = asyncio.Event()
        self.replay_target = 0

    async def start_feed(self, bus: Bus) -> None:
        """Replay the op stream into state, then follow it live. Commands wait for the replay."""
        self.replay_target = await bus.last_seq(subjects.OPS_STREAM)
        if self.replay_target == 0:
            self.caught_up.set()
        await bus.follow(subjects.OPS_STREAM, subjects.OPS_ALL, self.fold)
        await self.caught_up.wait()
        self.service.log.info("state_rebuilt", ops=len(self.state.ops), last_seq=self.replay_target)

    async def fold(self, data: bytes, seq: int) -> None:
        try:
            event = codec.decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return  # producers' bad messages are dead-lettered where they are consumed
        if self.state.apply(event):
            self.wake.set()
        if seq >= self.replay_target:
            self.caught_up.set()

    async def run_cycles(self, bus: Bus, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                continue
            self.wake.clear()
            await self.cycle_once(bus)

    async def cycle_once(self, bus: Bus) -> None:
        now = self.service.clock.now()
        decisions = cycle.decide(self.state, self.config, now, self.settings.namespace)
        for index, decision in enumerate(decisions):
            try:
                await bus.publish(decision)
            except Exception as exc:  # noqa: BLE001 - forget this and every later assumption
                self.service.log.warning("publish_failed", op_id=decision.op_id, error=repr(exc))
                for unpublished in decisions[index:]:
                    self.state.unassume(unpublished.op_id)
                self.wake.set()
                await asyncio.sleep(0.2)
                return
            self.service.log.info(codec.type_of(decision), op_id=decision.op_id)


def build(settings: Settings, clock=None) -> Service:
    service = Service("admission", settings, clock)
    admission = Admission(service, settings)
    service.admission = admission  # type: ignore[attr-defined] - for in-process inspection
    service.on_start.append(admission.start_feed)
    service.extra_tasks.append(admission.run_cycles)
    sub = service.consume(subjects.ADMISSION_COMMANDS, subjects.CMD_STREAM, [subjects.CMD_ALL],
                          decoder=codec.decode_command)

    @service.on(sub, SubmitOperation)
    async def submit(cmd: SubmitOperation, ctx: Context):
        return handlers.on_submit(cmd, ctx, admission.state, admission.config)

    @service.on(sub, StopOperation)
    async def stop(cmd: StopOperation, ctx: Context):
        return handlers.on_stop(cmd, ctx, admission.state)

    return service
