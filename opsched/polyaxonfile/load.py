"""Parse and load polyaxonfiles: one operation, or every operation of a sweep; one file, or several read as one.

The files are first assembled into one document (``overlays.assemble``: references resolved, later files and the
``runPatch`` applied, every value located in its file: ``document``). The document is prechecked (its ``kind``
and ``run.kind``), validated against the models of its run kind together with the overrides and the matrix,
then converted to OpSpecs. Every problem found is
reported at once in a ``SpecError``, located in the YAML; fields set that have no effect in opsched
raise one ``SpecWarning`` (``warn_ignored``) and are recorded on the op (``keys``); a ``schedule``
section is refused unless the caller reads it (``opsched.polyaxonfile.schedule``).
"""
from __future__ import annotations

import secrets
import warnings
from collections.abc import Sequence
from pathlib import Path

from opsched.polyaxonfile.convert import build_spec, fallback_name
from opsched.polyaxonfile.document import Document, Source
from opsched.polyaxonfile.errors import FieldError, Problem, Problems, SpecError, SpecWarning
from opsched.polyaxonfile.keys import REFUSED_MESSAGES
from opsched.polyaxonfile.matrix import batch_id, build_batch, read_matrix, split_matrix
from opsched.polyaxonfile.models_operation import MODELS_BY_RUN_KIND, OverridesModel
from opsched.polyaxonfile.overlays import assemble, source_of
from opsched.polyaxonfile.references import Hub, hub_of
from opsched.polyaxonfile.validation import collect, precheck, validate
from opsched.proto.spec import OpSpec

HubArg = str | Path | Hub | None  # the component library of hubRef: a folder, or ``Hub`` (the CLI's, with its origin)
Paths = str | Path | Sequence[str | Path]


def parse_polyaxonfile(text: str, *, source: str = "<string>", overrides: dict | None = None,
                       hub: HubArg = None) -> OpSpec:
    """Validate a polyaxonfile and return its OpSpec; raise ``SpecError`` listing all problems.

    A file with a ``matrix`` makes several operations: it is refused here (error at ``matrix``);
    read it with ``parse_polyaxonfile_batch``/``load_polyaxonfile_batch``. A text has no folder: its
    ``pathRef``s are relative to the current folder (and stay in it)."""
    return _parse(document_of(text, source, hub), overrides, salt=None, batch=False)[0]


def load_polyaxonfile(path: str | Path, *, overrides: dict | None = None, hub: HubArg = None) -> OpSpec:
    """Read and parse a polyaxonfile (its ``pathRef``s relative to its folder, its ``hubRef``s in ``hub``);
    unreadable files raise ``SpecError`` too."""
    return _parse(documents_of(path, hub), overrides, salt=None, batch=False)[0]


def parse_polyaxonfile_batch(text: str, *, source: str = "<string>", overrides: dict | None = None,
                             salt: str | None = None, hub: HubArg = None) -> list[OpSpec]:
    """Every operation of a polyaxonfile: one per combination of its ``matrix``, each with its
    params filled, ``batch`` = ``batch_id(text, overrides, salt)`` and ``batch_concurrency`` =
    ``matrix.concurrency``. A file without a matrix gives ``[spec]``, not a batch (``batch`` None).
    ``salt`` makes the batch id differ between submissions of the same file (default: random);
    pass the same salt to get the same id back."""
    return _parse(document_of(text, source, hub), overrides, salt=salt, batch=True)


def load_polyaxonfile_batch(path: str | Path, overrides: dict | None = None, *,
                            salt: str | None = None, hub: HubArg = None) -> list[OpSpec]:
    """``parse_polyaxonfile_batch`` of a file; unreadable files raise ``SpecError`` too."""
    return _parse(documents_of(path, hub), overrides, salt=salt, batch=True)


def load_polyaxonfiles(paths: Paths, overrides: dict | None = None, *, salt: str | None = None,
                       hub: HubArg = None) -> list[OpSpec]:
    """Every operation of several files read as one, as ``opsched submit -f a.yaml -f b.yaml`` (and
    ``polyaxon run -f ... -f ...``) reads them: the first says what runs, each later one patches the operation
    (``overlays``; a file of ``params`` only patches the params); ``overrides`` apply last. One file: as
    ``load_polyaxonfile_batch``. With several, the batch id hashes every file's name and text."""
    return _parse(documents_of(paths, hub), overrides, salt=salt, batch=True)


def document_of(text: str, source: str, hub: HubArg) -> Document:
    """The document of a text (no folder: its references are relative to the current folder)."""
    return assemble(Source(source, text), (), hub_of(hub))


def documents_of(paths: Paths, hub: HubArg) -> Document:
    """The document of one file, or of several read as one; ``SpecError`` if there is none or one is unreadable."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not given:
        raise SpecError("<no file>", [FieldError("", "no polyaxonfile given")])
    first, *later = (source_of(p) for p in given)
    return assemble(first, later, hub_of(hub))


def _parse(document: Document, overrides: dict | None, *, salt: str | None,
           batch: bool, schedule: bool = False) -> list[OpSpec]:
    """``schedule``: the caller reads the ``schedule`` section (``opsched.polyaxonfile.schedule``);
    otherwise a file with one is refused, pointing to ``opsched schedule``."""
    source = document.main.name
    doc = document.data()
    try:
        component_model, operation_model = MODELS_BY_RUN_KIND[precheck(doc)]
        body, raw_matrix = split_matrix(doc)
        kind = operation_model if doc["kind"] == "operation" else component_model
        problems: list[Problem] = [] if schedule else _schedule_problems(doc)
        model = collect(problems, validate, kind, body, ())
        extra = collect(problems, validate, OverridesModel, {} if overrides is None else overrides,
                        ("overrides",))
        matrix = None
        if raw_matrix is not None and not batch:
            problems.append((("matrix",), "a matrix makes a batch of operations: read this file "
                                          "with load_polyaxonfile_batch (as `opsched submit` does)"))
        elif raw_matrix is not None:
            matrix = collect(problems, read_matrix, raw_matrix)
        if problems:
            raise Problems(problems)
        fallback = fallback_name(source)
        if matrix is None:
            specs = [build_spec(model, extra, fallback)]
        else:
            salt = secrets.token_hex(8) if salt is None else salt
            specs = build_batch(model, extra, fallback, matrix, batch_id(document.fingerprint(), overrides, salt))
    except Problems as exc:
        raise SpecError(source, document.locate(exc.problems)) from None
    warn_ignored(specs[0].ignored, source)
    return specs


def parse_with_schedule(document: Document, overrides: dict | None) -> list[OpSpec]:
    """The one operation of a document whose ``schedule`` section the caller reads."""
    return _parse(document, overrides, salt=None, batch=False, schedule=True)


def _schedule_problems(doc: dict) -> list[Problem]:
    component = doc.get("component")
    holders = [((), doc), (("component",), component if isinstance(component, dict) else {})]
    return [(at + ("schedule",), REFUSED_MESSAGES["schedule"]) for at, holder in holders
            if holder.get("schedule") is not None]


def warn_ignored(ignored: list[str], source: str) -> None:
    """One ``SpecWarning`` naming the fields set that have no effect in opsched (recorded on the op)."""
    if ignored:
        warnings.warn(f"{source}: ignoring {', '.join(ignored)} (no effect in opsched; recorded on the op)",
                      SpecWarning, stacklevel=3)
