"""The parser on ``init``, ``sidecars`` and ``connections`` (``opsched.polyaxonfile.models_init``): what they become
on the op, in a job and per pytorchjob replica, and what is refused, located at its line."""
from __future__ import annotations

import textwrap
import warnings

import pytest

from opsched.polyaxonfile import SpecWarning, component_hash, parse_polyaxonfile
from opsched.proto.spec import FileInit, GitInit, InitStep
from tests.unit.polyaxonfile_texts import errors_of

JOB = textwrap.dedent("""
    version: 1.1
    kind: component
    name: train
    inputs: [{name: lr, type: float, value: 0.1}]
    run:
      kind: job
      init:
        - git: {url: "https://github.com/org/models.git", revision: v2, flags: ["--depth 1"]}
        - connection: repo
        - file: {content: "lr={{ lr }}", filename: params.env, chmod: "600"}
          path: /config
        - container: {image: "busybox:{{ lr }}", command: [sh, -c, "true"]}
          connection: db
      sidecars:
        - {image: fluentd:1, args: ["--run={{ globals.uuid }}"]}
        - {name: metrics, image: prom:1}
      connections: [repo, db]
      container: {image: trainer:1}
""")


def parsed(text: str = JOB):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpecWarning)
        return parse_polyaxonfile(text)


def test_a_jobs_init_steps_sidecars_and_connections_become_the_ops_main_pods():
    spec = parsed()
    git, clone, file, container = spec.init
    assert git == InitStep(git=GitInit(url="https://github.com/org/models.git", revision="v2", flags=["--depth 1"]))
    assert clone == InitStep(git=GitInit(), connection="repo")  # a connection alone: clone its repository
    assert file == InitStep(file=FileInit(content="lr={{ lr }}", filename="params.env", chmod="600"), path="/config")
    assert (container.container.name, container.connection) == ("init-3", "db")
    assert [c.name for c in spec.sidecars] == ["sidecar-0", "metrics"] and spec.connections == ["repo", "db"]


def test_the_init_steps_sidecars_and_connections_are_part_of_the_component_hash_only_when_set():
    spec = parsed()
    pod = {"init": spec.init, "sidecars": spec.sidecars, "connections": spec.connections}
    assert spec.component_hash == component_hash(spec.container, spec.environment, spec.replicas, spec.run_kind, pod)
    assert spec.component_hash != component_hash(spec.container, spec.environment, spec.replicas, spec.run_kind)
    assert component_hash(spec.container, spec.environment) == component_hash(
        spec.container, spec.environment, (), "job", {"init": [], "sidecars": [], "connections": []})


def test_a_pytorchjobs_master_and_worker_have_their_own():
    spec = parsed(textwrap.dedent("""
        kind: component
        run:
          kind: pytorchjob
          master:
            init: [{file: {content: x}}]
            container: {image: t}
          worker:
            replicas: 2
            init: [{connection: repo}]
            sidecars: [{image: s}]
            connections: [db]
            container: {image: t}
    """))
    assert [s.file for s in spec.init] == [FileInit(content="x")] and spec.sidecars == [] and spec.connections == []
    [worker] = spec.replicas
    assert worker.init == [InitStep(git=GitInit(), connection="repo")] and worker.connections == ["db"]
    assert [c.name for c in worker.sidecars] == ["sidecar-0"]


def test_templates_in_init_containers_and_sidecars_are_rendered_at_the_edge_and_located():
    text = JOB.replace("busybox:{{ lr }}", "busybox:{{ nope }}").replace("--run={{ globals.uuid }}", "{{ 1 / 0 }}")
    errors = errors_of(text)
    assert errors["run.init.3.container.image"].msg.startswith("'nope' is undefined")
    assert errors["run.init.3.container.image"].line == 13  # its line in JOB
    assert "division by zero" in errors["run.sidecars.0.args.0"].msg


@pytest.mark.parametrize("where, yaml, loc, message", [
    ("init", "- artifacts: {dirs: [data]}", "run.init.0.artifacts",
     "'artifacts' init steps read from an artifacts store, which opsched does not have yet"),
    ("init", "- lineageRef: abc", "run.init.0.lineageRef", "'lineageRef' init steps read from an artifacts store"),
    ("init", "- {file: {content: x, chmod: 0755}}", "run.init.0.file.chmod", "write the mode as a string"),
    ("init", "- {git: {url: 'https://h/r.git'}, container: {image: x}}", "run.init.0",
     "an init step is exactly one of git, file or container, not git and container"),
    ("init", "- {git: {revision: v1}}", "run.init.0.git", "a git step needs a url, or a connection"),
    ("init", "- {file: {content: x}, path: relative}", "run.init.0.path", "'relative' must be an absolute"),
    ("init", "- {file: {content: x}, connection: repo}", "run.init.0.connection", "a file step uses no connection"),
    ("init", "- {container: {image: x, resources: {requests: {nvidia.com/gpu: 1}}}}",
     "run.init.0.container.resources.requests.nvidia.com/gpu", "nvidia.com/gpu needs a limit"),
    ("sidecars", "- {image: x, name: main}", "run.sidecars.0", "the container name 'main' is also container's"),
    ("sidecars", "- {image: x, name: Bad}", "run.sidecars.0.name", "must be a DNS label"),
    ("connections", "[repo, repo]", "run.connections.1", "'repo' is named twice"),
    ("connections", "[Repo]", "run.connections.0", "is not a DNS label"),
])
def test_what_cannot_run_is_refused_at_its_field(where, yaml, loc, message):
    body = f"  {where}:\n" + textwrap.indent(yaml, "    ") + "\n" if yaml.startswith("-") else f"  {where}: {yaml}\n"
    text = textwrap.dedent("""
        kind: component
        run:
          kind: job
          container: {image: t}
    """) + body
    errors = errors_of(text)
    assert loc in errors and message in errors[loc].msg, errors


def test_an_init_files_kind_is_warned_and_recorded_it_changes_nothing():
    text = JOB.replace("filename: params.env,", "filename: params.env, kind: file,")
    with pytest.warns(SpecWarning, match=r"run\.init\.2\.file\.kind"):
        spec = parse_polyaxonfile(text)
    assert spec.ignored == ["run.init.2.file.kind"] and spec.init == parsed().init
