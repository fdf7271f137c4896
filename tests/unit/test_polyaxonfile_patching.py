"""Polyaxon's patch strategies, one test per strategy against a table of Polyaxon's behaviour: an operation's
``runPatch`` patching its component's run, an operation's fields patching its component's, and what is refused.

The tables follow Polyaxon's documentation, "Operation Specification" (the ``patchStrategy`` and ``runPatch``
sections: "replace: replaces all keys with new values if provided; isnull: only applies new values if the keys have
empty/None values; post_merge: applies deep merge where newer values are applied last; pre_merge: applies deep merge
where newer values are applied first", default post_merge) and "Scheduling Presets" (resources and node selectors
patched in), and the cases of Polyaxon's own test module ``test_patch_specification.py`` (mappings such as
``nodeSelector`` merged key by key, lists such as ``imagePullSecrets`` and ``tags`` concatenated without
duplicates, the original's first under post_merge and the patch's first under pre_merge; sections such as
``termination`` and ``environment`` patched field by field). Where opsched differs on purpose (env vars and volumes
matched by name, ``command``/``args`` one value each), the row says so and ``patching``'s docstring says why.
"""
from __future__ import annotations

import textwrap

import pytest

from opsched.polyaxonfile import SpecError, parse_polyaxonfile
from opsched.polyaxonfile.patching import STRATEGIES, patch_value

COMPONENT_RUN = """\
version: 1.1
kind: operation
{strategy}runPatch:
{patch}
component:
  name: comp
  run:
    kind: job
    container:
      image: trainer:1
      args: [--lr, "0.1"]
      env: [{{name: A, value: "1"}}, {{name: B, value: "1"}}]
      resources:
        limits: {{cpu: 1, memory: 1Gi}}
    environment:
      nodeSelector: {{pool: a, zone: x}}
      tolerations: [{{key: t1, operator: Exists}}]
      imagePullSecrets: [ps1, ps2]
"""
RUN_PATCH = """\
  container:
    image: trainer:2
    workingDir: /w
    args: [--lr, "0.2"]
    env: [{name: A, value: "2"}, {name: C, value: "2"}]
    resources:
      limits: {cpu: 2}
      requests: {cpu: 500m}
  environment:
    nodeSelector: {pool: b}
    tolerations: [{key: t2, operator: Exists}, {key: t1, operator: Exists}]
    imagePullSecrets: [ps2, ps3]
    labels: {team: a}
"""
T1, T2 = {"key": "t1", "operator": "Exists"}, {"key": "t2", "operator": "Exists"}

# field -> (component's value, runPatch's value), then the value per strategy: replace, isnull, post_merge, pre_merge
RUN_TABLE = {
    "a scalar set on both sides (image)": (
        lambda s: s.container.image, "trainer:2", "trainer:1", "trainer:2", "trainer:1"),
    "a field the component leaves unset (workingDir): the patch's under every strategy": (
        lambda s: s.container.working_dir, "/w", "/w", "/w", "/w"),
    "a section the patch leaves out (the component's fields stay)": (
        lambda s: s.container.resources.limits.get("memory") if s.container.resources.limits else None,
        None, "1Gi", "1Gi", "1Gi"),
    "resources: one value under replace/isnull, merged key by key under the merges": (
        lambda s: (s.container.resources.limits, s.container.resources.requests),
        ({"cpu": "2"}, {"cpu": "500m"}), ({"cpu": "1", "memory": "1Gi"}, {}),
        ({"cpu": "2", "memory": "1Gi"}, {"cpu": "500m"}), ({"cpu": "1", "memory": "1Gi"}, {"cpu": "500m"})),
    "nodeSelector (a mapping): merged key by key, the newer value last or first": (
        lambda s: s.environment.node_selector,
        {"pool": "b"}, {"pool": "a", "zone": "x"}, {"pool": "b", "zone": "x"}, {"pool": "a", "zone": "x"}),
    "tolerations (a list): the original then the patch's new items, or the patch's then the original's": (
        lambda s: s.environment.tolerations, [T2, T1], [T1], [T1, T2], [T2, T1]),
    "imagePullSecrets (a list, as in Polyaxon's test)": (
        lambda s: s.environment.image_pull_secrets,
        ["ps2", "ps3"], ["ps1", "ps2"], ["ps1", "ps2", "ps3"], ["ps2", "ps3", "ps1"]),
    "labels set by the patch only": (
        lambda s: s.environment.labels, {"team": "a"}, {"team": "a"}, {"team": "a"}, {"team": "a"}),
    "env vars matched by name (opsched: no duplicate name; Kubernetes would take Polyaxon's later one)": (
        lambda s: [(e.name, e.value) for e in s.container.env],
        [("A", "2"), ("C", "2")], [("A", "1"), ("B", "1")], [("A", "2"), ("B", "1"), ("C", "2")],
        [("A", "1"), ("C", "2"), ("B", "1")]),
    "args one value (opsched: Polyaxon would append the patch's items not in the list)": (
        lambda s: s.container.args, ["--lr", "0.2"], ["--lr", "0.1"], ["--lr", "0.2"], ["--lr", "0.1"]),
}


def run_patched(strategy: str | None, patch: str = RUN_PATCH):
    line = f"patchStrategy: {strategy}\n" if strategy else ""
    return parse_polyaxonfile(COMPONENT_RUN.format(strategy=line, patch=patch.rstrip("\n")))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_patches_the_components_run_as_polyaxon_does(strategy):
    spec = run_patched(strategy)
    column = STRATEGIES.index(strategy) + 1
    for case, row in RUN_TABLE.items():
        assert row[0](spec) == row[column], f"{strategy}: {case}"


def test_the_default_strategy_is_post_merge_as_in_polyaxon():
    assert run_patched(None) == run_patched("post_merge")


def test_a_runpatch_on_a_pytorchjob_patches_every_replica_or_the_one_it_names():
    text = textwrap.dedent("""\
        kind: operation
        runPatch: {patch}
        component:
          run:
            kind: pytorchjob
            master: {{container: {{image: t:1, resources: {{limits: {{cpu: 1}}}}}}}}
            worker: {{replicas: 2, container: {{image: t:1}}}}
        """)
    both = parse_polyaxonfile(text.format(patch="{container: {resources: {limits: {memory: 2Gi}}}}"))
    assert both.container.resources.limits == {"cpu": "1", "memory": "2Gi"}
    assert both.replicas[0].container.resources.limits == {"memory": "2Gi"}
    one = parse_polyaxonfile(text.format(patch="{worker: {replicas: 3}, cleanPodPolicy: All}"))
    assert one.replicas[0].count == 3 and one.clean_pod_policy == "All"
    assert one.container.resources.limits == {"cpu": "1"}


@pytest.mark.parametrize("patch, loc, message", [
    ("  kind: pytorchjob\n", "runPatch.kind", "runPatch.kind 'pytorchjob' is not the component's run kind 'job'"),
    ("  container: {resources: {limits: {cpu: lots}}}\n", "runPatch.container.resources.limits.cpu",
     "'lots' is not a Kubernetes quantity"),
    ("  container: {imageX: x}\n", "runPatch.container.imageX", "unknown field 'imageX'"),
    ("  environment: {restartPolicy: Always}\n", "runPatch.environment.restartPolicy", "never lets a job end"),
])
def test_a_bad_runpatch_is_refused_at_its_own_line(patch, loc, message):
    with pytest.raises(SpecError) as raised:
        run_patched(None, patch)
    errors = {e.loc: e for e in raised.value.errors}
    assert loc in errors, raised.value.errors
    assert message in errors[loc].msg and errors[loc].file is None
    assert 4 <= errors[loc].line <= 3 + len(patch.splitlines())  # in the runPatch (line 3), not the component


@pytest.mark.parametrize("text, loc, message", [
    ("kind: operation\nrunPatch: [a]\ncomponent: {run: {kind: job, container: {image: x}}}\n", "runPatch",
     "runPatch is a mapping"),
    ("kind: operation\nrunPatch: {container: {image: y}, master: {replicas: 1}}\ncomponent:\n  run:\n"
     "    kind: pytorchjob\n    master: {container: {image: x}}\n", "runPatch",
     "holds a run's fields (master) or one replica's (container"),
    ("kind: component\nrunPatch: {container: {image: y}}\nrun: {kind: job, container: {image: x}}\n", "runPatch",
     "'runPatch' belongs to an operation"),
    ("kind: component\npatchStrategy: isnull\nrun: {kind: job, container: {image: x}}\n", "patchStrategy",
     "'patchStrategy' belongs to an operation"),
    ("kind: operation\npatchStrategy: merge\ncomponent: {run: {kind: job, container: {image: x}}}\n",
     "patchStrategy", "'replace', 'isnull', 'post_merge' or 'pre_merge'"),
])
def test_a_runpatch_or_strategy_in_the_wrong_shape_or_place_is_refused(text, loc, message):
    with pytest.raises(SpecError) as raised:
        parse_polyaxonfile(text)
    errors = {e.loc: e.msg for e in raised.value.errors}
    assert loc in errors and message in errors[loc], raised.value.errors


# The operation's own fields patch its component's with its patchStrategy (Polyaxon compiles an operation so):
# field -> (component, operation), then replace, isnull, post_merge, pre_merge.
OPERATION_TABLE = {
    "name": (("c", "o"), "o", "c", "o", "c"),
    "tags": ((["a", "b"], ["b", "c"]), ["b", "c"], ["a", "b"], ["a", "b", "c"], ["b", "c", "a"]),
    "termination": (({"maxRetries": 2, "timeout": 30}, {"maxRetries": 3, "ttl": 60}),
                    (3, 30, 60), (2, 30, 60), (3, 30, 60), (2, 30, 60)),
}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_patches_the_components_fields_with_the_operations(strategy):
    comp = {k: v[0][0] for k, v in OPERATION_TABLE.items()}
    op = {k: v[0][1] for k, v in OPERATION_TABLE.items()}
    text = (f"kind: operation\npatchStrategy: {strategy}\n" + "".join(f"{k}: {v}\n" for k, v in op.items())
            + "component:\n" + "".join(f"  {k}: {v}\n" for k, v in comp.items())
            + "  run: {kind: job, container: {image: x}}\n").replace("'", "")
    spec = parse_polyaxonfile(text)
    column = STRATEGIES.index(strategy) + 1
    got = {"name": spec.name, "tags": spec.tags,
           "termination": (spec.termination.max_retries, spec.termination.timeout, spec.termination.ttl)}
    assert got == {k: v[column] for k, v in OPERATION_TABLE.items()}


def test_a_null_in_a_patch_is_unset_and_changes_nothing():
    assert patch_value({"a": 1, "b": {"c": 2}}, {"a": None, "b": {"c": None}}, "post_merge") == {"a": 1, "b": {"c": 2}}
    assert patch_value([1, 2], None, "replace") == [1, 2] and patch_value(None, [3], "isnull") == [3]
