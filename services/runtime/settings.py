"""Settings of every service, from the environment (``OPSCHED_*``; ``NATS_URL`` too), validated at the edge."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from opsched.bus.bus import StreamLimits
from opsched.proto import subjects


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OPSCHED_", extra="ignore", populate_by_name=True)

    nats_url: str = Field("nats://127.0.0.1:4222", validation_alias=AliasChoices("NATS_URL", "OPSCHED_NATS_URL"),
                          description="one URL, or several comma-separated (the nodes of a NATS cluster)")
    nats_user: str | None = Field(None, description="the NATS user this process connects as (the user token of "
                                  "the command subjects it publishes); none: an open server, user 'anonymous'")
    nats_password_file: Path | None = Field(None, description="a file holding nats_user's password (0600)")
    nats_creds: Path | None = Field(None, description="a NATS credentials file (JWT + nkey seed) of an existing "
                                    "NATS account setup, instead of a password; nats_user names the user")
    nats_ca_file: Path | None = Field(
        None, validation_alias=AliasChoices("OPSCHED_NATS_CA", "OPSCHED_NATS_CA_FILE", "nats_ca_file"),
        description="speak TLS to NATS and verify the server with this CA certificate (PEM)")
    stream_replicas: int = Field(1, ge=1, le=5, description="replicas of the streams and KV buckets this "
                                 "service creates: 1 on one nats-server, 3 on a 3-node cluster")
    health_port: int | None = Field(None, ge=0, le=65535, description="serve /healthz, /readyz and /metrics here; 0 = any free port")
    health_host: str = Field("127.0.0.1", description="address for /healthz; 0.0.0.0 inside a pod")
    log_format: Literal["auto", "json", "console"] = "auto"
    event_loop: Literal["uvloop", "asyncio"] = Field("uvloop", description="the event loop a service process runs on")
    log_level: str = "info"
    fetch_batch: int = Field(64, ge=1, le=1000)
    handler_window: int = Field(32, ge=1, le=1000, description="messages a handler loop handles at once (different "
                                "ops; one op's in order); admission always 1")
    connections_file: Path | None = Field(None, description="the notifier's connections file (docs/notifications.md): "
                                          "its sinks' urls and secrets, given to the notifier alone")
    notify_timeout_s: float = Field(10.0, gt=0, description="the notifier's timeout of one POST to a sink")
    notify_backoff_base_s: float = Field(2.0, gt=0, description="the notifier's first retry delay (doubled each time)")
    notify_backoff_cap_s: float = Field(600.0, gt=0, description="the notifier's longest retry delay")
    notify_give_up_s: float = Field(86400.0, ge=0, description="a delivery still failing this long after it was due "
                                    "is given up: dead-lettered, with a final notification_failed")
    max_deliver: int = Field(5, ge=1, description="deliveries before a failing message goes to the dead-letter subject")
    ack_wait_s: float = Field(30.0, gt=0, description="a delivery not settled this long (its process died) is "
                              "delivered again, to any replica (what a replica killed with messages in hand delays them by)")
    dependency_backoff_base_s: float = Field(0.5, gt=0, description="first wait before a dependency is tried again")
    dependency_backoff_cap_s: float = Field(
        10.0, gt=0, le=20.0, description="longest wait between tries (below the 30 s ack wait: the message stays ours)")
    handler_stuck_s: float = Field(300.0, gt=0, description="a handler loop without a sign of life this long is "
                                   "stuck: /healthz 503 (a wait for a dependency is not: readiness reports it)")
    stall_window_s: float = Field(600.0, gt=0, description="a publish the NATS server refused (permissions) keeps "
                                  "/readyz 503, naming it, this long after the last refusal")
    poison_crashes: int = Field(2, ge=0, description="a message whose handling died with its process (OOM-kill, "
                                "kill -9) this many times is dead-lettered before it is handled again; 0: off")

    # admission
    queues_file: Path | None = None
    lease_ttl_s: float = Field(6.0, gt=0, description="admission's leader lease runs out this long after its last "
                               "renewal: a standby takes over then (the leader stops deciding ttl/6 before)")
    lease_renew_s: float = Field(2.0, gt=0, description="the leader renews its lease this often (below ttl * 5/6)")
    submit_rate_per_min: float = Field(600.0, ge=0, description="ops one requester may submit a minute (restarts "
                                       "and copies count); beyond it a submit is rejected rate_limited; 0: no limit")
    submit_burst: int = Field(1000, ge=1, description="... of which this many at once (the token bucket's size)")
    command_rate_per_min: float = Field(1200.0, ge=0, description="commands one requester may send a minute, every "
                                        "verb, refused and malformed ones too; beyond it a submit is rejected "
                                        "rate_limited and refusals get one dead letter a minute; 0: no limit")
    command_burst: int = Field(2000, ge=1, description="... of which this many at once (the token bucket's size)")
    # gateway (docs/gateway.md)
    gateway_host: str = Field("127.0.0.1", description="the gateway's HTTP address (loopback by default)")
    gateway_port: int = Field(8787, ge=0, le=65535, description="the gateway's HTTP port; 0 = any free port")
    gateway_tokens_file: Path | None = Field(None, description="the bearer tokens (``opsched tokens``), re-read "
                                             "when it changes")
    gateway_users: list[str] = Field(default_factory=list, description="the client users the gateway acts for, "
                                     "NAME:ROLE (as the NATS users are configured)")
    gateway_tls_cert: Path | None = Field(None, description="serve HTTPS with this certificate (PEM) ...")
    gateway_tls_key: Path | None = Field(None, description="... and key; none: plain HTTP")
    # retention (see docs/retention.md)
    retention_ttl_s: float = Field(86400.0, ge=0, description="a finished op leaves admission's memory and its "
                                   "events the op stream this long after its end (its termination.ttl, if set)")
    retention_interval_s: float = Field(60.0, gt=0, description="admission looks for finished ops past their ttl "
                                        "this often")
    retention_batch: int = Field(500, ge=1, description="ops evicted and purged per round at most")
    retention_tombstones: int = Field(100_000, ge=0, description="finished ops whose final status admission "
                                      "still remembers after they left memory (dependants, schedules, duplicates)")
    summaries_max_age_s: float = Field(90 * 86400.0, ge=0, description="summaries of finished ops kept this "
                                       "long (0 = forever)")
    cmd_max_age_s: float = Field(7 * 86400.0, gt=0, description="commands kept this long (consumed long before)")
    cmd_max_bytes: int = Field(256 << 20, gt=0, description="... and at most this many bytes: a full command "
                               "stream refuses new commands (the sender is told), it never drops queued ones")
    cmd_backlog_per_subject: int = Field(1000, ge=1, description="unconsumed commands one user may have of one verb "
                                         "(a submit: per queue); past it the server refuses that user's next ones "
                                         "of that verb, the others' still go in")
    cmd_purge_interval_s: float = Field(1.0, gt=0, description="admission removes the commands it has consumed from "
                                        "the command stream this often (what the backlog cap counts is the rest)")
    ops_max_bytes: int = Field(8 << 30, gt=0, description="the op stream keeps at most this many bytes: it is "
                               "replayed on start, so at the limit it refuses new events (readiness names it) "
                               "and never drops old ones; admission's retention frees space")
    dlq_max_age_s: float = Field(30 * 86400.0, gt=0, description="dead letters kept this long ...")
    dlq_max_bytes: int = Field(1 << 30, gt=0, description="... and at most this many bytes (oldest dropped first)")
    env_key_file: Path | None = Field(None, description="admission and the dispatcher: the key that seals env "
                                      "values in the op stream (every client reads it; only they open them); none: "
                                      "values as written")
    cluster_max_bytes: int = Field(256 << 20, gt=0, description="the cluster stream (one fact per node) keeps at "
                                   "most this many bytes; at the limit new nodes' facts are refused, known ones "
                                   "still replaced")
    config_max_bytes: int = Field(64 << 20, gt=0, description="the configuration stream keeps at most this many "
                                  "bytes (refuses new ones at the limit)")
    # key-value buckets: each at most this many bytes; at the limit a new key is refused (an existing one is
    # still replaced: one revision per key)
    cache_max_bytes: int = Field(1 << 30, gt=0, description="the cache bucket (outputs of finished ops by key)")
    summaries_max_bytes: int = Field(4 << 30, gt=0, description="the bucket of finished ops' summaries")
    attempts_max_bytes: int = Field(1 << 30, gt=0, description="the dispatcher's record of each attempt")
    in_hand_max_bytes: int = Field(256 << 20, gt=0, description="the messages each handler loop holds")
    leases_max_bytes: int = Field(1 << 20, gt=0, description="the leader leases (one key per role)")
    # cost
    prices_file: Path | None = None
    default_duration_s: float = Field(3600.0, gt=0)
    node_budget_tick_s: float = Field(60.0, gt=0, description="the cost service looks this often whether the nodes "
                                      "of a pool (the open ones so far) have spent its budget")
    # dispatcher
    kubeconfig: Path | None = Field(None, validation_alias=AliasChoices("KUBECONFIG", "OPSCHED_KUBECONFIG"))
    namespace: str = "opsched"
    pod_namespaces: str = Field("", description="the dispatcher's queue namespaces, comma-separated: it creates and "
                                "watches pods only there (its RBAC Roles); empty: every namespace (a cluster admin)")
    dispatcher_mode: Literal["kubernetes", "null"] = "kubernetes"
    agent_heartbeat_s: float = Field(5.0, gt=0, description="a named agent's dispatcher says it is alive this often")
    agent: str = Field("", pattern=r"^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)?$",
                       description="the agent this dispatcher is (queues and flavors name it; its cluster is its "
                                   "kubeconfig's); empty: the default agent")
    kube_request_timeout_s: float = Field(
        15.0, gt=0, description="every Kubernetes API call gives up after this long (a black-holed API server)")
    kube_concurrency: int = Field(
        16, ge=1, description="Kubernetes API calls the dispatcher makes at once (its threads and connections)")
    stop_grace_s: int = Field(30, ge=0, description="grace period of pods deleted by a stop or a gang release")
    preempt_grace_s: int = Field(30, ge=0, description="grace period of preempted pods (SIGTERM, then time to checkpoint)")
    gang_timeout_s: float = Field(120.0, gt=0, description="a gang not all Running this long after its main pod was created is evicted")
    gang_backoff_base_s: float = Field(10.0, ge=0, description="an evicted gang waits base * 2**attempt seconds ...")
    gang_backoff_max_s: float = Field(300.0, ge=0, description="... at most this long, before it may be admitted again")
    reconcile_interval_s: float = Field(30.0, gt=0, description="the dispatcher compares attempts with pods this often")
    reconcile_grace_s: float = Field(30.0, ge=0, description="an attempt admitted, or a pod created, this long ago is repaired")
    queue_resources: Literal["watch", "off"] = Field(
        "watch", description="the default agent's dispatcher watches the cluster's queue resources (OpsQueue, ...: "
        "docs/queue-resources.md) and sends the configuration they make; off: it does not look")
    queue_status_interval_s: float = Field(15.0, gt=0, description="the OpsQueues' statuses (pending, admitted, "
                                           "usage) are refreshed from admission's counts this often")
    attempt_fate_max_age_s: float = Field(
        86400.0, gt=0, description="the dispatcher's record of each attempt (creating, released) is kept this long")

    @classmethod
    def variables(cls) -> list[tuple[str, Any]]:
        """(the environment variable, its field) of every setting: ``OPSCHED_<FIELD>``, or the first upper-case
        alias it is read from (``NATS_URL``, ``KUBECONFIG``, ...)."""
        out = []
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            upper = [c for c in alias.choices if isinstance(c, str) and c.isupper()] if isinstance(alias, AliasChoices) else []
            out.append((upper[0] if upper else f"OPSCHED_{name.upper()}", field))
        return out

    def queue_namespaces(self) -> tuple[str, ...]:
        """``pod_namespaces`` as a tuple, in order, without blanks or repeats (empty: every namespace)."""
        return tuple(dict.fromkeys(ns.strip() for ns in self.pod_namespaces.split(",") if ns.strip()))

    def stream_limits(self) -> dict[str, StreamLimits]:
        """What each stream keeps at most (``StreamLimits``); what happens at the limit is the stream's
        (``bus.bus.DISCARD``). The op stream has no age limit: replay depends on it; admission purges
        finished ops from it (``retention``). The command stream's per-subject cap is the backlog per identity."""
        return {subjects.CMD_STREAM: StreamLimits(self.cmd_max_age_s, self.cmd_max_bytes, self.cmd_backlog_per_subject),
                subjects.OPS_STREAM: StreamLimits(0.0, self.ops_max_bytes),
                subjects.DLQ_STREAM: StreamLimits(self.dlq_max_age_s, self.dlq_max_bytes),
                subjects.CLUSTER_STREAM: StreamLimits(0.0, self.cluster_max_bytes),
                subjects.CONFIG_STREAM: StreamLimits(0.0, self.config_max_bytes)}

    def bucket_bytes(self) -> dict[str, int]:
        """The most bytes each key-value bucket keeps."""
        return {subjects.CACHE_BUCKET: self.cache_max_bytes,
                subjects.OPS_BUCKET: self.summaries_max_bytes, subjects.ATTEMPT_FATE_BUCKET: self.attempts_max_bytes,
                subjects.IN_HAND_BUCKET: self.in_hand_max_bytes, subjects.LEASE_BUCKET: self.leases_max_bytes}

    @model_validator(mode="after")
    def _backoff_below_ack_wait(self) -> "Settings":
        if self.dependency_backoff_cap_s >= self.ack_wait_s:
            raise ValueError(f"dependency_backoff_cap_s ({self.dependency_backoff_cap_s:g}) must be below ack_wait_s "
                             f"({self.ack_wait_s:g}): a message waiting out an outage must stay this service's")
        return self
