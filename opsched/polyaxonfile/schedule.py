"""Read a polyaxonfile together with its ``schedule`` section.

Schedule (Polyaxon's ``schedule`` on the operation, else on its component)
  * Read only by ``parse_polyaxonfile_with_schedule`` / ``load_polyaxonfile_with_schedule``, which
    return ``(OpSpec, ScheduleSpec | None)``; ``parse_polyaxonfile`` refuses a file with one.
  * ``kind: cron`` (``cron``: 5 fields or a macro, UTC; ``rules.cron``), ``kind:
    interval`` (``frequency``: seconds, from a minute to ten years), ``kind: datetime`` (``startAt``
    required); all take ``startAt``, ``endAt`` (not before startAt), ``maxRuns`` (1 to a million),
    ``dependsOnPast``. Times without a zone are UTC, within 1970 to 2199. The bounds are the
    contract's (``proto.schedules``). ``repeatable`` and ``{{ refs }}`` are not supported.
"""
from __future__ import annotations

from opsched.polyaxonfile.document import Document
from opsched.polyaxonfile.errors import Problem, Problems, SpecError
from opsched.polyaxonfile.load import HubArg, Paths, document_of, documents_of, parse_with_schedule
from opsched.polyaxonfile.models_schedule import SCHEDULE_MODELS, schedule_kind_problem
from opsched.polyaxonfile.validation import collect, validate
from opsched.proto.schedules import ScheduleSpec
from opsched.proto.spec import OpSpec


def parse_polyaxonfile_with_schedule(text: str, *, source: str = "<string>", overrides: dict | None = None,
                                     hub: HubArg = None) -> tuple[OpSpec, ScheduleSpec | None]:
    """The OpSpec and the ``schedule`` section (None without one); ``SpecError`` lists the problems of
    both. Fields with no effect raise a ``SpecWarning`` as for a plain parse."""
    return _with_schedule(document_of(text, source, hub), overrides)


def load_polyaxonfile_with_schedule(path: Paths, *, overrides: dict | None = None, hub: HubArg = None
                                    ) -> tuple[OpSpec, ScheduleSpec | None]:
    """``parse_polyaxonfile_with_schedule`` of a file, or of several read as one (``load_polyaxonfiles``);
    unreadable files raise ``SpecError`` too."""
    return _with_schedule(documents_of(path, hub), overrides)


def _with_schedule(document: Document, overrides: dict | None) -> tuple[OpSpec, ScheduleSpec | None]:
    doc = document.data()
    problems: list[Problem] = []
    schedule = collect(problems, _schedule, doc) if isinstance(doc, dict) else None
    try:
        [spec] = parse_with_schedule(document, overrides)
    except SpecError as exc:
        raise SpecError(exc.source, document.sorted(document.locate(problems) + exc.errors)) from None
    if problems:
        raise SpecError(document.main.name, document.locate(problems))
    return spec, schedule


def _schedule(doc: dict) -> ScheduleSpec | None:
    """The operation's ``schedule``, else its inline component's, validated."""
    component = doc.get("component") if doc.get("kind") == "operation" else None
    for loc, holder in ((("schedule",), doc), (("component", "schedule"), component)):
        if isinstance(holder, dict) and holder.get("schedule") is not None:
            raw = holder["schedule"]
            problem = schedule_kind_problem(raw, loc)
            if problem is not None:
                raise Problems([problem])
            model = validate(SCHEDULE_MODELS[raw["kind"]], raw, loc)
            if model.check(loc):
                raise Problems(model.check(loc))
            return model.to_spec()
    return None


