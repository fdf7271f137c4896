"""Parse a Polyaxon polyaxonfile (YAML, version 1.1) into a validated ``proto.spec.OpSpec``.

Public API: ``parse_polyaxonfile(text, source=, overrides=, hub=)``,
``load_polyaxonfile(path, overrides=, hub=)``, ``parse_polyaxonfile_batch(text, source=, overrides=,
salt=, hub=)``, ``load_polyaxonfile_batch(path, overrides=, salt=, hub=)`` (a sweep: one OpSpec per trial of
the matrix), ``load_polyaxonfiles([path, ...], overrides=, salt=, hub=)`` (several files read as one, as
``opsched submit -f a.yaml -f b.yaml``), ``load_params_files([path, ...])`` (the param values of restart, copy
and resume files), ``Hub``, ``expand_matrix(matrix, seed=)``, ``batch_id(text, overrides, salt)``,
``component_hash(container, environment, replicas=(), run_kind="job")``,
``SpecError`` (``.errors: list[FieldError]``), ``SpecWarning``; with the ``schedule`` section:
``parse_polyaxonfile_with_schedule``/``load_polyaxonfile_with_schedule`` (``schedule``).
``overrides`` may hold ``params`` (bare or ``{value: ...}``), ``queue``, ``priority``, ``project``,
``priority_class`` and ``preemptible`` (plain Python names, not Polyaxon's camelCase); they apply after every
file. ``hub``: the folder (or ``Hub``) of the component library a ``hubRef`` reads from. A file's ``pathRef``s
are relative to its folder; a text's (``parse_*``) to the current folder.

Where each part is read (each module's docstring says what it accepts):
  * ``overlays``: the files read as one document (the first says what runs, later ones patch it; params-only
    files); ``references``: ``pathRef`` and ``hubRef``; ``patching``: Polyaxon's patch strategies and
    ``runPatch``; ``document``: every value of the document with the file and path it was written at.
  * ``load``: the entry points: precheck, validation, conversion, the warning about fields with no
    effect; ``schedule``: the same with the ``schedule`` section (refused by a plain parse).
  * ``keys``: what becomes of every key: honoured, refused (``UNSUPPORTED``, ``REFUSED_MESSAGES``) or
    warned and recorded on the op (``WARNED``, collected by ``warned``).
  * ``validation``: ``kind``, ``run.kind`` and model errors, located by path; ``yaml_source``:
    reading the file, safe YAML, and the line/column of each error; ``errors``: the error types.
  * ``fields`` (field types and the base model), ``models_operation`` (version, scheduling fields,
    overrides, plugins), ``models_run`` (job, pytorchjob), ``models_container`` (container,
    environment), ``models_init`` (a pod's init steps, sidecars and connections), ``models_k8s``
    (Kubernetes structures: affinity, probes, lifecycle, ...),
    ``models_schedule``, ``models_matrix``.
  * ``params``: params, inputs and outputs, toEnv; ``convert``: precedence and the OpSpec;
    ``templates``: every template rendered once, errors located; ``hashing``: ``component_hash``.
  * ``matrix``, ``hyperparams`` and ``dates``: sweeps (grid, random and mapping; the date ranges of
    backfills); a trial is named ``<name>-<iteration>`` (``rules.trial_names``).
"""
from __future__ import annotations

from opsched.polyaxonfile.errors import FieldError, SpecError, SpecWarning
from opsched.polyaxonfile.hashing import component_hash
from opsched.polyaxonfile.load import (
    load_polyaxonfile,
    load_polyaxonfile_batch,
    load_polyaxonfiles,
    parse_polyaxonfile,
    parse_polyaxonfile_batch,
)
from opsched.polyaxonfile.matrix import batch_id, expand_matrix
from opsched.polyaxonfile.models_matrix import MAX_BATCH
from opsched.polyaxonfile.overlays import load_params_files
from opsched.polyaxonfile.references import Hub
from opsched.polyaxonfile.schedule import (
    load_polyaxonfile_with_schedule,
    parse_polyaxonfile_with_schedule,
)
from opsched.polyaxonfile.yaml_source import MAX_CHARS

__all__ = [
    "MAX_BATCH", "MAX_CHARS", "FieldError", "Hub", "SpecError", "SpecWarning", "batch_id", "component_hash",
    "expand_matrix", "load_params_files", "load_polyaxonfile", "load_polyaxonfile_batch",
    "load_polyaxonfile_with_schedule", "load_polyaxonfiles", "parse_polyaxonfile", "parse_polyaxonfile_batch",
    "parse_polyaxonfile_with_schedule",
]
