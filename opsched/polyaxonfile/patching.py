"""Polyaxon's patch strategies, and an operation's ``runPatch`` applied to its component's run.

A patch changes an original (a component's run by a ``runPatch``, an operation by a later ``-f`` file, a component's
fields by its operation's) with a ``patchStrategy`` (Polyaxon's V1PatchStrategy; default ``post_merge``, as in
Polyaxon). A field set on one side only is taken from that side whatever the strategy; a null field is not set.
For a field set on both sides:

  * A *section* (a mapping of known fields: the run, its ``container``, ``environment`` and a distributed run's ``master``/
    ``worker``; ``affinity``, the pod's ``securityContext``, ``dnsConfig``; an operation's ``termination``, ``cache``,
    ``plugins``) is patched field by field under every strategy, as Polyaxon patches its models.
  * Any other value (a scalar, a list, a free mapping such as ``resources``, ``nodeSelector``, ``labels``):
      - ``replace``: the patch's value; ``isnull``: the original's (the patch only fills what the original leaves
        unset);
      - ``post_merge``: mappings merged key by key, recursively, the patch winning (``resources.limits`` keeps the
        original's other keys); lists: the original's items, then the patch's that are not already in it; a scalar:
        the patch's;
      - ``pre_merge``: the same with the original winning; lists: the patch's items, then the original's not in
        them.
  * Lists of named items are matched by name instead of appended: ``env`` and ``volumes`` by ``name``,
    ``volumeMounts`` by ``mountPath``, sidecar containers by ``name`` (a matched container is a section); a matched
    item is the patch's (``post_merge``) or the original's (``pre_merge``) in the original's place. Polyaxon appends
    the patch's item, and Kubernetes then takes the later of two env vars of the same name (a volume name twice is
    invalid): the pod gets the same env, without a duplicate.
  * ``command`` and ``args`` are one value each (a list a patch replaces as a whole under ``post_merge``): Polyaxon
    appends the items of the patch's that are not already in the list, which makes ``[--lr, 0.1]`` patched with
    ``[--lr, 0.2]`` into ``[--lr, 0.1, 0.2]``.
  * An operation's ``params`` are merged param by param (a param is one value), a matrix with another of the same
    kind field by field (one of another kind is a value), as in Polyaxon.

``runPatch`` is validated as the component's run kind would be (its ``kind``, if set, must be the component's). For
a pytorchjob it holds a run's fields (``master``, ``worker``, ``cleanPodPolicy``) or one replica's (``container``,
``replicas``, ...), which then patch every replica the component has, as in Polyaxon.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from opsched.polyaxonfile.document import Node, Source, plain, wrap
from opsched.polyaxonfile.errors import Problem
from opsched.rules.replica_roles import KINDS

Strategy = Literal["replace", "isnull", "post_merge", "pre_merge"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
DEFAULT_STRATEGY = "post_merge"  # Polyaxon's V1Operation: "patch_strategy: defaults to post_merge"
_WINNER_IS_PATCH = {"replace": True, "isnull": False, "post_merge": True, "pre_merge": False}


class Shape:
    """How two values set on both sides combine (``Value``: Polyaxon's rules for a plain value)."""

    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        raise NotImplementedError


class Whole(Shape):
    """One value: the strategy picks a side."""

    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        return patch if _WINNER_IS_PATCH[strategy] else orig


WHOLE = Whole()


class Value(Shape):
    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        if strategy in ("replace", "isnull"):
            return WHOLE.combine(orig, patch, strategy)
        first, winner = (orig, patch) if strategy == "post_merge" else (patch, orig)
        if isinstance(first.value, dict) and isinstance(winner.value, dict):
            return _deep_merge(first, winner)
        if isinstance(first.value, list) and isinstance(winner.value, list):
            seen = [plain(item) for item in first.value]
            return Node([*first.value, *(i for i in winner.value if plain(i) not in seen)], first.source, first.at)
        return winner


VALUE = Value()


def _deep_merge(base: Node, winner: Node) -> Node:
    """Polyaxon's ``deep_update``: mappings key by key, recursively; anything else: the winner's."""
    out = dict(base.value)
    for key, value in winner.value.items():
        if value.value is None:
            continue  # null: not set
        mine = out.get(key)
        both = mine is not None and isinstance(mine.value, dict) and isinstance(value.value, dict)
        out[key] = _deep_merge(mine, value) if both else value  # type: ignore[arg-type]
    return Node(out, base.source, base.at)


@dataclass(frozen=True)
class Section(Shape):
    """A mapping of known fields, patched field by field (``fields``: the shape of each; others are values)."""

    fields: dict[str, Shape] = field(default_factory=dict)

    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        if not (isinstance(orig.value, dict) and isinstance(patch.value, dict)):
            return VALUE.combine(orig, patch, strategy)  # not a mapping on one side: the models say what is wrong
        out = dict(orig.value)
        for key, value in patch.value.items():
            merged = combine(orig.value.get(key), value, strategy, self.fields.get(key, VALUE))
            if merged is not None:
                out[key] = merged
        return Node(out, orig.source, orig.at)


@dataclass(frozen=True)
class SameKind(Section):
    """A section that is one value when the two sides' ``kind`` differ (a matrix, a schedule); under ``replace``
    and ``isnull`` always one value, as in Polyaxon."""

    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        kinds = [n.value["kind"].value if n.is_set("kind") else None for n in (orig, patch)]
        if strategy in ("replace", "isnull") or kinds[0] != kinds[1]:
            return WHOLE.combine(orig, patch, strategy)
        return super().combine(orig, patch, strategy)


@dataclass(frozen=True)
class Keyed(Shape):
    """A list of mappings matched by ``key`` (``item``: how two matched items combine)."""

    key: str
    item: Shape = WHOLE

    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        if strategy in ("replace", "isnull"):
            return WHOLE.combine(orig, patch, strategy)
        orig_keys, patch_keys = self._keys(orig), self._keys(patch)
        if orig_keys is None or patch_keys is None:
            return VALUE.combine(orig, patch, strategy)  # an item without its key: the models say so
        mine, theirs = dict(zip(orig_keys, orig.value)), dict(zip(patch_keys, patch.value))
        if strategy == "post_merge":  # the original's order, then the patch's new items
            base, order = orig, [*mine.items(), *((k, v) for k, v in theirs.items() if k not in mine)]
        else:
            base, order = patch, [*theirs.items(), *((k, v) for k, v in mine.items() if k not in theirs)]
        out = [self.item.combine(mine[k], theirs[k], strategy) if k in mine and k in theirs else item
               for k, item in order]
        return Node(out, base.source, base.at)

    def _keys(self, node: Node) -> list[Any] | None:
        if not isinstance(node.value, list):
            return None
        keys = [item.value[self.key].value if isinstance(item.value, dict) and item.is_set(self.key) else None
                for item in node.value]
        return None if None in keys else keys


def combine(orig: Node | None, patch: Node | None, strategy: str, shape: Shape = VALUE) -> Node | None:
    """``orig`` patched by ``patch`` with ``strategy``; a side that is unset (absent or null) gives the other."""
    if patch is None or patch.value is None:
        return orig
    if orig is None or orig.value is None:
        return patch
    return shape.combine(orig, patch, strategy)


_PLAIN = Source("<value>", "")


def patch_value(orig: Any, patch: Any, strategy: str, shape: Shape = VALUE) -> Any:
    """``combine`` on plain values (an operation's fields over its component's, in ``convert``)."""
    return plain(combine(wrap(orig, _PLAIN) if orig is not None else None,
                         wrap(patch, _PLAIN) if patch is not None else None, strategy, shape))


# --- the shapes of what is patched ----------------------------------------------------------------------------

CONTAINER = Section({"command": WHOLE, "args": WHOLE, "env": Keyed("name"), "volumeMounts": Keyed("mountPath")})
ENVIRONMENT = Section({"affinity": Section(), "securityContext": Section(), "dnsConfig": Section(),
                       "volumes": Keyed("name")})
_REPLICA_FIELDS = {"container": CONTAINER, "environment": ENVIRONMENT, "volumes": Keyed("name"),
                   "sidecars": Keyed("name", CONTAINER)}
REPLICA = Section(_REPLICA_FIELDS)
RUNS: dict[str, Section] = {
    "job": Section(_REPLICA_FIELDS),
    **{kind: Section({role: REPLICA for role in k.roles}) for kind, k in KINDS.items()},
    "service": Section(_REPLICA_FIELDS),  # a job's pod, and its ports (a list: taken whole)
}
# a distributed run's own fields (else a replica's): its replica sections, and the run-level fields of its kind
_KIND_FIELDS = {"tfjob": ("enableDynamicWorker", "successPolicy"), "mpijob": ("slotsPerWorker",),
                "mxjob": ("mode", "tuner", "tunerTracker", "tunerServer")}
RUN_KEYS: dict[str, frozenset[str]] = {
    kind: frozenset({"kind", "cleanPodPolicy", "schedulingPolicy", "elasticPolicy", *k.roles,
                     *_KIND_FIELDS.get(kind, ())}) for kind, k in KINDS.items()}


class _Entries(Shape):
    """A mapping of entries (params), each one value: ``replace``/``isnull`` take a side whole, as Polyaxon
    does for its dict fields; the merges go entry by entry (``post_merge``: the patch's entry wins)."""

    def combine(self, orig: Node, patch: Node, strategy: str) -> Node:
        if strategy in ("replace", "isnull") or not (isinstance(orig.value, dict) and isinstance(patch.value, dict)):
            return WHOLE.combine(orig, patch, strategy)
        first, winner = (orig, patch) if strategy == "post_merge" else (patch, orig)
        out = dict(first.value)
        out.update((k, v) for k, v in winner.value.items() if v.value is not None)
        return Node(out, first.source, first.at)


ENTRIES = _Entries()


def operation_shape(run_kind: str | None) -> Section:
    """An operation patched by a later ``-f`` file (Polyaxon's presets): its sections, params, matrix, schedule and
    its ``runPatch`` (the component's run shape)."""
    section = Section()
    return Section({"termination": section, "cache": section, "plugins": section, "params": ENTRIES,
                    "matrix": SameKind({"params": ENTRIES}), "schedule": SameKind(),
                    "runPatch": RUNS.get(run_kind or "", VALUE)})  # type: ignore[dict-item]


# --- runPatch ---------------------------------------------------------------------------------------------------

def run_patch_problems(patch: Node, run: Node, at: tuple) -> list[Problem]:
    """Why ``patch`` cannot patch ``run`` (a run of a supported kind): not a mapping, another kind, a pytorchjob
    patch mixing a run's fields and a replica's."""
    if not isinstance(patch.value, dict):
        return [(at, f"runPatch is a mapping of the component's run fields, got {type(patch.value).__name__}")]
    kind = run.value["kind"].value
    if patch.is_set("kind") and patch.value["kind"].value != kind:
        return [(at + ("kind",), f"runPatch.kind {patch.value['kind'].value!r} is not the component's run kind "
                                 f"{kind!r}")]
    if kind in RUN_KEYS:
        run_keys = sorted(k for k in patch.value if k in RUN_KEYS[kind] - {"kind"})
        replica_keys = sorted(k for k in patch.value if k not in RUN_KEYS[kind])
        if run_keys and replica_keys:
            return [(at, f"a {kind}'s runPatch holds a run's fields ({', '.join(run_keys)}) or one replica's "
                         f"({', '.join(replica_keys)}, applied to every replica), not both")]
    return []


def as_run_patch(patch: Node, run: Node) -> Node:
    """A distributed run's replica patch (``container``, ``replicas``, ...) as a patch of each replica ``run`` has."""
    keys = set(patch.value) - {"kind"}
    kind = run.value["kind"].value
    if kind not in RUN_KEYS or not keys or keys & RUN_KEYS[kind]:
        return patch  # a run's fields (or both kinds: refused by ``run_patch_problems``)
    fields = {k: v for k, v in patch.value.items() if k != "kind"}
    return Node({r: Node(fields, patch.source, patch.at) for r in KINDS[kind].roles if run.is_set(r)},
                patch.source, patch.at)


def apply_run_patch(run: Node, patch: Node, strategy: str) -> Node:
    """``run`` (a supported kind's) patched by ``patch`` (checked by ``run_patch_problems``)."""
    shape = RUNS[run.value["kind"].value]
    patched = combine(run, as_run_patch(patch, run), strategy, shape)
    assert patched is not None
    return patched
