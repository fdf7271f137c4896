"""The name of a sweep's trial: ``<name>-<iteration>`` (``train-0``, ``train-1``, …), so ``opsched ops`` tells
the trials of a sweep apart, and the name they share.

Polyaxon gives a matrix's children the name of their pipeline and tells them apart by uuid; opsched has no
pipeline run, so the suffix does. A name too long for ``MAX_NAME_CHARS`` with the suffix of the batch's last
trial is cut (the suffix is kept), the same for every trial of the batch, so ``trial_base`` gives every trial
the same name back (the cost service learns a component's run times by it).
"""
from __future__ import annotations

from opsched.proto.limits import MAX_NAME_CHARS


def trial_name(base: str, iteration: int, count: int) -> str:
    """The name of trial ``iteration`` (from 0) of a batch of ``count`` trials named ``base``."""
    room = MAX_NAME_CHARS - len(f"-{max(count, iteration + 1) - 1}")
    return f"{base[:room]}-{iteration}"


def trial_base(name: str, iteration: int | None) -> str:
    """The name a trial shares with the other trials of its batch: ``name`` without its ``-<iteration>``
    (an op that is no trial, ``iteration`` None, keeps its name)."""
    suffix = f"-{iteration}"
    if iteration is None or not name.endswith(suffix) or len(name) == len(suffix):
        return name
    return name[:-len(suffix)]
