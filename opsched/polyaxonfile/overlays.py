"""Several files read as one operation, as ``polyaxon run -f a.yaml -f b.yaml`` reads them (``assemble``), and the
params-only files of restart, copy and resume (``load_params_files``).

  * The first file says what runs: a component, or an operation (an inline component, a ``pathRef`` or a
    ``hubRef``: ``references``). Each later file patches the operation, in order (Polyaxon's presets): it holds
    operation fields (``kind: operation`` or no kind; ``version`` and ``isPreset`` are read and dropped), merged with
    the later file's own ``patchStrategy`` (default ``post_merge``; ``patching`` says what each strategy does). What
    says what runs (``component``, ``pathRef``, ``hubRef``, ``dagRef``, ``urlRef``) is refused in a later file:
    Polyaxon ignores it there. A component given first becomes the component of an operation (its ``matrix`` with
    it, on the operation).
  * A later file's ``runPatch`` merges into the operation's; then the operation's ``runPatch`` patches its
    component's run with the operation's ``patchStrategy`` (the first file's), and is dropped.
  * A file that holds only ``params`` (Polyaxon's override files) patches the params, param by param.
  * The caller's overrides (``-P``, ``--queue``, ``--priority``) apply after every file. Polyaxon merges ``--param``
    before its presets; opsched lets the command line win.
  * Restart, copy and resume send param values, not a spec (admission runs the op's spec again): their files may
    hold ``params`` only (each a bare value or ``{value: ...}``), merged in order; anything else is refused, naming
    the field.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opsched.polyaxonfile.document import Document, Node, Source, plain
from opsched.polyaxonfile.errors import FieldError, SpecError
from opsched.polyaxonfile.keys import SUPPORTED_VERSIONS
from opsched.polyaxonfile.params import is_param
from opsched.polyaxonfile.patching import (
    DEFAULT_STRATEGY,
    RUNS,
    STRATEGIES,
    apply_run_patch,
    as_run_patch,
    combine,
    operation_shape,
    run_patch_problems,
)
from opsched.polyaxonfile.references import Hub, Resolver
from opsched.polyaxonfile.yaml_source import read_file

WHAT_RUNS = ("component", "pathRef", "hubRef", "dagRef", "urlRef")
READ_AND_DROPPED = ("kind", "version", "isPreset", "patchStrategy")
PARAMS_FILE_KEYS = frozenset({"version", "kind", "isPreset", "params"})


def source_of(path: str | Path) -> Source:
    """A file given directly (unreadable: ``SpecError``)."""
    return Source(str(path), read_file(path), Path(path))


def assemble(first: Source, later: Sequence[Source] = (), hub: Hub | None = None) -> Document:
    """The document of ``first`` patched by each of ``later``, its references resolved and its ``runPatch``
    applied; ``SpecError`` with every problem found on the way."""
    document = Document([first])
    root = document.read(first)
    resolver = Resolver(document, hub)
    resolver.resolve(root)
    errors = resolver.errors
    overlays = []
    for source in later:
        try:
            node = document.read(source)
        except SpecError as exc:
            errors += exc.errors
            continue
        if isinstance(node.value, dict):
            resolver.hooks(node, (node.source,))  # its hooks' references, relative to it
        overlays.append((node, _checked(document, node, errors)))
    document.root = root
    if not errors and overlays and _kind(root) in ("component", "operation"):
        root = _as_operation(root)
        for overlay, strategy in overlays:
            root = _patched(root, overlay, strategy)
    if not errors:
        root = _run_patched(document, root, errors)
    if errors:
        raise SpecError(first.name, document.sorted(errors))
    document.root = root
    return document


def _kind(node: Node) -> Any:
    return node.value["kind"].value if node.is_set("kind") else None


def _as_operation(root: Node) -> Node:
    """A component file as the component of an operation (its matrix on the operation, where Polyaxon has it)."""
    if _kind(root) == "operation":
        return root
    fields = {k: v for k, v in root.value.items() if k != "matrix"}
    op = {"kind": Node("operation", root.source), "component": Node(fields, root.source, root.at)}
    if "matrix" in root.value:
        op["matrix"] = root.value["matrix"]
    return Node(op, root.source, root.at)


def _checked(document: Document, overlay: Node, errors: list[FieldError]) -> str:
    """The strategy a later file patches with; what it may not hold is added to ``errors``."""
    if not isinstance(overlay.value, dict):
        errors.append(document.error_at(overlay, "a file after the first patches the operation: it holds operation "
                                                 "fields (a mapping)"))
        return DEFAULT_STRATEGY
    kind = overlay.get("kind")
    if kind is not None and kind.value not in ("operation", None):
        errors.append(document.error_at(kind, f"kind {kind.value!r}: a file after the first patches the operation "
                                              "(kind: operation, or no kind); a component can only be the first file"))
    for key in WHAT_RUNS:
        if overlay.is_set(key):
            errors.append(document.error_at(overlay.value[key], f"'{key}' says what runs, which only the first file "
                                                                "does; a later file patches the operation (its "
                                                                "runPatch patches the component's run)"))
    version, preset = overlay.get("version"), overlay.get("isPreset")
    if version is not None and version.value is not None and str(version.value) not in SUPPORTED_VERSIONS:
        errors.append(document.error_at(version, f"unsupported version {version.value!r}: opsched reads Polyaxon "
                                                 "version 1.1"))
    if preset is not None and preset.value is not None and not isinstance(preset.value, bool):
        errors.append(document.error_at(preset, f"isPreset is true or false, got {preset.value!r}"))
    return _strategy(document, overlay, errors)


def _patched(op: Node, overlay: Node, strategy: str) -> Node:
    """``op`` patched by a later file (checked by ``_checked``)."""
    fields = Node({k: v for k, v in overlay.value.items() if k not in READ_AND_DROPPED}, overlay.source, overlay.at)
    run = _run(op)
    patch = fields.get("runPatch")
    if run is not None and patch is not None and isinstance(patch.value, dict):
        fields.value["runPatch"] = as_run_patch(patch, run)  # a pytorchjob's replica patch: per replica
        mine = op.get("runPatch")
        if mine is not None and isinstance(mine.value, dict):
            op.value["runPatch"] = as_run_patch(mine, run)
    merged = combine(op, fields, strategy, operation_shape(run.value["kind"].value if run is not None else None))
    assert merged is not None
    return merged


def _strategy(document: Document, holder: Node, found: list[FieldError]) -> str:
    node = holder.get("patchStrategy")
    if node is None or node.value is None:
        return DEFAULT_STRATEGY
    if node.value not in STRATEGIES:
        found.append(document.error_at(node, f"patchStrategy {node.value!r} is one of {', '.join(STRATEGIES)}"))
        return DEFAULT_STRATEGY
    return str(node.value)


def _run(op: Node) -> Node | None:
    """The operation's component's run, when it is of a kind a runPatch can patch."""
    component = op.get("component")
    run = component.get("run") if component is not None else None
    if run is None or not isinstance(run.value, dict) or not run.is_set("kind") or run.value["kind"].value not in RUNS:
        return None
    return run


def _run_patched(document: Document, root: Node, errors: list[FieldError]) -> Node:
    """The operation with its ``runPatch`` applied to its component's run, and dropped (a run the models will
    refuse is left to them, and so is a patchStrategy that is none of the four)."""
    if _kind(root) != "operation" or "runPatch" not in root.value:
        return root  # a runPatch elsewhere: refused by the models
    patch = root.value["runPatch"]
    run = _run(root)
    rest = {k: v for k, v in root.value.items() if k != "runPatch"}
    if patch.value is None or run is None:
        return Node(rest, root.source, root.at)
    problems = run_patch_problems(patch, run, ("runPatch",))
    if problems:
        errors += document.locate(problems)
        return root
    strategy = root.value.get("patchStrategy")
    chosen = strategy.value if strategy is not None and strategy.value in STRATEGIES else DEFAULT_STRATEGY
    component = root.value["component"]
    rest["component"] = Node({**component.value, "run": apply_run_patch(run, patch, chosen)}, component.source,
                             component.at)
    return Node(rest, root.source, root.at)


def load_params_files(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The param values of restart/copy/resume files, merged in order (a later file's param wins); ``SpecError``
    for a file holding anything but ``params`` (each a bare value or ``{value: ...}``)."""
    out: dict[str, Any] = {}
    for path in paths:
        source = source_of(path)
        document = Document([source])
        node = document.read(source)
        document.root = node
        errors: list[FieldError] = []
        if not isinstance(node.value, dict):
            errors.append(document.error_at(node, "a params file holds params: {name: value or {value: ...}}"))
        else:
            errors += _params_file_problems(document, node)
        if errors:
            raise SpecError(source.name, document.sorted(errors))
        params = plain(node.get("params")) or {}
        out.update((name, raw["value"] if is_param(raw) else raw) for name, raw in params.items())
    return out


_RERUN = "restart, copy and resume send new param values only (admission runs the op's spec again)"


def _params_file_problems(document: Document, node: Node) -> list[FieldError]:
    errors = [document.error_at(value, f"'{key}': {_RERUN}; this file also sets "
                                       f"{', '.join(k for k in node.value if k not in PARAMS_FILE_KEYS)}: submit it "
                                       "as a new operation instead")
              for key, value in node.value.items() if key not in PARAMS_FILE_KEYS]
    kind = node.get("kind")
    if kind is not None and kind.value not in ("operation", None):
        errors.append(document.error_at(kind, f"kind {kind.value!r}: a params file is an operation's params "
                                              "(kind: operation, or no kind)"))
    params = node.get("params")
    if params is None or params.value is None:
        return errors
    if not isinstance(params.value, dict):
        return [*errors, document.error_at(params, "params is a mapping {name: value or {value: ...}}")]
    for param in params.value.values():
        raw = plain(param)
        if is_param(raw):
            errors += [document.error_at(param.value[k], f"'{k}' on a param: {_RERUN}, and '{k}' changes the op's "
                                                         "spec: submit it as a new operation instead")
                       for k in raw if k != "value"]
    return errors

