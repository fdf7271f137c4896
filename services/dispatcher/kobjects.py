"""Kubernetes' own objects, as far as the dispatcher reads them: pods, nodes, lists and watch events,
decoded from the API's JSON with msgspec (a watch event costs a few microseconds, against about 250 us for
the official client's ``V1Pod``). Not wire messages of ours (those live in ``proto/``): the API server's
schema, with only the fields that ``podstatus``, ``gang``, ``expiry``, ``nodewatch`` and the watchers use; every other
field is skipped. Attribute names are the official client's (snake_case; JSON camelCase), so code reads
them as it read the models."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")


class _K8s(msgspec.Struct, rename="camel"):
    pass


class ObjectMeta(_K8s):
    name: str = ""
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None


class ContainerStateTerminated(_K8s):
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    finished_at: datetime | None = None


class ContainerState(_K8s):
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(_K8s):
    name: str = ""
    state: ContainerState | None = None


class ContainerRef(_K8s):
    name: str = ""


class PodSpec(_K8s):
    node_name: str | None = None
    containers: list[ContainerRef] | None = None  # their names, in order: the first is the op's main container
    active_deadline_seconds: int | None = None
    hostname: str | None = None  # a gang's pod: its ``<role>-<index>`` in the gang's Service (``rules.rendezvous``)


class PodCondition(_K8s):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


class PodStatus(_K8s):
    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: datetime | None = None
    conditions: list[PodCondition] | None = None
    container_statuses: list[ContainerStatus] | None = None


class Pod(_K8s):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec | None = None
    status: PodStatus | None = None


class Taint(_K8s):
    key: str = ""
    value: str | None = None
    effect: str = ""


class NodeSpec(_K8s):
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class NodeCondition(_K8s):
    type: str = ""
    status: str = ""


class NodeStatus(_K8s):
    allocatable: dict[str, str] | None = None
    conditions: list[NodeCondition] | None = None


class Node(_K8s):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class ListMeta(_K8s):
    resource_version: str = ""


class KList(_K8s, Generic[T]):
    """A list's answer: the objects and the resource version to watch from."""

    items: list[T] = msgspec.field(default_factory=list)
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)


class Status(_K8s):
    """What an ERROR watch event carries (e.g. code 410: the resource version is too old)."""

    code: int = 0
    reason: str = ""
    message: str = ""


class WatchEvent(_K8s, Generic[T]):
    """One line of a watch: ADDED, MODIFIED, DELETED, BOOKMARK (an object), or ERROR (a ``Status``)."""

    type: str
    object: msgspec.Raw = msgspec.Raw(b"null")


class Decoders(Generic[T]):
    """The decoders of one kind of object: its lists, its watch events' objects, a watch ERROR's status."""

    def __init__(self, kind: type[T]) -> None:
        self.list = msgspec.json.Decoder(KList[kind])  # type: ignore[valid-type]
        self.object = msgspec.json.Decoder(kind)
        self.event = msgspec.json.Decoder(WatchEvent)
        self.status = msgspec.json.Decoder(Status)

    def decode_list(self, data: bytes) -> KList[T]:
        return self.list.decode(data)


class CustomObject(_K8s):
    """A custom resource (the queue resources, ``rules.queue_resources``): its spec and status as they are."""

    metadata: ObjectMeta
    spec: dict[str, Any] | None = None
    status: dict[str, Any] | None = None


PODS: Decoders[Pod] = Decoders(Pod)
CUSTOM_OBJECTS: Decoders[CustomObject] = Decoders(CustomObject)
NODES: Decoders[Node] = Decoders(Node)


def decode_pod_list(data: bytes) -> KList[Pod]:
    return PODS.decode_list(data)
