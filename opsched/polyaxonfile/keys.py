"""What becomes of every key of a polyaxonfile: honoured, refused, or (no effect on scheduling) warned.

Honoured: every field of the models (``models_operation``, ``models_run``, ``models_container``,
``models_k8s``, ``models_matrix``, ``models_schedule``) reaches the OpSpec and the pod, or decides what
the parser does (version, kind, matrix). ``tests/unit/test_polyaxonfile_fields.py`` walks them all.

Refused ("not supported by opsched yet", or a message of ``REFUSED_MESSAGES``): the keys of
``UNSUPPORTED`` wherever they appear — features that would change what runs or when if dropped
(DAG features, ``urlRef``, ``envFrom``, ...), ``pathRef``/``hubRef``/``runPatch`` anywhere but where they are read
before validation (an operation, its hooks: ``references``, ``overlays``), ``patchStrategy`` on a component,
``schedule`` on a plain submit (``opsched schedule FILE`` reads it), the plugins of ``PLUGINS_REFUSED`` when set, a
 job's ``restartPolicy: Always``, ``hostNetwork``/``hostPID``/``hostIPC: true``, a distributed run's
``cleanPodPolicy: None`` and what ``models_run`` refuses of it (a partial gang's ``schedulingPolicy.minAvailable``, ...),
a service's ``isExternal: true`` and ``restartPolicy`` Never/OnFailure, ``culling`` on anything but a service,
``isFlag``/``argFormat``/``toInit``/``connection`` on inputs and params, the init kinds that
read an artifacts store (``artifacts``, ``paths``, ``dockerfile``, ``tensorboard``, the refs: ``models_init``).

Warned: ``WARNED`` — fields that change neither scheduling nor the pod in opsched: the plugins of
``PLUGINS_WARNED`` when set, the descriptions of inputs and outputs, an init file's ``kind``. The CLI prints a
``SpecWarning`` and the op records them (``OpSpec.ignored``), so ``opsched ops`` and ``why`` show them.
Every other key is an error ("unknown field").
"""
from __future__ import annotations

# Keys Polyaxon or Kubernetes accept that opsched refuses: ignoring them would change the run.
UNSUPPORTED = frozenset({
    "envFrom", "valueFrom", "nodeName", "schedulerName",
    "priority",  # run.environment.priority (a raw pod priority); use priorityClassName
    "elasticPolicy", "nProcPerNode",  # pytorchjob, paddlejob: change how the gang runs
    "earlyStopping",  # matrix: would stop a sweep early
    "isFlag", "argFormat", "toInit", "connection",  # inputs/outputs/params: change how a value reaches the container
    # top level: pipelines, references, hooks and presets change what runs or when
    "presets", "joins", "dependencies", "trigger", "skipOnUpstreamSkip", "events", "actions",
    "pathRef", "hubRef", "runPatch",  # read on an operation (references, patching); refused anywhere else
    "dagRef", "urlRef", "isPreset", "contexts", "template",
    "build",
    "probe",  # termination.probe: Polyaxon's activity probe for culling
})
REFUSED_MESSAGES = {
    **{ref: (f"'{ref}' belongs to an operation or to a hook (it names the component they run), not here; a "
             f"component is what a {ref} names") for ref in ("hubRef", "pathRef")},
    "dagRef": ("'dagRef' names a component of a DAG's, and opsched has no DAGs yet: put the component inline, or "
               "in a file a pathRef names"),
    "urlRef": ("'urlRef' is not supported: opsched fetches nothing from the network; save the component in a file "
               "and name it with a pathRef (or put it in a hub folder: hubRef)"),
    "runPatch": "'runPatch' belongs to an operation (or a later -f file): it patches the operation's component's run",
    "patchStrategy": "'patchStrategy' belongs to an operation (or a later -f file), with its runPatch",
    "isPreset": ("'isPreset' marks a file that patches another (a later -f file); the first file is the operation: "
                 "remove it"),
    "probe": ("'probe' (an activity probe) is not supported: opsched counts a service as used when someone runs "
              "`opsched touch ID`; remove it (termination.culling.timeout still applies)"),
    "earlyStopping": ("'earlyStopping' is not supported by opsched yet: it needs a tuner watching the trials' "
                      "metrics; remove it to run every trial"),
    "schedule": ("this file has a schedule: run it on its schedule with `opsched schedule FILE`, or remove "
                 "the section to run it once"),
}
# Polyaxon's plugins: those that add volumes, sidecars or init containers to the pod are refused when set;
# those that only collect have no effect on scheduling and are warned when set.
PLUGINS_REFUSED = ("auth", "docker", "shm", "mountArtifactsStore", "sidecar", "autoResume")
PLUGINS_WARNED = ("collectArtifacts", "collectLogs", "collectResources", "syncStatuses", "externalHost",
                  "logLevel")  # plugins.notifications: honoured (the notifier, docs/notifications.md)
WARNED = frozenset({*(f"plugins.{p}" for p in PLUGINS_WARNED), "inputs.description", "outputs.description",
                    "hooks.disableDefaults",  # no default hooks or presets in opsched
                    "init.file.kind",  # an artifact kind for Polyaxon's lineage
                    "run.rewritePath"})  # a service's: no gateway adds a base URL to rewrite
SUPPORTED_VERSIONS = ("1", "1.0", "1.1")
RUN_KINDS_SUPPORTED = ("job", "pytorchjob", "tfjob", "mpijob", "xgbjob", "paddlejob", "mxjob", "service")
RUN_KINDS_KNOWN = frozenset({
    "job", "service", "dag", "daskjob", "rayjob", "tfjob", "pytorchjob", "mpijob", "mxjob",
    "xgbjob", "paddlejob", "notifier", "watchdog", "tuner", "cleaner",
})
