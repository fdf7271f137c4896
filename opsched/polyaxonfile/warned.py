"""The fields of a polyaxonfile that have no effect in opsched and were set (``keys.WARNED``): recorded on
the op (``OpSpec.ignored``, shown by ``opsched ops`` and ``why``) and warned by the CLI."""
from __future__ import annotations

from pydantic.alias_generators import to_snake

from opsched.polyaxonfile.errors import Loc
from opsched.polyaxonfile.keys import PLUGINS_WARNED
from opsched.polyaxonfile.models_operation import ComponentModel, HookModel, OperationModel
from opsched.polyaxonfile.models_run import JobRunModel, ServiceRunModel


def warned_fields(op: OperationModel | None, comp: ComponentModel, base: Loc,
                  hooks: list[tuple[HookModel, Loc]]) -> list[str]:
    """Dotted paths, in file order: plugins that only collect or notify, descriptions of inputs/outputs, a hook's
    ``disableDefaults`` (``hooks``: those that run, each with where it was written), init files' ``kind``, a
    service's ``rewritePath``."""
    out: list[Loc] = []
    for layer, at in ((op, ()), (comp, base)):
        plugins = layer.plugins if layer is not None else None
        if plugins is not None:
            out += [at + ("plugins", name) for name in PLUGINS_WARNED if getattr(plugins, to_snake(name))]
    for section in ("inputs", "outputs"):
        out += [base + (section, i, "description") for i, io in enumerate(getattr(comp, section)) if io.description]
    out += [at + ("disableDefaults",) for hook, at in hooks if hook.disable_defaults is not None]
    run = comp.run
    pods = [(("run",), run)] if isinstance(run, JobRunModel) else \
        [(("run", name), section) for name, section in run.sections().items()]
    out += [base + at + ("init", i, "file", "kind") for at, pod in pods for i, step in enumerate(pod.init)
            if step.file is not None and step.file.kind is not None]
    if isinstance(run, ServiceRunModel) and run.rewrite_path is not None:
        out.append(base + ("run", "rewritePath"))  # no gateway adds a base URL: reached at its root whatever it says
    return [".".join(map(str, loc)) for loc in out]
