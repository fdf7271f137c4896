"""Templates render in every string of the run that reaches the pod (issue 30): the full files of
test_polyaxonfile_fields with every string of their run replaced by a template of the same value give exactly the
pods the plain files give, built as the dispatcher builds them (``opsched.dryrun``), and no ``{{`` reaches a pod.
The strings a template may not take (each below with why) are refused where they are read, each on its own."""
from __future__ import annotations

import json
import warnings

import pytest
import yaml

from opsched import dryrun
from opsched.polyaxonfile import SpecError, SpecWarning, parse_polyaxonfile
from opsched.rules.templating import TemplateError
from tests.unit.test_polyaxonfile_fields import CONNECTIONS, JOB, PYTORCH

PYTORCH_OPERATION = {"version": 1.1, "kind": "operation", "component": PYTORCH}
RUN = ("component", "run")
ENUMERATIONS = {"imagePullPolicy", "terminationMessagePolicy", "protocol", "scheme", "operator", "effect",
                "fsGroupChangePolicy", "dnsPolicy", "restartPolicy", "cleanPodPolicy"}


def not_rendered(path: tuple) -> str | None:
    """Why the string at ``path`` takes no template (None: it renders)."""
    if path == (*RUN, "kind"):
        return "the run kind decides how the file is read"
    if path[-1] == "name" and (path[-2] in ("container", "master", "worker") or path[-3] == "sidecars"):
        return "a container's name names it in the pod (and is checked unique there)"
    if "resources" in path:
        return "resources are counted at submit (quota, placement), before templates render"
    if path[-1] in ENUMERATIONS or path[-2:] == ("seccompProfile", "type"):
        return "one of Kubernetes' enumerations, checked where it is read"
    if "matchFields" in path and path[-1] == "key":
        return "matchFields takes only metadata.name"
    return None


def strings(data, at: tuple = ()):
    """(path, value) of every string of ``data``, its mappings' keys left out (keys stay as written)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from strings(value, (*at, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from strings(value, (*at, i))
    elif isinstance(data, str):
        yield at, data


def run_strings(doc: dict) -> list[tuple[tuple, str]]:
    return [(path, value) for path, value in strings(doc["component"]["run"], RUN) if "{{" not in value]


def templated(doc: dict, paths: list[tuple]) -> dict:
    """``doc`` with the strings at ``paths`` replaced by ``{{ s<i> }}``, each a contextOnly param holding the value."""
    out = json.loads(json.dumps(doc))  # (a deep copy that shares nothing: the full files reuse some objects)
    for i, path in enumerate(paths):
        holder = out
        for part in path[:-1]:
            holder = holder[part]
        out.setdefault("params", {})[f"s{i}"] = {"value": holder[path[-1]], "contextOnly": True}
        holder[path[-1]] = f"{{{{ s{i} }}}}"
    return out


def pods(doc: dict) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        spec = parse_polyaxonfile(yaml.dump(doc, sort_keys=False))
    return dryrun.pods_of(dryrun.rendered(spec, "op-1", CONNECTIONS), "op-1", CONNECTIONS)


def braces(data) -> list[str]:
    return [".".join(map(str, path)) for path, value in strings(data) if "{{" in value or "{%" in value]


@pytest.mark.parametrize("doc", [JOB, PYTORCH_OPERATION], ids=["job", "pytorchjob"])
def test_a_template_in_every_string_of_the_run_gives_the_pods_its_values_give(doc):
    rendered = [path for path, _ in run_strings(doc) if not_rendered(path) is None]
    assert len(rendered) >= 8
    built = pods(templated(doc, rendered))
    assert braces(built) == []
    plain = pods(doc)
    assert braces(plain) == [] and built == plain


@pytest.mark.parametrize("doc", [JOB, PYTORCH_OPERATION], ids=["job", "pytorchjob"])
def test_a_string_that_takes_no_template_refuses_one_where_it_is_read(doc):
    refused = [path for path, _ in run_strings(doc) if not_rendered(path) is not None]
    assert refused
    for path in refused:
        with pytest.raises(SpecError) as raised:
            pods(templated(doc, [path]))
        assert any(".".join(map(str, path)).startswith(e.loc) or e.loc.startswith(".".join(map(str, path[:-1])))
                   for e in raised.value.errors), (path, raised.value.errors)


def test_a_rendered_value_the_contract_refuses_is_refused_naming_its_field():
    doc = templated(JOB, [(*RUN, "environment", "labels", "team")])
    doc["params"]["s0"]["value"] = "not a label value"
    with pytest.raises(SpecError) as raised:
        pods(doc)
    [error] = raised.value.errors
    assert error.loc == "component.run.environment.labels.team"
    assert error.msg == ("value 'not a label value' must be empty or letters, digits, '-', '_' or '.', starting and "
                         "ending with a letter or digit (as rendered)")


def test_admission_refuses_the_same_rendered_value_as_invalid_template():
    from datetime import datetime, timezone

    from opsched.rules.templating import Globals, render_spec

    doc = templated(JOB, [(*RUN, "init", 2, "file", "chmod")])
    doc["params"]["s0"]["value"] = "+x; reboot"
    with pytest.raises(SpecError, match=r"run\.init\.2\.file\.chmod.*is not a mode chmod takes \(e\.g\. \+x"):
        pods(doc)
    spec = parse_polyaxonfile(yaml.dump(templated(JOB, [(*RUN, "init", 2, "file", "chmod")]), sort_keys=False))
    spec.params["s0"] = "+x; reboot"  # as a producer could send it, past the CLI
    with pytest.raises(TemplateError, match=r"init\[2\]\.file\.chmod: '\+x; reboot' is not a mode"):
        render_spec(spec, Globals(uuid="a", name="n", project_name="p", created_at=datetime.now(timezone.utc)))


@pytest.mark.parametrize("path, loc", [
    ((*RUN, "volumes", 0, "name"), "component.run.volumes.0.name"),
    ((*RUN, "environment", "volumes", 0, "name"), "component.run.environment.volumes.0.name"),
    ((*RUN, "environment", "tolerations", 0, "value"), "component.run.environment.tolerations.0.value"),
    ((*RUN, "connections", 0), "component.run.connections.0"),
    ((*RUN, "init", 0, "git", "flags", 0), "component.run.init.0.git.flags.0"),
    ((*RUN, "sidecars", 0, "image"), "component.run.sidecars.0.image"),
], ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else "")
def test_a_template_that_cannot_render_is_located_at_its_line(path, loc):
    doc = templated(JOB, [path])
    del doc["params"]["s0"]  # an undefined name
    with pytest.raises(SpecError) as raised:
        pods(doc)
    assert [(e.loc, e.msg.split(";")[0]) for e in raised.value.errors] == [(loc, "'s0' is undefined")]
    assert raised.value.errors[0].line is not None
