"""The only place where subjects, streams, key-value buckets and consumers are named."""
from __future__ import annotations

import re
from datetime import datetime

# Streams
CMD_STREAM = "OPSCHED_CMD"
OPS_STREAM = "OPSCHED_OPS"
DLQ_STREAM = "OPSCHED_DLQ"
CLUSTER_STREAM = "OPSCHED_CLUSTER"  # latest fact per node
CONFIG_STREAM = "OPSCHED_CONFIG"  # configuration in force (latest per subject)

# Subjects. Commands go on ``cmd.<user>.<verb>[.<route>]``: the server lets a user publish only its own
# ``cmd.<user>.`` verbs (``proto.permissions``), so the user token is the requester (``requester_of``).
ANONYMOUS = "anonymous"  # the requester on a server without authentication (and the in-memory bus)
CMD_ALL = "cmd.>"
CMD_SUBMIT_ALL = "cmd.*.submit.>"
OPS_ALL = "ops.>"
OP_EVENTS = "ops.*.*"  # the events of every op (and schedule), not the leader claims (ops.lease.<role>.claimed)
# ... and what admission asks of a named agent's dispatcher, ops.<kind>.<agent>.<op id> (``routed``): a view reads
# everything (the leader claims too: no op's events, skipped where decoded)
VIEW_EVENTS = OPS_ALL
ROUTED_KINDS = ("admitted", "stop_requested", "preempt_requested")  # what a dispatcher consumes
DLQ_ALL = "dlq.>"
CLUSTER_ALL = "cluster.>"
CLUSTER_NODES = "cluster.node.>"  # every node's facts (``node``), of every agent
CONFIG_ALL = "config.>"
CONFIG_QUEUES = "config.queues"
CONFIG_PRICES = "config.prices"  # the price catalogue in force (cost)
CONFIG_QUEUE_STOPS = "config.queue_stop.*"  # each queue's stop policy in force (``queue_stop_subject``)
CMD_SCHEDULE_ALL = "cmd.*.schedule.>"
QUERY_WHY = "opsched.query.why"  # request/reply, answered by admission
QUERY_QUEUES = "opsched.query.queues"
QUERY_SCHEDULES = "opsched.query.schedules"  # request/reply, answered by admission
QUERY_COST = "opsched.query.cost"  # request/reply, answered by cost
QUERY_HEALTH_ALL = "opsched.query.health.*"  # request/reply, each service on its own (``health_query``)
# request/reply answered by a stream of messages (``proto.queries.LogsRequest``, ``LogsChunk``): an op's container
# output, answered by the (default agent's) dispatcher; outside ``opsched.query.>``, whose answers are one message
QUERY_LOGS = "opsched.logs"
DEFAULT_ROUTE = "_"

# stream -> (subjects, max messages kept per subject; -1 = all)
STREAMS: dict[str, tuple[list[str], int]] = {
    CMD_STREAM: ([CMD_ALL], -1),
    OPS_STREAM: ([OPS_ALL], -1),
    DLQ_STREAM: ([DLQ_ALL], -1),
    CLUSTER_STREAM: ([CLUSTER_ALL], 1),
    CONFIG_STREAM: ([CONFIG_ALL], 10),
}

# Key-value buckets
CACHE_BUCKET = "opsched_cache"
OPS_BUCKET = "opsched_ops"  # summaries of finished ops that left admission's memory (history 1, one key per op)

# What stays on the op stream past the ttl, for the budget windows (purged once they passed): budget limits
# announced, and charges of ops admission does not hold (an op's own charges leave with it once rolled up)
KEPT_PAST_PURGE = ("cost_recorded", "budget_exceeded", "node_cost_recorded")
ATTEMPT_FATE_BUCKET = "opsched_attempts"  # the dispatcher's record per attempt: creating or released
IN_HAND_BUCKET = "opsched_inhand"  # the messages each consumer's handler loop holds, unsettled (proto.in_hand)
LEASE_BUCKET = "opsched_leases"  # one key per role that exactly one instance plays (proto.leases.Lease)
ADMISSION_ROLE = "admission"  # the lease key, and the role in its claims

# Durable consumers (one per service role; replicas of a service share it)
ADMISSION_COMMANDS = "admission-commands"
COST_ESTIMATOR = "cost-estimator"
COST_LEDGER = "cost-ledger"
COST_NODES = "cost-nodes"  # the cluster stream's node removals -> ``node_cost_recorded``
CACHE_LOOKUP = "cache-lookup"
DISPATCHER_ADMITTED = "dispatcher-admitted"
NOTIFIER_MATCH = "notifier-match"  # the op events that can trigger a notification -> ``notification_due``
NOTIFIER_DELIVER = "notifier-deliver"  # each ``notification_due`` -> POSTed to its connection, with retries

# NATS accounts (``opsched.natsauth``): the services' account owns the streams, consumers and buckets; clients are
# in an account of their own, which sees only what the services' account exports (``proto.permissions.EXPORTS``)
SERVICES_ACCOUNT = "OPSCHED"
CLIENTS_ACCOUNT = "CLIENTS"
QUERY_ALL = "opsched.query.>"

# JetStream's and NATS' own subjects, as the permissions (``proto.permissions``) name them
JS_API_PREFIX = "$JS.API"  # the JetStream API of the connection's own account
# ... and the services' direct gets as the clients' account imports them: reads, nothing else of that API
READ_API_PREFIX = "$JS.opsched.API"
JS_ACK = "$JS.ACK.>"
JS_FLOW = "$JS.FC.>"
JS_ADVISORIES = "$JS.EVENT.ADVISORY.>"
# what every service calls: account and stream info, stream creation (never an update of one that exists, but
# admission's: ``STREAM_ALIGN``), message and direct gets, ephemeral consumers (ordered followers, the replays), and
# its own durables (``durables_of``: the others' are denied by name). Consumers only by the forms that name them in
# the subject: the older ``CONSUMER.CREATE.<stream>`` takes the name from the body, and would update a durable that
# the denials name (the services name every consumer: ``bus.bus.JetStream``)
JS_SERVICE = ("$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
              "$JS.API.STREAM.CREATE.*", "$JS.API.STREAM.MSG.GET.*", "$JS.API.DIRECT.GET.>",
              "$JS.API.CONSUMER.CREATE.*.*", "$JS.API.CONSUMER.CREATE.*.*.>", "$JS.API.CONSUMER.DURABLE.CREATE.>", "$JS.API.CONSUMER.INFO.>",
              "$JS.API.CONSUMER.LIST.*", "$JS.API.CONSUMER.NAMES.*", "$JS.API.CONSUMER.DELETE.>",
              "$JS.API.CONSUMER.MSG.NEXT.>", JS_ACK, JS_FLOW)
STREAM_ALIGN = "$JS.API.STREAM.UPDATE.*"  # admission aligns the streams' subjects, limits and replicas
# Durable consumers' subjects: creating, binding, pulling, acking, deleting one (a service: only its own)
DURABLE_API = ("$JS.API.CONSUMER.CREATE.*.{d}", "$JS.API.CONSUMER.CREATE.*.{d}.>",
               "$JS.API.CONSUMER.DURABLE.CREATE.*.{d}", "$JS.API.CONSUMER.DELETE.*.{d}",
               "$JS.API.CONSUMER.MSG.NEXT.*.{d}", "$JS.ACK.*.{d}.>", "$JS.ACK.*.*.*.{d}.>")


def durable_subjects(durable: str) -> tuple[str, ...]:
    """The JetStream subjects that create, bind, pull, ack or delete ``durable`` (on any stream)."""
    return tuple(form.format(d=durable) for form in DURABLE_API)


def inbox_prefix(user: str) -> str:
    """Where a connection of ``user`` gets its replies and deliveries: ``_INBOX.<user>`` (only it may subscribe)."""
    return f"_INBOX.{user}"


def stream_purge(stream: str) -> str:
    return f"$JS.API.STREAM.PURGE.{stream}"


def direct_gets(stream: str, prefix: str = JS_API_PREFIX) -> tuple[str, str]:
    """A stream's direct gets: by sequence or batch (a JSON body), and the last of a subject."""
    return f"{prefix}.DIRECT.GET.{stream}", f"{prefix}.DIRECT.GET.{stream}.>"


_TOKEN = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def valid_token(value: str) -> bool:
    """Operation ids and queue names must be one lowercase subject token (also a DNS label)."""
    return bool(_TOKEN.match(value))


def submit(queue: str | None, user: str = ANONYMOUS) -> str:
    """Routed by queue when it is a plain name; templated or absent queues go to the default route."""
    return f"cmd.{user}.submit.{queue if queue and valid_token(queue) else DEFAULT_ROUTE}"


def command(kind: str, user: str = ANONYMOUS) -> str:
    """``cmd.<user>.<kind>``; ``kind`` may hold dots (``queues.set``, ``schedule.create``)."""
    return f"cmd.{user}.{kind}"


def commands_of(user: str, kind: str) -> str:
    """Every subject of one verb of one user (``*`` for any user): what a permission allows."""
    return f"cmd.{user}.{kind}.>" if kind == "submit" else f"cmd.{user}.{kind}"


def requester_of(subject: str) -> str:
    """The user who sent the command on ``subject`` (``cmd.<user>.<verb>...``): the server allows a user only
    its own prefix, so this, never a payload's ``requested_by``, is who asked. Other subjects: ``ANONYMOUS``."""
    tokens = subject.split(".")
    return tokens[1] if len(tokens) >= 3 and tokens[0] == "cmd" and tokens[1] else ANONYMOUS


def is_submit(subject: str) -> bool:
    """A submit command's subject (``cmd.<user>.submit.<route>``)."""
    tokens = subject.split(".")
    return len(tokens) == 4 and tokens[0] == "cmd" and tokens[2] == "submit"


CMD_STOP = command("stop")  # the anonymous user's (tests, the in-memory bus)
SET_QUEUES = "queues.set"
SET_QUEUE_STOP = "queues.stop"  # hold, drain or resume a queue (``proto.queue_stops``)
SCHEDULE_CREATE = "schedule.create"
SCHEDULE_DELETE = "schedule.delete"
CMD_SET_QUEUES = command(SET_QUEUES)
CMD_SCHEDULE_CREATE = command(SCHEDULE_CREATE)
CMD_SCHEDULE_DELETE = command(SCHEDULE_DELETE)


def queue_stop_subject(queue: str) -> str:
    """``config.queue_stop.<queue>``: the latest message there is the queue's stop policy in force."""
    return f"config.queue_stop.{queue}"


def set_queues_msg_id(request_id: str) -> str:
    return f"set_queues.{request_id}"


def queue_stop_msg_id(queue: str, request_id: str) -> str:
    return f"queue_stop.{queue}.{request_id}"


def event(kind: str, op_id: str) -> str:
    return f"ops.{kind}.{op_id}"


def routed(kind: str, op_id: str, agent: str) -> str:
    """A request to the dispatcher of ``agent`` ("": the default agent, on the plain ``event`` subject)."""
    return f"ops.{kind}.{agent}.{op_id}" if agent else event(kind, op_id)


def dispatcher_filters(agent: str) -> list[str]:
    """What the dispatcher of ``agent`` consumes: the routed kinds of its own agent only."""
    return [f"ops.{kind}.{agent}.*" if agent else f"ops.{kind}.*" for kind in ROUTED_KINDS]


def dispatcher_durable(agent: str) -> str:
    return f"{DISPATCHER_ADMITTED}-{agent}" if agent else DISPATCHER_ADMITTED


def all_events_for(op_id: str) -> list[str]:
    """Every event of an op, routed ones included (a view of one op, its purge)."""
    return [events_for(op_id), f"ops.*.*.{op_id}"]


def op_of(subject: str) -> str | None:
    """The op an op event's subject names (``ops.<type>.<op id>``), else None."""
    if not subject.startswith("ops."):
        return None
    return subject.rpartition(".")[2]


def events_of(kind: str) -> str:
    return f"ops.{kind}.>"


def events_for(op_id: str) -> str:
    return f"ops.*.{op_id}"


def kv_stream(bucket: str) -> str:
    """The stream that holds a key-value bucket (read whole by a view: one message per key)."""
    return f"KV_{bucket}"


def kv_entries(bucket: str) -> str:
    """Every key of ``bucket``: where it is written (a put, a delete) and what a reader filters on."""
    return f"$KV.{bucket}.>"


def kv_key(bucket: str, key: str) -> str:
    """The subject of one key of a key-value bucket (what a put or a delete of it publishes on)."""
    return f"$KV.{bucket}.{key}"


def attempt_fate_key(op_id: str, attempt: int) -> str:
    """The key of an attempt in ``ATTEMPT_FATE_BUCKET``: ``<op_id>.<attempt>``."""
    return f"{op_id}.{attempt}"


def node(name: str, agent: str = "") -> str:
    """Node names may hold dots (DNS subdomains); a subject token may not. A named agent's nodes:
    ``cluster.node.<agent>.<name>`` (two clusters may both have a node ``gpu-0``)."""
    return f"cluster.node.{agent + '.' if agent else ''}" + name.replace(".", "_")


def agent_heartbeat(agent: str) -> str:
    return f"cluster.agent.{agent}"


def health_query(service: str) -> str:
    """Where ``service`` answers how it is (``proto.health``): one replica of it."""
    return f"opsched.query.health.{service}"


def lease_claim(role: str) -> str:
    """``ops.lease.<role>.claimed``: the claims of a role's leaders (``proto.leases.LeaderClaimed``), in the op
    stream so that they fence decisions; four tokens, so no op's ``events_for`` filter matches them."""
    return f"ops.lease.{role}.claimed"


def lease_claim_msg_id(role: str, revision: int) -> str:
    """One claim per lease revision acquired."""
    return f"lease.{role}.{revision}"


def stream_of(subject: str) -> str | None:
    """The stream that stores ``subject`` (None: no stream does)."""
    tokens = subject.split(".")
    for name, (patterns, _) in STREAMS.items():
        for pattern in patterns:
            head = pattern.split(".")
            if head[-1] == ">" and len(tokens) >= len(head) and all(
                    want in ("*", ">", have) for want, have in zip(head, tokens)):
                return name
            if len(head) == len(tokens) and all(want in ("*", have) for want, have in zip(head, tokens)):
                return name
    return None


def dead_letter(service: str) -> str:
    return f"dlq.{service}"


def dead_letter_msg_id(service: str, durable: str, stream_seq: int) -> str:
    """The dead-letter copy of stream message ``stream_seq`` given up by consumer ``durable``: one per
    consumer (two consumers of one service giving up the same message keep both copies), the same for
    the handler loop's give-up and the max-deliveries advisory of that consumer (stored once)."""
    return f"dlq.{service}.{durable}.{stream_seq}"


def error_msg_id(service: str, durable: str, stream_seq: int) -> str:
    """The ``error`` event about that dead letter: the same rule as ``dead_letter_msg_id``."""
    return f"error.{service}.{durable}.{stream_seq}"


def malformed_msg_id(service: str, stream_seq: int, kind: str) -> str:
    """Nats-Msg-Id of an event a service publishes about a message it could not decode (one per message)."""
    return f"malformed.{service}.{stream_seq}.{kind}"


def max_deliveries_advisory(stream: str, durable: str) -> str:
    """Where JetStream announces a message of ``durable`` it stopped delivering unsettled (max_deliver)."""
    return f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{stream}.{durable}"


def max_deliveries_group(durable: str) -> str:
    """The queue group of the replicas sharing ``durable``: one of them acts on each advisory."""
    return f"{durable}-max-deliveries"


def msg_id(op_id: str, kind: str, attempt: int | str = 0) -> str:
    """Nats-Msg-Id: ``<op_id>.<type>.<attempt>``; JetStream drops a duplicate within its window."""
    return f"{op_id}.{kind}.{attempt}"


def many_msg_id(kind: str, request_id: str) -> str:
    """Nats-Msg-Id of a bulk command (``stop_many``, ...): ``many.<type>.<request_id>``."""
    return f"many.{kind}.{request_id}"


def budget_exceeded_msg_id(scope: str, name: str, window: str, unit: str, window_start: datetime) -> str:
    """Nats-Msg-Id of a ``budget_exceeded``: one per budget, limit and window, whichever op crossed it."""
    return f"budget_exceeded.{scope}.{name}.{window}.{unit}.{window_start.strftime('%Y%m%d')}"


def prices_msg_id(digest: str) -> str:
    """Nats-Msg-Id of a ``prices_configured``: one per catalogue content."""
    return f"prices.{digest}"


def schedule_event(kind: str, schedule_id: str) -> str:
    """``ops.schedule_<type>.<schedule_id>``: schedule events use the schedule id as their subject token."""
    return event(kind, schedule_id)


def schedule_fired_msg_id(schedule_id: str, run: int) -> str:
    """Nats-Msg-Id of run ``run`` of a schedule: a restart or a second replica fires it once."""
    return f"{schedule_id}.fired.{run}"


def schedule_command_msg_id(schedule_id: str, kind: str, digest: str = "0") -> str:
    """``<schedule_id>.<type>.<digest>``: the same command sent twice is one; a corrected one is not."""
    return f"{schedule_id}.{kind}.{digest}"
