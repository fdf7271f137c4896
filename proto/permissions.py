"""Who may publish and subscribe to what: the NATS allow-lists of each service and client role, derived here
once from the subject table (README "Architecture"), and written into nats-server's configuration
(``opsched.natsauth``). The server enforces them; nothing in opsched checks them again.

JetStream is reached through its API subjects: ``$JS.API.>`` calls (stream/consumer/KV management, reads),
``$JS.ACK.>`` acknowledgements, ``$JS.FC.>`` flow control, ``$KV.<bucket>.>`` key writes, ``_INBOX.>`` replies.
A client role may read (info, consumers of its own, direct gets) but never delete, purge or reconfigure."""
from __future__ import annotations

from dataclasses import dataclass

from proto import subjects

SERVICES = ("admission", "cost", "cache", "dispatcher")
ROLES = ("submitter", "approver", "admin")

# the events each service emits (``ops.<type>.<op_id>``): the README's subject table. Checked against what each
# service's code can build (tests/contract/test_emits.py): a service that may build an event its user may not
# publish fails that test, not a user's scheduler (a cache hit's ``succeeded`` once wedged admission).
EMITS: dict[str, tuple[str, ...]] = {
    "admission": ("submitted", "admitted", "rejected", "skipped", "on_hold", "preempt_requested",
                  "retry_scheduled", "stopped", "stop_requested", "approved", "resumed", "failed",
                  "succeeded",  # a cache hit ends its op with the original's outputs, never dispatched
                  "schedule_created", "schedule_fired", "schedule_deleted", "schedule_finished", "lease",
                  "spend_rolled"),
    "cost": ("cost_estimated", "cost_recorded", "budget_exceeded"),
    "cache": ("cache_hit", "cache_missed"),
    "dispatcher": ("dispatched", "running", "succeeded", "failed", "rejected", "stopped", "timed_out",
                   "preempted", "evicted", "dispatch_delayed"),
}
SHARED_EMITS = ("error", "handler_failed")  # every service reports what it dead-letters

# what each service publishes besides its events
OTHER_PUBLISH: dict[str, tuple[str, ...]] = {
    "admission": (subjects.CONFIG_QUEUES, subjects.commands_of("admission", "submit")),  # schedule runs
    "cost": (subjects.CONFIG_PRICES,),
    "cache": (),
    "dispatcher": (subjects.CLUSTER_ALL,),
}

# the command verbs of each client role (each only under its own ``cmd.<user>.``)
VERBS: dict[str, tuple[str, ...]] = {
    "submitter": ("submit", "stop", "restart", "copy", "resume"),
    "approver": ("approve", "reject"),
    "admin": ("submit", "stop", "restart", "copy", "resume", "approve", "reject", subjects.SET_QUEUES,
              subjects.SCHEDULE_CREATE, subjects.SCHEDULE_DELETE),
}
QUERIES = (subjects.QUERY_WHY, subjects.QUERY_QUEUES, subjects.QUERY_COST, subjects.QUERY_HEALTH_ALL)


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny: tuple[str, ...] = ()  # publish subjects refused even where an allow matches


def _events(kinds: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(subjects.events_of(kind) for kind in kinds)


def service(name: str) -> Permissions:
    """A service publishes its own events, the dead letters of its consumers, and what it alone configures;
    it reads every stream and answers its queries."""
    if name not in EMITS:
        raise ValueError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")
    publish = (*_events(EMITS[name] + SHARED_EMITS), subjects.dead_letter(name), *OTHER_PUBLISH[name],
               subjects.JS_API, subjects.JS_ACK, subjects.JS_FLOW, subjects.kv_entries("*"), subjects.REPLIES)
    answers = (*(q for q in QUERIES if q != subjects.QUERY_HEALTH_ALL), subjects.health_query(name))  # its own health
    subscribe = (*answers, subjects.JS_ADVISORIES, subjects.REPLIES)  # stream messages reach it on its inboxes
    return Permissions(publish=publish, subscribe=subscribe)


def client(role: str, user: str, agents: tuple[str, ...] = ()) -> Permissions:
    """A person or external system: its role's verbs under its own ``cmd.<user>.``, the queries, reads; never a
    service's durable consumer (``agents``: the named agents' dispatchers too)."""
    if role not in VERBS:
        raise ValueError(f"unknown role {role!r}; roles: {', '.join(ROLES)}")
    if not subjects.valid_token(user) or user in SERVICES or user == subjects.ANONYMOUS:
        raise ValueError(f"user name {user!r} must be lowercase letters, digits and dashes, and not a service "
                         f"name nor {subjects.ANONYMOUS!r}")
    verbs = tuple(subjects.commands_of(user, verb) for verb in VERBS[role])
    admin = subjects.JS_ADMIN if role == "admin" else ()
    publish = (*verbs, *QUERIES, *subjects.JS_READ, *admin, subjects.JS_ACK, subjects.JS_FLOW, subjects.REPLIES)
    return Permissions(publish=publish, subscribe=(subjects.REPLIES,), deny=subjects.client_deny(agents))


def for_user(user: str, role: str, agents: tuple[str, ...] = ()) -> Permissions:
    """``role``: a service name or a client role; ``agents``: the named agents (their dispatchers' durables)."""
    return service(user) if role == "service" else client(role, user, agents)
