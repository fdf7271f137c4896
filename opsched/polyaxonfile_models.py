"""Compatibility: the polyaxonfile models moved into the ``opsched.polyaxonfile`` package.

Import from the module that defines each name (``opsched.polyaxonfile.keys``, ``.fields``,
``.models_container``, ``.models_run``, ``.models_operation``, ``.models_schedule``,
``.models_matrix``, ``.hyperparams``, ``.params``, ``.errors``); this module re-exports every
public name it used to define.
"""
from __future__ import annotations

from opsched.polyaxonfile.errors import Loc, Problem
from opsched.polyaxonfile.fields import (
    Args, Command, Float, Int, Model, Name, NonEmpty, PriorityClass, Quantity, Queue, Str, Tags, Version,
    normalize_queue, valid_name,
)
from opsched.polyaxonfile.hyperparams import HpParam, hp_param, tidy
from opsched.polyaxonfile.keys import (
    BEHAVIOUR_IGNORED, RUN_KINDS_KNOWN, RUN_KINDS_SUPPORTED, SUPPORTED_VERSIONS, TOP_LEVEL_IGNORED, UNSUPPORTED,
)
from opsched.polyaxonfile.models_container import (
    ContainerModel, EnvironmentModel, EnvVarModel, ResourcesModel, TolerationModel, check_resources,
)
from opsched.polyaxonfile.models_matrix import (
    HP_DISCRETE, HP_DISTRIBUTIONS, HP_KNOWN_UNSUPPORTED, MATRIX_KINDS_KNOWN, MATRIX_KINDS_SUPPORTED, MATRIX_MODELS,
    MAX_BATCH, MAX_VALUES, GridModel, HpParamModel, PositiveInt, RandomModel,
)
from opsched.polyaxonfile.models_operation import (
    MODELS_BY_RUN_KIND, CacheModel, ComponentModel, IOModel, OperationModel, OverridesModel, PytorchComponentModel,
    PytorchOperationModel, TerminationModel,
)
from opsched.polyaxonfile.models_run import JobRunModel, KFReplicaModel, PytorchJobRunModel, check_run
from opsched.polyaxonfile.models_schedule import (
    SCHEDULE_MODELS, CronScheduleModel, DateTimeScheduleModel, IntervalScheduleModel, schedule_kind_problem,
)
from opsched.polyaxonfile.params import resolve_io

__all__ = [
    "BEHAVIOUR_IGNORED", "HP_DISCRETE", "HP_DISTRIBUTIONS", "HP_KNOWN_UNSUPPORTED", "MATRIX_KINDS_KNOWN",
    "MATRIX_KINDS_SUPPORTED", "MATRIX_MODELS", "MAX_BATCH", "MAX_VALUES", "MODELS_BY_RUN_KIND", "RUN_KINDS_KNOWN",
    "RUN_KINDS_SUPPORTED", "SCHEDULE_MODELS", "SUPPORTED_VERSIONS", "TOP_LEVEL_IGNORED", "UNSUPPORTED",
    "Args", "CacheModel", "Command", "ComponentModel", "ContainerModel", "CronScheduleModel",
    "DateTimeScheduleModel", "EnvVarModel", "EnvironmentModel", "Float", "GridModel", "HpParam", "HpParamModel",
    "IOModel", "Int", "IntervalScheduleModel", "JobRunModel", "KFReplicaModel", "Loc", "Model", "Name",
    "NonEmpty", "OperationModel", "OverridesModel", "PositiveInt", "PriorityClass", "Problem",
    "PytorchComponentModel", "PytorchJobRunModel", "PytorchOperationModel", "Quantity", "Queue", "RandomModel",
    "ResourcesModel", "Str", "Tags", "TerminationModel", "TolerationModel", "Version", "check_resources",
    "check_run", "hp_param", "normalize_queue", "resolve_io", "schedule_kind_problem", "tidy", "valid_name",
]
