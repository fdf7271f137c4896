"""The queue configuration as Kubernetes custom resources (group ``opsched.io``): one cluster-scoped kind per list of
the configuration (``OpsQueue``, ``OpsCohort``, ``OpsFlavor``, ``OpsPriorityClass``, ``OpsAgent``, ``OpsBudget``) and a
singleton ``OpsConfig`` named ``opsched`` for the rest (default queue, placement, access, connections, ...).

One source: each kind's ``spec`` is its item of ``proto.queues`` (a queue of the YAML file without its ``name``,
which is ``metadata.name``), and the CRDs' schemas are generated here from that contract (``crds``; checked in as
deploy/base/10-crds.yaml and compared by a contract test). The schemas are structural (apiextensions.k8s.io/v1, as
the API server since 1.16 takes them) and keep unknown fields (``x-kubernetes-preserve-unknown-fields``), so that a
misspelt field reaches ``assemble``, which refuses it by its path, instead of being pruned without a word.

``assemble`` turns the resources into the ``QueuesConfig`` the dispatcher sends as ``opsched queues --apply`` does,
or says, per resource, what is wrong with it (each problem of ``rules.queues_file`` mapped to the resource it is
about, its path under ``spec``). ``manifests`` is the way back: the resources of a configuration file."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from opsched.proto.queues import Agent, Budget, Cohort, Flavor, PriorityClass, Queue, QueuesConfig
from opsched.rules.queues_file import problems as config_problems

GROUP = "opsched.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
SETTINGS_NAME = "opsched"  # the one OpsConfig read; others are ignored (said in their status)
APPLIED = "Applied"  # the condition every resource's status carries


@dataclass(frozen=True)
class Column:
    name: str
    json_path: str
    type: str = "string"
    priority: int = 0  # 1: shown with -o wide only


@dataclass(frozen=True)
class Kind:
    kind: str
    plural: str
    item: type[msgspec.Struct] | None  # one element of the configuration's list; None: the settings (OpsConfig)
    attr: str = ""  # its list in QueuesConfig ("" for the settings)
    short_names: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()
    named: bool = True  # metadata.name is the element's name (a budget names what it limits in its spec)

    @property
    def path(self) -> str:
        """The list's name as the configuration file writes it (and as ``rules.queues_file`` problems say it)."""
        head, *rest = self.attr.split("_")
        return head + "".join(word.title() for word in rest)


_APPLIED_COLUMN = Column("Applied", f'.status.conditions[?(@.type=="{APPLIED}")].status')
_AGE = Column("Age", ".metadata.creationTimestamp", "date")
SETTINGS = Kind("OpsConfig", "opsconfigs", None, short_names=("opsconf",),
                columns=(Column("Default Queue", ".spec.defaultQueue"), Column("Placement", ".spec.placement"),
                         _APPLIED_COLUMN, _AGE))
KINDS: tuple[Kind, ...] = (
    Kind("OpsQueue", "opsqueues", Queue, "queues", ("opsq",), (
        Column("Cohort", ".spec.cohort"), Column("Concurrency", ".spec.concurrency", "integer"),
        Column("Pending", ".status.pending", "integer"), Column("Admitted", ".status.admitted", "integer"),
        Column("Stop", ".status.stopPolicy", priority=1), _APPLIED_COLUMN, _AGE)),
    Kind("OpsCohort", "opscohorts", Cohort, "cohorts", ("opscohort",),
         (Column("Parent", ".spec.parent"), _APPLIED_COLUMN, _AGE)),
    Kind("OpsFlavor", "opsflavors", Flavor, "flavors", ("opsflavor",), (
        Column("Pool", ".spec.pool.name"), Column("Max Nodes", ".spec.pool.maxNodes", "integer"),
        Column("Agent", ".spec.agent", priority=1), _APPLIED_COLUMN, _AGE)),
    Kind("OpsPriorityClass", "opspriorityclasses", PriorityClass, "priority_classes", ("opspc",),
         (Column("Value", ".spec.value", "integer"), _APPLIED_COLUMN, _AGE)),
    Kind("OpsAgent", "opsagents", Agent, "agents", ("opsagent",), (_APPLIED_COLUMN, _AGE)),
    Kind("OpsBudget", "opsbudgets", Budget, "budgets", ("opsbudget",), (
        Column("Scope", ".spec.scope"), Column("For", ".spec.name"), Column("Window", ".spec.window"),
        Column("Money", ".spec.money", "number"), Column("GPU Hours", ".spec.gpuHours", "number"), _APPLIED_COLUMN,
        _AGE), named=False),
    SETTINGS,
)
BY_KIND = {k.kind: k for k in KINDS}
LIST_KINDS = tuple(k for k in KINDS if k.item is not None)
_LISTS = {k.path: k for k in LIST_KINDS}  # "queues" -> OpsQueue
_SETTINGS_FIELDS = {f.encode_name for f in msgspec.structs.fields(QueuesConfig)} - set(_LISTS)


# ---- the CRDs, generated from the contract ---------------------------------------------------------------------

def crds() -> list[dict[str, Any]]:
    """Every kind's CustomResourceDefinition (apiextensions.k8s.io/v1, cluster-scoped, a status subresource)."""
    return [crd(kind) for kind in KINDS]


def crd(kind: Kind) -> dict[str, Any]:
    root = {"type": "object", "description": _description(kind), "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
        "spec": spec_schema(kind), "status": _status_schema(kind)}}
    version = {"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
               "additionalPrinterColumns": [_column(c) for c in kind.columns],
               "schema": {"openAPIV3Schema": root}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{kind.plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Cluster", "versions": [version],
                     "names": {"kind": kind.kind, "listKind": f"{kind.kind}List", "plural": kind.plural,
                               "singular": kind.kind.lower(), "shortNames": list(kind.short_names),
                               "categories": ["opsched"]}}}


def spec_schema(kind: Kind) -> dict[str, Any]:
    """The structural schema of a kind's ``spec``: its contract type's JSON schema, without the name a named kind
    takes from ``metadata.name`` (the settings: the configuration without the lists other kinds carry)."""
    full = msgspec.json.schema(kind.item or QueuesConfig)
    schema = _structural(full, full.get("$defs", {}))
    drop = {"name"} if kind.named and kind.item is not None else set(_LISTS) if kind.item is None else set()
    schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in drop}
    required = [r for r in schema.pop("required", []) if r not in drop]
    return schema | ({"required": required} if required else {})


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A msgspec JSON schema node as a structural OpenAPI v3 one: references inlined, ``X | None`` as nullable, a
    quantity (string or number) as int-or-string, every object's unknown fields kept (refused by ``assemble``)."""
    if "$ref" in node:
        return _structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "anyOf" in node:
        return _alternatives(node["anyOf"], defs)
    if "enum" in node:
        return {"type": "string", "enum": sorted(node["enum"])}
    kind = node.get("type")
    out: dict[str, Any] = {"type": kind} if kind else {"x-kubernetes-preserve-unknown-fields": True}
    if node.get("description"):
        out["description"] = node["description"]
    if kind == "object":
        out |= _object(node, defs)
    elif kind == "array":
        out["items"] = _structural(node["items"], defs)
    return out | _bounds(node)


def _bounds(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "minProperties"):
        if key in node:
            out[key] = node[key]
    for key, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if key in node:
            out[bound], out[key] = node[key], True  # OpenAPI v3.0 says it as a flag on the bound
    return out


def _alternatives(options: list[dict[str, Any]], defs: dict[str, Any]) -> dict[str, Any]:
    """``X | None``: X, nullable; a quantity (``str | int | float``): int-or-string; nothing else is in the contract."""
    present = [o for o in options if o != {"type": "null"}]
    nullable = {"nullable": True} if len(present) < len(options) else {}
    if len(present) == 1:
        return _structural(present[0], defs) | nullable
    if {o.get("type") for o in present} == {"string", "integer", "number"}:
        return {"x-kubernetes-int-or-string": True} | nullable  # a quantity: "8", 8, "500m" (a fraction as "0.5")
    raise ValueError(f"no structural schema for anyOf {options}")


def _object(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "properties" in node:  # a struct: its fields, and unknown ones kept for ``assemble`` to refuse by name
        out: dict[str, Any] = {"properties": {k: _structural(v, defs) for k, v in node["properties"].items()}}
        if node.get("required"):
            out["required"] = list(node["required"])
        return out | {"x-kubernetes-preserve-unknown-fields": True}
    if isinstance(node.get("additionalProperties"), dict):  # a map
        return {"additionalProperties": _structural(node["additionalProperties"], defs)}
    return {"x-kubernetes-preserve-unknown-fields": True}  # free-form (tolerations, taints)


def _status_schema(kind: Kind) -> dict[str, Any]:
    condition = {"type": "object", "required": ["type", "status"], "properties": {
        "type": {"type": "string"}, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "reason": {"type": "string"}, "message": {"type": "string"},
        "lastTransitionTime": {"type": "string", "format": "date-time"}, "observedGeneration": {"type": "integer"}}}
    properties: dict[str, Any] = {
        "observedGeneration": {"type": "integer"},
        "conditions": {"type": "array", "items": condition, "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["type"]}}
    if kind.kind == "OpsQueue":
        usage = {"type": "object", "properties": {
            "resource": {"type": "string"}, "flavor": {"type": "string"}, "used": {"type": "number"},
            "nominal": {"type": "number"}, "borrowed": {"type": "number"}}}
        properties |= {"pending": {"type": "integer"}, "admitted": {"type": "integer"},
                       "stopPolicy": {"type": "string"}, "usage": {"type": "array", "items": usage}}
    return {"type": "object", "properties": properties}


def _column(column: Column) -> dict[str, Any]:
    out = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
    return out | ({"priority": column.priority} if column.priority else {})


def _description(kind: Kind) -> str:
    if kind.item is None:
        return (f"opsched's queue configuration settings (the one named {SETTINGS_NAME!r} is read): what the "
                "configuration file says besides its lists, each of which is a kind of its own.")
    name = "its name is metadata.name; " if kind.named else ""
    return f"One of {kind.path} of opsched's queue configuration ({name}spec: the rest, as the file writes it)."


# ---- resources -> configuration ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resource:
    """A resource of one of the kinds, as listed: what ``assemble`` reads of it."""

    kind: str
    name: str
    spec: dict[str, Any]
    generation: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.name


@dataclass
class Assembly:
    config: QueuesConfig | None  # None: some resource is invalid (the last valid configuration stays)
    problems: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (kind, name) -> its problems
    general: list[str] = field(default_factory=list)  # problems of the configuration that are no one resource's
    ignored: list[tuple[str, str]] = field(default_factory=list)  # OpsConfigs not named SETTINGS_NAME


def assemble(resources: list[Resource]) -> Assembly:
    """The configuration the resources make, or what is wrong, per resource. Resources of one kind are taken in name
    order, so a problem's index names one of them."""
    out = Assembly(config=None)
    items: dict[str, list[tuple[Resource, Any]]] = {k.attr: [] for k in LIST_KINDS}
    settings: QueuesConfig = QueuesConfig(queues=[])
    settings_key: tuple[str, str] | None = None
    for resource in sorted(resources, key=lambda r: (r.kind, r.name)):
        kind = BY_KIND[resource.kind]
        if kind.item is None:
            if resource.name != SETTINGS_NAME:
                out.ignored.append(resource.key)
                continue
            settings_key = resource.key
            decoded = _settings(resource, out)
            settings = decoded if decoded is not None else settings
            continue
        element = _element(kind, resource, out)
        if element is not None:
            items[kind.attr].append((resource, element))
    if out.problems:
        return out
    config = msgspec.structs.replace(settings, **{attr: [e for _, e in pairs] for attr, pairs in items.items()})
    for problem in config_problems(config):
        owner, text = _owner(problem, items, settings_key)
        if owner is None:
            out.general.append(text)
        else:
            out.problems.setdefault(owner, []).append(text)
    if not out.problems and not out.general:
        out.config = config
    return out


def _element(kind: Kind, resource: Resource, out: Assembly) -> Any:
    spec = dict(resource.spec)
    if kind.named:
        if "name" in spec and spec["name"] != resource.name:
            out.problems.setdefault(resource.key, []).append(
                f"spec.name: {spec['name']!r} differs from metadata.name {resource.name!r} (a {kind.kind}'s name "
                "is its metadata.name; leave spec.name out)")
            return None
        spec["name"] = resource.name
    try:
        return msgspec.convert(spec, kind.item)
    except msgspec.ValidationError as exc:
        out.problems.setdefault(resource.key, []).append(_at_spec(str(exc)))
        return None


def _settings(resource: Resource, out: Assembly) -> QueuesConfig | None:
    lists = sorted(set(resource.spec) & set(_LISTS))
    for name in lists:
        out.problems.setdefault(resource.key, []).append(
            f"spec.{name}: not a field of OpsConfig: each of {name} is an {_LISTS[name].kind} resource")
    if lists:
        return None
    try:
        return msgspec.convert({**resource.spec, "queues": []}, QueuesConfig)
    except msgspec.ValidationError as exc:
        out.problems.setdefault(resource.key, []).append(_at_spec(str(exc)))
        return None


_MSGSPEC_PATH = re.compile(r"^(?P<text>.*) - at `\$(?P<path>[^`]*)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`$")
_INDEXED = re.compile(r"^(?P<list>[a-zA-Z]+)\[(?P<index>\d+)\](?P<rest>.*)$")


def _at_spec(error: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.concurrency`" as "spec.concurrency: Expected `int`, got `str`"."""
    match = _MSGSPEC_PATH.match(error)
    text, path = (match["text"], match["path"]) if match is not None else (error, "")  # at the root: no path said
    unknown = _UNKNOWN.match(text)
    if unknown is not None:  # the field's own path: "spec.preemption.withinQeue: unknown field"
        return f"spec{path}.{unknown['field']}: unknown field (misspelt? it would be ignored)"
    return f"spec{path}: {text}"


def _owner(problem: str, items: dict[str, list[tuple[Resource, Any]]],
           settings: tuple[str, str] | None) -> tuple[tuple[str, str] | None, str]:
    """The resource a problem of ``rules.queues_file`` is about, and the problem said under its ``spec``:
    ``queues[2].cohort: ...`` is the third OpsQueue's ``spec.cohort``; a list's own problem ("flavors: the pool name
    'a' is used twice") and the settings' ("defaultQueue: ...") are the OpsConfig's."""
    indexed = _INDEXED.match(problem)
    if indexed is not None and indexed["list"] in _LISTS:
        pairs = items[_LISTS[indexed["list"]].attr]
        index = int(indexed["index"])
        if index < len(pairs):
            resource = pairs[index][0]
            rest = indexed["rest"]
            path = "spec" if rest.startswith(":") or rest.startswith(".name:") else "spec" + rest.split(":", 1)[0]
            text = rest.split(":", 1)[1].strip() if ":" in rest else rest
            if rest.startswith(".name:"):
                return resource.key, f"metadata.name: {text}" if BY_KIND[resource.kind].named else f"spec.name: {text}"
            return resource.key, f"{path}: {text}"
    head = re.match(r"^[a-zA-Z]+", problem)
    if settings is not None and head is not None and head[0] in _SETTINGS_FIELDS:
        return settings, f"spec.{problem}"
    return None, problem


# ---- configuration -> resources (moving from the file) ------------------------------------------------------------

def manifests(config: QueuesConfig) -> list[dict[str, Any]]:
    """The resources that make ``config`` (what `opsched queues --to-resources FILE` prints for kubectl apply): an
    OpsConfig named ``opsched`` with the settings the file sets, and one resource per element of each list."""
    out: list[dict[str, Any]] = []
    everything = msgspec.to_builtins(config)
    settings = {k: v for k, v in everything.items() if k not in _LISTS}
    if "queues" not in everything:  # the built-in default queue, left out by omit_defaults
        everything["queues"] = msgspec.to_builtins(config.queues)
    out.append(_manifest(SETTINGS, SETTINGS_NAME, _without_empty(settings)))
    for kind in LIST_KINDS:
        for i, element in enumerate(everything.get(kind.path, [])):
            spec = _without_empty(element)
            name = spec.pop("name") if kind.named else _budget_name(spec, i)
            out.append(_manifest(kind, name, spec))
    return out


def _without_empty(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec without the empty objects its defaults leave (``aging: {}``): what a person would write."""
    return {k: _without_empty(v) if isinstance(v, dict) else v for k, v in spec.items() if v != {}}


def _budget_name(spec: dict[str, Any], index: int) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", f"{spec['scope']}-{spec['name']}-{spec['window']}".lower()).strip("-")
    return name[:253] or f"budget-{index}"


def _manifest(kind: Kind, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind.kind, "metadata": {"name": name}, "spec": spec}


# ---- the checked-in CRDs ------------------------------------------------------------------------------------------

CRDS_FILE = "deploy/base/10-crds.yaml"  # under the repository's root


def crds_yaml() -> str:
    """deploy/base/10-crds.yaml as generated (a contract test compares the checked-in file with it)."""
    import yaml

    head = ("# GENERATED from the queue configuration's contract (proto/queues.py) by\n"
            "#   python -m opsched.rules.queue_resources\n"
            "# do not edit. The queue resources (docs/queue-resources.md): each kind's spec is one element of the\n"
            "# queue configuration file's lists, its name metadata.name; OpsConfig 'opsched' holds the rest.\n")
    return head + yaml.safe_dump_all(crds(), sort_keys=False, width=120)


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).resolve().parents[1] / CRDS_FILE
    target.write_text(crds_yaml())
    print(f"wrote {len(KINDS)} CRDs to {target}")
