"""Who may publish and subscribe to what: the NATS accounts, exports and allow-lists of each service and client
role, derived here once from the subject table (docs/architecture.md, docs/security.md), and written into
nats-server's configuration (``opsched.natsauth``). The server enforces them; nothing in opsched checks them again.

Two accounts. The services' (``subjects.SERVICES_ACCOUNT``) owns the streams, their consumers and the key-value
buckets; each service user reaches only its own durables, writes only its own buckets, and answers only requests
it was sent (``allow_responses``). The clients' (``subjects.CLIENTS_ACCOUNT``) has no JetStream of its own and sees
only what the services' account exports (``EXPORTS``): the command subjects (each user may publish only its own
``cmd.<user>.`` verbs), the queries, direct gets of the streams a view reads, and the op events as they happen.
No client reaches a stream's consumers, acks or configuration, nor another connection's inbox: every connection
takes its replies on ``_INBOX.<user>.`` (``subjects.inbox_prefix``) and may subscribe only there."""
from __future__ import annotations

from dataclasses import dataclass

from opsched.proto import subjects
from opsched.proto.queries import LOGS_ANSWER_CHUNKS

SERVICES = ("admission", "cost", "cache", "dispatcher", "notifier")
DISPATCHER = "dispatcher"  # its set_queues are the cluster's queue resources' (``rules.queue_resources``)
ROLES = ("viewer", "submitter", "approver", "admin")
GATEWAY = "gateway"  # the HTTP gateway's user (``services.gateway``): it sends each token's commands as its identity

# the events each service emits (``ops.<type>.<op_id>``): the subject table of docs/architecture.md. Checked against what each
# service's code can build (tests/contract/test_emits.py): a service that may build an event its user may not
# publish fails that test, not a user's scheduler (a cache hit's ``succeeded`` once wedged admission).
EMITS: dict[str, tuple[str, ...]] = {
    "admission": ("submitted", "admitted", "rejected", "skipped", "on_hold", "preempt_requested",
                  "retry_scheduled", "failure_final", "stopped", "stop_requested", "approved", "resumed", "failed",
                  "touched",
                  "succeeded",  # a cache hit ends its op with the original's outputs, never dispatched
                  "schedule_created", "schedule_fired", "schedule_deleted", "schedule_finished", "lease",
                  "spend_rolled"),
    "cost": ("cost_estimated", "cost_recorded", "budget_exceeded", "node_cost_recorded"),
    "cache": ("cache_hit", "cache_missed"),
    "dispatcher": ("dispatched", "running", "succeeded", "failed", "rejected", "stopped", "timed_out",
                   "preempted", "evicted", "dispatch_delayed"),
    "notifier": ("notification_due", "notification_attempted", "notification_failed"),
}
SHARED_EMITS = ("error", "handler_failed")  # every service reports what it dead-letters

# what each service publishes besides its events
OTHER_PUBLISH: dict[str, tuple[str, ...]] = {
    "admission": (subjects.CONFIG_QUEUES, subjects.CONFIG_QUEUE_STOPS,
                  subjects.commands_of("admission", "submit")),  # schedule runs
    "cost": (subjects.CONFIG_PRICES,),
    "cache": (),
    "dispatcher": (subjects.CLUSTER_ALL,  # the node facts
                   subjects.commands_of("dispatcher", subjects.SET_QUEUES)),  # the queue resources' configuration
    "notifier": (),
}

# the command verbs of each client role (each only under its own ``cmd.<user>.``)
VERBS: dict[str, tuple[str, ...]] = {
    "viewer": (),  # reads only (the queries, the op events): the web view's user in a deployment
    "submitter": ("submit", "stop", "restart", "copy", "resume", "touch"),
    "approver": ("approve", "reject"),
    "admin": ("submit", "stop", "restart", "copy", "resume", "touch", "approve", "reject", subjects.SET_QUEUES,
              subjects.SCHEDULE_CREATE, subjects.SCHEDULE_DELETE, subjects.SET_QUEUE_STOP),
}
# every client role may ask every query: reading is not split by user (`why`, and `logs` as `why`: docs/security.md)
QUERIES = (subjects.QUERY_WHY, subjects.QUERY_QUEUES, subjects.QUERY_COST, subjects.QUERY_SCHEDULES,
           subjects.QUERY_HEALTH_ALL, subjects.QUERY_LOGS)
# answers per request a service may send (``allow_responses``): one, but the dispatcher's logs answers, a stream
MAX_RESPONSES: dict[str, int] = {"dispatcher": LOGS_ANSWER_CHUNKS}
RESPONSES_EXPIRE_S = 120  # how long after a request its answers may come (nats-server's default bound)


# each service's durable consumers (a dispatcher also those of the named agents: ``durables_of``) and the key-value
# buckets it writes (``$KV.<bucket>.>``); every service keeps its in-hand record (``services.runtime.inhand``)
DURABLES: dict[str, tuple[str, ...]] = {
    "admission": (subjects.ADMISSION_COMMANDS,),
    "cost": (subjects.COST_ESTIMATOR, subjects.COST_LEDGER, subjects.COST_NODES),
    "cache": (subjects.CACHE_LOOKUP,),
    "dispatcher": (subjects.DISPATCHER_ADMITTED,),
    "notifier": (subjects.NOTIFIER_MATCH, subjects.NOTIFIER_DELIVER),
}
BUCKETS: dict[str, tuple[str, ...]] = {
    "admission": (subjects.LEASE_BUCKET, subjects.OPS_BUCKET),
    "cost": (),  # its ledger is a fold of the op stream
    "cache": (subjects.CACHE_BUCKET,),
    "dispatcher": (subjects.ATTEMPT_FATE_BUCKET,),
    "notifier": (),
}
SHARED_BUCKETS = (subjects.IN_HAND_BUCKET,)
STREAM_KEEPER = "admission"  # the one service that updates the streams (aligns them), purges the op stream and
# the commands it consumed
# what the services' account exports to the clients' (``opsched.natsauth``): (kind, subject, response type)
READ_STREAMS = (subjects.OPS_STREAM, subjects.CONFIG_STREAM, subjects.kv_stream(subjects.OPS_BUCKET))
EXPORTS: tuple[tuple[str, str, str], ...] = (
    ("service", subjects.CMD_ALL, "singleton"),  # the command stream stores it and acks it to the client
    ("service", subjects.QUERY_ALL, "singleton"),
    ("service", subjects.QUERY_LOGS, "stream"),  # a logs answer is several messages
    *(("service", get, "stream" if i == 0 else "singleton")  # a batch answers with several messages
      for stream in READ_STREAMS for i, get in enumerate(subjects.direct_gets(stream))),
    ("stream", subjects.OPS_ALL, ""),  # the events as they happen: what tells a follower to read on
)


def imported_as(subject: str) -> str:
    """An export's subject in the clients' account: direct gets under ``subjects.READ_API_PREFIX``, others as is."""
    if subject.startswith(subjects.JS_API_PREFIX + "."):
        return subjects.READ_API_PREFIX + subject.removeprefix(subjects.JS_API_PREFIX)
    return subject


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny: tuple[str, ...] = ()  # publish subjects refused even where an allow matches
    allow_responses: bool = False  # may answer the requests it receives (their reply subjects) ...
    max_responses: int = 1  # ... this many times each (within ``RESPONSES_EXPIRE_S``)
    account: str = subjects.CLIENTS_ACCOUNT


def _events(kinds: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(subjects.events_of(kind) for kind in kinds)


def durables_of(name: str, agents: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``name``'s durable consumers; a dispatcher's include the named agents' dispatchers' (one user for all)."""
    extra = tuple(subjects.dispatcher_durable(a) for a in agents) if name == "dispatcher" else ()
    return DURABLES[name] + extra


def all_durables(agents: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every service's durable consumers (the named agents' dispatchers' included): the only ones whose acks hold
    a stream's messages back from a purge (``Bus.consumed_up_to``)."""
    return tuple(d for name in SERVICES for d in durables_of(name, agents))


def service(name: str, agents: tuple[str, ...] = ()) -> Permissions:
    """A service publishes its own events, the dead letters of its consumers, and what it alone configures; it
    calls JetStream for its own durables and buckets (admission alone aligns streams and purges the op stream),
    answers its queries, and reads its own inbox."""
    if name not in EMITS:
        raise ValueError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")
    kv = tuple(subjects.kv_entries(b) for b in BUCKETS[name] + SHARED_BUCKETS)
    admin = (subjects.STREAM_ALIGN, subjects.stream_purge(subjects.OPS_STREAM),
             subjects.stream_purge(subjects.CMD_STREAM)) if name == STREAM_KEEPER else ()
    publish = (*_events(EMITS[name] + SHARED_EMITS), subjects.dead_letter(name), *OTHER_PUBLISH[name],
               *subjects.JS_SERVICE, *admin, *kv, *QUERIES)
    others = tuple(d for other in SERVICES if other != name for d in durables_of(other, agents))
    deny = tuple(s for d in others for s in subjects.durable_subjects(d))
    answers = (*(q for q in QUERIES if q != subjects.QUERY_HEALTH_ALL), subjects.health_query(name))  # its own health
    subscribe = (*answers, subjects.JS_ADVISORIES, subjects.inbox_prefix(name) + ".>")
    return Permissions(publish=publish, subscribe=subscribe, deny=deny, allow_responses=True,
                       max_responses=MAX_RESPONSES.get(name, 1), account=subjects.SERVICES_ACCOUNT)


def client(role: str, user: str) -> Permissions:
    """A person or external system, in the clients' account: its role's verbs under its own ``cmd.<user>.``, the
    queries, direct gets of what a view reads, the op events live; replies on its own inbox only."""
    if role not in VERBS:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    if not subjects.valid_token(user) or user in SERVICES or user in (subjects.ANONYMOUS, GATEWAY):
        raise ValueError(f"user name {user!r} must be lowercase letters, digits and dashes, and not a service "
                         f"name nor {subjects.ANONYMOUS!r} nor {GATEWAY!r}")
    verbs = tuple(subjects.commands_of(user, verb) for verb in VERBS[role])
    reads = tuple(get for stream in READ_STREAMS for get in subjects.direct_gets(stream, subjects.READ_API_PREFIX))
    return Permissions(publish=(*verbs, *QUERIES, *reads),
                       subscribe=(subjects.inbox_prefix(user) + ".>", subjects.OPS_ALL))


def gateway(fronted: tuple[tuple[str, str], ...]) -> Permissions:
    """The HTTP gateway, in the clients' account: exactly the command subjects of the client users it fronts
    (``fronted``: (user, role) pairs; each as ``client(role, user)`` allows, never ``cmd.>``), the queries, the
    direct gets and the op events as any client; replies on its own inbox only. It answers no query (the clients'
    account cannot): its health is its HTTP ``/healthz``."""
    for user, role in fronted:
        client(role, user)  # a user or role the configuration would refuse: refused here too
    commands = tuple(dict.fromkeys(subjects.commands_of(user, verb) for user, role in fronted for verb in VERBS[role]))
    reads = tuple(get for stream in READ_STREAMS for get in subjects.direct_gets(stream, subjects.READ_API_PREFIX))
    return Permissions(publish=(*commands, *QUERIES, *reads),
                       subscribe=(subjects.inbox_prefix(GATEWAY) + ".>", subjects.OPS_ALL))


def for_user(user: str, role: str, agents: tuple[str, ...] = (),
             fronted: tuple[tuple[str, str], ...] = ()) -> Permissions:
    """``role``: a service name, a client role, or ``GATEWAY`` (it fronts the client users ``fronted``);
    ``agents``: the named agents (their dispatchers' durables)."""
    if role == GATEWAY:
        return gateway(fronted)
    return service(user, agents) if role == "service" else client(role, user)
