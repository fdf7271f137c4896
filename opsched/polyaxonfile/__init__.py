"""Parse a Polyaxon polyaxonfile (YAML, version 1.1) into a validated ``proto.spec.OpSpec``.

Public API: ``parse_polyaxonfile(text, source=, overrides=)``,
``load_polyaxonfile(path, overrides=)``, ``parse_polyaxonfile_batch(text, source=, overrides=,
salt=)``, ``load_polyaxonfile_batch(path, overrides=, salt=)`` (a sweep: one OpSpec per trial of
the matrix), ``expand_matrix(matrix, seed=)``, ``batch_id(text, overrides, salt)``,
``component_hash(container, environment, replicas=(), run_kind="job")``,
``SpecError`` (``.errors: list[FieldError]``), ``SpecWarning``; with the ``schedule`` section:
``parse_polyaxonfile_with_schedule``/``load_polyaxonfile_with_schedule`` (``schedule``).
``overrides`` may hold ``params`` (bare or ``{value: ...}``), ``queue``, ``priority``, ``project``,
``priority_class`` and ``preemptible`` (plain Python names, not Polyaxon's camelCase).

Where each part is read (each module's docstring says what it accepts):
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
    parse_polyaxonfile,
    parse_polyaxonfile_batch,
)
from opsched.polyaxonfile.matrix import batch_id, expand_matrix
from opsched.polyaxonfile.models_matrix import MAX_BATCH
from opsched.polyaxonfile.schedule import (
    load_polyaxonfile_with_schedule,
    parse_polyaxonfile_with_schedule,
)
from opsched.polyaxonfile.yaml_source import MAX_CHARS

__all__ = [
    "MAX_BATCH", "MAX_CHARS", "FieldError", "SpecError", "SpecWarning", "batch_id", "component_hash",
    "expand_matrix", "load_polyaxonfile", "load_polyaxonfile_batch", "load_polyaxonfile_with_schedule",
    "parse_polyaxonfile", "parse_polyaxonfile_batch", "parse_polyaxonfile_with_schedule",
]
