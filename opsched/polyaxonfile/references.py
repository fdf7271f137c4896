"""Operations that name their component instead of holding it: ``pathRef`` (a file) and ``hubRef`` (a component
library on disk). Both are resolved by the CLI and the SDK when they read the file: what is published is one
self-contained spec, as for an inline component.

  * Where: on an operation (Polyaxon's V1Operation), and on each of its hooks and of its component's hooks (a hook
    runs a component). One of ``component``, ``pathRef`` and ``hubRef``, as in Polyaxon ("one and only one
    reference"). The reference is replaced by the component it names, read as an inline component would be.
  * ``pathRef``: a path relative to the folder of the file that has it (Polyaxon's CLI joins it to that file's
    folder too). It must stay inside the folder of the file submitted (a file reached through the hub: inside the
    hub): an absolute path, or one whose ``..`` leads out (symbolic links followed), is refused, so that what runs
    is what that folder holds and a shared component cannot read files elsewhere.
  * ``hubRef``: ``[OWNER/]NAME[:VERSION]`` (Polyaxon's reference; a ``.`` in ``OWNER.NAME`` is a ``/`` as in
    Polyaxon), read from the library folder ``hub`` (``Hub``): ``[OWNER/]NAME/VERSION.yaml``; no version, or
    ``latest``: ``[OWNER/]NAME.yaml`` or ``[OWNER/]NAME/latest.yaml`` (both existing is refused as ambiguous).
    Names are letters, digits, ``-`` and ``_``; a version may also have dots. The CLI takes the folder from
    ``--hub``, else ``$OPSCHED_HUB``, else the context file's ``hub`` (``opsched.context.hub_folder``); the SDK
    from ``hub=``. No library set: refused, saying how to set one.
  * The file named must be a component (``kind: component``): an operation, or a file with no kind, is refused.
    Its own hooks' references are resolved relative to it. A reference that leads back to a file on its way
    (``a -> b -> a``) is refused as a cycle. ``dagRef`` (no DAGs yet) and ``urlRef`` (opsched fetches nothing
    from the network) stay refused by the models (``keys.REFUSED_MESSAGES``).

Every problem is a ``FieldError`` located at the reference (its file and line) or, for a problem inside the file
named, in that file, naming the reference that reached it (``document``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePath

from opsched.polyaxonfile.document import Boundary, Document, Node, Source
from opsched.polyaxonfile.errors import FieldError, SpecError

REFERENCES = ("pathRef", "hubRef")
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_VERSION = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]*$")
HUB_HELP = "give --hub DIR, set $OPSCHED_HUB, or \"hub\" in the context file (the SDK: hub=DIR)"


@dataclass(frozen=True)
class Hub:
    """The component library ``hubRef`` reads from: its folder, and where that was set (named in messages).
    ``folder`` None: none is set (``unset``, if given, says why, e.g. a context file that cannot be read)."""

    folder: Path | None
    origin: str = "the hub argument"
    unset: str = ""


def hub_of(value: str | Path | Hub | None) -> Hub | None:
    """A library folder given as a path (the SDK's ``hub=``) as a ``Hub``."""
    return value if isinstance(value, Hub) or value is None else Hub(Path(value))


class _Refused(Exception):
    """A reference that cannot be resolved: the message says why."""


class Resolver:
    """Resolves the references of a document's root (``resolve``), adding the files it reads to the document's
    sources; ``errors`` holds every problem found (each reference is tried, whatever the others gave)."""

    def __init__(self, document: Document, hub: Hub | None):
        self.document = document
        self.hub = hub
        self.errors: list[FieldError] = []

    def resolve(self, root: Node, stack: tuple[Source, ...] | None = None) -> None:
        """The references of an operation (or a component) file's root, in place."""
        stack = (root.source,) if stack is None else stack
        if not isinstance(root.value, dict):
            return  # the precheck says what the document should be
        component = root
        if root.get("kind") is not None and root.value["kind"].value == "operation":
            self.holder(root, stack)
            self.hooks(root, stack)
            component = root.get("component") or Node(None, root.source)
        if isinstance(component.value, dict) and component.source is root.source:  # a component named: done
            self.hooks(component, stack)

    def hooks(self, holder: Node, stack: tuple[Source, ...]) -> None:
        hooks = holder.get("hooks")
        for hook in hooks.value if hooks is not None and isinstance(hooks.value, list) else []:
            if isinstance(hook.value, dict):
                self.holder(hook, stack)

    def holder(self, holder: Node, stack: tuple[Source, ...]) -> None:
        """Replace the ``pathRef``/``hubRef`` of ``holder`` (an operation or a hook) by the component it names."""
        keys = [k for k in REFERENCES if holder.is_set(k)]
        if not keys:
            return
        if len(keys) > 1 or holder.is_set("component"):
            other = keys[1] if len(keys) > 1 else "component"
            self.errors.append(self.document.error_at(
                holder.value[keys[0]], f"'{keys[0]}' and '{other}' both say what runs: keep one (a component "
                                       "inline, a pathRef or a hubRef, as in Polyaxon)"))
            return
        key = keys[0]
        ref = holder.value[key]
        try:
            if not isinstance(ref.value, str) or not ref.value.strip():
                raise _Refused(f"'{key}' must be a non-empty string, got {ref.value!r}")
            path, name, boundary = self._path(ref) if key == "pathRef" else self._hub_file(ref)
            chain = [s for s in stack if s.path is not None]
            if any(_same(s.path, path) for s in chain):  # type: ignore[arg-type]
                names = " -> ".join([*(s.name for s in chain), name])
                raise _Refused(f"'{key}' {ref.value!r} makes a cycle: {names}")
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise _Refused(f"'{key}' {ref.value!r}: there is no file {name}") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise _Refused(f"'{key}' {ref.value!r}: cannot read {name} ({exc})") from None
        except _Refused as exc:
            self.errors.append(self.document.error_at(ref, str(exc)))
            return
        line = ref.source.line_of(ref.at)
        via = f"the {key} at {ref.source.name}" + (f" line {line}" if line else "")
        component = self._component(Source(name, text, path, via, boundary), key)
        if component is None:
            return
        self.hooks(component, (*stack, component.source))
        holder.value = {("component" if k == key else k): (component if k == key else v)
                        for k, v in holder.value.items()}

    def _component(self, source: Source, key: str) -> Node | None:
        """The component file's nodes; None (problems added) if it is no YAML or no component."""
        try:
            node = self.document.read(source)
        except SpecError as exc:
            self.errors += exc.errors
            return None
        kind = node.get("kind")
        if isinstance(node.value, dict) and kind is not None and kind.value == "component":
            return node
        got = ("no kind" if kind is None else f"kind {kind.value!r}") if isinstance(node.value, dict) \
            else "not a mapping"
        self.errors.append(self.document.error_at(kind or node, f"a {key} names a component file (kind: component); "
                                                                f"{source.name} has {got}"))
        return None

    def _path(self, ref: Node) -> tuple[Path, str, Boundary]:
        """The file a ``pathRef`` names, its name for messages, and the boundary it keeps."""
        raw = ref.value.strip()
        source = ref.source
        if PurePath(raw).is_absolute() or os.path.isabs(raw):
            raise _Refused(f"pathRef {raw!r} is absolute: a pathRef is relative to the folder of the file that has "
                           "it (so the folder can move with its files)")
        folder = source.path.parent if source.path is not None else Path.cwd()
        boundary = source.boundary or _boundary_of(source)
        path = folder / raw
        if not _inside(path, boundary.path):
            raise _Refused(f"pathRef {raw!r} leads out of {boundary.name}: a reference stays inside the folder of "
                           "the file submitted (and one read from the hub, inside the hub), so that what runs is "
                           "what that folder holds; move the component into it")
        name = os.path.normpath(os.path.join(os.path.dirname(source.name), raw)) if source.path is not None \
            else os.path.normpath(raw)
        return path, name, boundary

    def _hub_file(self, ref: Node) -> tuple[Path, str, Boundary]:
        """The file a ``hubRef`` names in the library, its name for messages, and the hub as its boundary."""
        hub = self.hub
        if hub is None or hub.folder is None:
            why = f" ({hub.unset})" if hub is not None and hub.unset else ""
            raise _Refused(f"hubRef {ref.value!r}: no component library is set{why}: {HUB_HELP}")
        parts, version = parse_hub_ref(ref.value.strip())
        folder = hub.folder
        where = f"the hub {folder} (from {hub.origin})"
        if not folder.is_dir():
            raise _Refused(f"hubRef {ref.value!r}: {where} is not a folder")
        base = folder.joinpath(*parts)
        if version is None:
            candidates = [base.with_name(base.name + ".yaml"), base / "latest.yaml"]
        else:
            candidates = [base / f"{version}.yaml"]
        found = [c for c in candidates if c.is_file()]
        shown = [os.path.relpath(c, folder) for c in candidates]
        if len(found) > 1:
            raise _Refused(f"hubRef {ref.value!r} is ambiguous in {where}: both {shown[0]} and {shown[1]} exist "
                           "(both are its latest version): keep one")
        if not found:
            versions = sorted(p.stem for p in base.glob("*.yaml")) if base.is_dir() else []
            has = f" ({'/'.join(parts)} has: {', '.join(versions)})" if versions else ""
            raise _Refused(f"hubRef {ref.value!r}: no {' or '.join(shown)} in {where}{has}")
        boundary = Boundary(folder.resolve(), where)
        if not _inside(found[0], boundary.path):
            raise _Refused(f"hubRef {ref.value!r}: {shown[0]} leads out of {where} (a symbolic link)")
        return found[0], str(found[0]), boundary


def parse_hub_ref(ref: str) -> tuple[list[str], str | None]:
    """``[OWNER/]NAME[:VERSION]`` -> ([OWNER,] NAME), VERSION (None: the latest); ``_Refused`` if malformed."""
    name, colon, version = ref.partition(":")
    parts = name.replace(".", "/").split("/")
    if len(parts) > 2 or not all(_NAME.match(p) for p in parts):
        raise _Refused(f"hubRef {ref!r} is not [OWNER/]NAME[:VERSION] (names: letters, digits, '-' and '_')")
    if colon and not _VERSION.match(version):
        raise _Refused(f"hubRef {ref!r}: invalid version {version!r} (letters, digits, '-', '_' and '.')")
    return parts, (None if not colon or version == "latest" else version)


def _boundary_of(source: Source) -> Boundary:
    """The folder of a file given directly (or the current folder, for a text without a file)."""
    if source.path is None:
        return Boundary(Path.cwd().resolve(), "the current folder")
    folder = os.path.dirname(source.name) or "."
    return Boundary(source.path.parent.resolve(), f"{folder}/ (the folder of {source.name})")


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder)


def _same(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()

