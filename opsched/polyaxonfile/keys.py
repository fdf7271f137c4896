"""Which keys of a polyaxonfile opsched accepts and ignores, and which it refuses.

Accepted and ignored (Polyaxon allows them; opsched does not use them yet)
  * top level of a component or an operation: ``TOP_LEVEL_IGNORED``
    (description, presets, hooks, plugins, joins, schedule, dependencies, trigger,
    skipOnUpstreamSkip, events, actions, pathRef, hubRef, dagRef, urlRef, runPatch, patchStrategy,
    isPreset, contexts, template, build). Those that change what runs or when
    (``BEHAVIOUR_IGNORED``: schedule, hooks, ...) raise a ``SpecWarning``.
  * container: imagePullPolicy, ports, probes, lifecycle, terminationMessage*, stdin*, tty;
    pytorchjob run: cleanPodPolicy;
    environment: hostAliases, securityContext, imagePullSecrets, hostNetwork, hostPID, dnsPolicy,
    dnsConfig, restartPolicy; termination: culling; inputs/outputs: description, isList, isFlag,
    argFormat, delayValidation, options, connection, toInit, toEnv.
Every other key is an error ("unknown field"), and keys that would change the run if dropped
(init, sidecars, connections, envFrom, valueFrom, nodeName, schedulerName, environment.priority,
and the pytorchjob keys above) are errors saying they are not supported yet.
The ignored keys of each section are the ``ignored`` set of its model (``models_container``,
``models_run``, ``models_operation``); unsupported keys (``UNSUPPORTED``) are reported by
``validation``; ``load.warn_ignored`` raises the ``SpecWarning``.
"""
from __future__ import annotations

# Top-level keys of a component or an operation that are accepted and ignored. (``matrix`` is
# read by the parser before validation: see ``GridModel``/``RandomModel``.)
TOP_LEVEL_IGNORED = frozenset({
    "description", "presets", "hooks", "plugins", "joins", "schedule", "dependencies",
    "trigger", "skipOnUpstreamSkip", "events", "actions", "pathRef", "hubRef", "dagRef", "urlRef",
    "runPatch", "patchStrategy", "isPreset", "contexts", "template", "build",
})
# Of those, the ones whose absence changes what runs or when: the parser warns about them.
BEHAVIOUR_IGNORED = frozenset({
    "presets", "hooks", "plugins", "joins", "schedule", "dependencies", "trigger",
    "events", "actions", "runPatch", "template", "build",
})
# Keys Polyaxon or Kubernetes accept that opsched rejects: ignoring them would change the run.
UNSUPPORTED = frozenset({
    "init", "sidecars", "connections", "envFrom", "valueFrom", "nodeName", "schedulerName",
    "priority",  # run.environment.priority (a raw pod priority); use priorityClassName
    "schedulingPolicy", "elasticPolicy", "nProcPerNode",  # pytorchjob: change how the gang runs
    "earlyStopping",  # matrix: would stop a sweep early
    "isFlag", "argFormat", "toInit", "connection",  # inputs/outputs/params: change how a value reaches the container
})
SUPPORTED_VERSIONS = ("1", "1.0", "1.1")
RUN_KINDS_SUPPORTED = ("job", "pytorchjob")
RUN_KINDS_KNOWN = frozenset({
    "job", "service", "dag", "daskjob", "rayjob", "tfjob", "pytorchjob", "mpijob", "mxjob",
    "xgbjob", "paddlejob", "notifier", "watchdog", "tuner", "cleaner",
})
