"""The bounds of what an operation may ask for, defined once (the contract's, the edge's and the services').

Every bound is checked where the value enters (``proto.spec`` on decode and construction, the polyaxonfile
edge with the field's path); exceeding one is refused with a message naming the field and the bound. The
docs/bad-input.md lists them and what exceeding each gets.
"""
from __future__ import annotations

# ---- the size of an op ---------------------------------------------------------------------------
MAX_SPEC_BYTES = 256 * 1024  # an op spec, encoded: what every event carrying it must still fit under NATS's 1 MiB
MAX_REPLICA_GROUPS = 8  # replica groups of one op (Kueue's limit of pod sets per workload)
MAX_PODS_PER_OP = 1000  # the main pod plus every replica of every group
MAX_SLOTS_PER_WORKER = 1024  # an mpijob's slotsPerWorker (processes per worker in its hostfile)
MAX_SERVICE_PORTS = 16  # the ports of a service (its ClusterIP Service's)
MAX_ENV_PER_CONTAINER = 1000  # env entries of one container
MAX_LIST_ITEMS = 1000  # any other list of a container or environment (command, args, volumes, tolerations, ...)
MAX_TAGS = 100
MAX_HOOKS = 8  # hooks of one op (follow-up ops when it ends)
MAX_NAME_CHARS = 63  # an op's name, project, queue, container and replica-group names (a DNS label)
MAX_CONNECTION_NAME_CHARS = 50  # a connection's name: its secret's volume is ``opsched-conn-<name>`` (a DNS label)
MAX_INIT_STEPS = 16  # init steps of one pod (Polyaxon's ``init``: git, file, container)
MAX_SIDECARS = 8  # sidecar containers of one pod
MAX_CONNECTIONS = 16  # connections one pod names (``connections`` and its init steps')
MAX_FILE_CONTENT_BYTES = 64 * 1024  # an init file's content (under Linux's 128 KiB for one exec string)
MAX_OPS_PER_COMMAND = 1000  # op ids of one bulk stop, approve or reject (``proto.commands.OperationsCommand``)
MAX_OUTPUTS_BYTES = 4096  # an op's outputs as JSON: Kubernetes' own bound on a container's termination message

# ---- labels and annotations: Kubernetes' own rules ---------------------------------------------------
MAX_LABELS = 64  # labels on one op's pods (opsched adds its own few)
MAX_LABEL_NAME_CHARS = 63  # the name part of a label or annotation key
MAX_LABEL_PREFIX_CHARS = 253  # the optional DNS-subdomain prefix of a key
MAX_LABEL_VALUE_CHARS = 63
MAX_ANNOTATIONS_BYTES = 256 * 1024  # keys plus values of all an op's annotations (the API server's limit)

# ---- quantities -----------------------------------------------------------------------------------
MAX_DEVICES_PER_POD = 1024  # whole accelerators (GPUs, TPU chips) one pod may ask for
MAX_QUANTITY = 2**63  # any resource quantity, in base units (bytes, cores)

# ---- scheduling numbers -----------------------------------------------------------------------------
MAX_PRIORITY = 1_000_000_000  # |raw priority| (Kubernetes' limit for user priority classes); a queue may bound lower
MAX_RETRIES = 100
MAX_COHORT_DEPTH = 6  # cohorts from a queue's own up to its root (org → dept → team is 3)
MAX_DURATION_S = 366 * 24 * 3600  # termination.timeout, termination.ttl, cache.ttl
MAX_COST = 1e12  # any amount of money on the wire (non-negative, finite)
MAX_PRICE_POINTS = 128  # an estimate's price points (pools x products): the cost service refuses a bigger catalogue

# ---- what is kept of an op ---------------------------------------------------------------------------
MAX_HISTORY_ENTRIES = 48  # entries of one op's history (``why``, its summary): the first and the latest ones
MAX_HISTORY_MESSAGE = 300  # characters of one history entry's message (the rest cut, "…" marking the cut)
