"""The queue configuration as Kubernetes resources (``rules.queue_resources``): the CRDs generated from the contract
are structural and carry every field of it; resources assemble into the configuration a file says; what is wrong is
said per resource, by its path under ``spec``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from opsched.proto.queues import QueuesConfig
from opsched.rules import queue_resources as qr
from opsched.rules.queues_file import load_queues
from tests.docs import snippet

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUEUE_FILES = sorted(EXAMPLES.glob("queues*.yaml"))


def resources_of(manifests: list[dict[str, Any]]) -> list[qr.Resource]:
    return [qr.Resource(m["kind"], m["metadata"]["name"], m.get("spec") or {}, 1) for m in manifests]


def in_order(config: QueuesConfig) -> QueuesConfig:
    """The lists sorted (resources have no order: they are taken by name)."""
    return msgspec.structs.replace(config, **{k.attr: sorted(getattr(config, k.attr), key=msgspec.json.encode)
                                              for k in qr.LIST_KINDS})


@pytest.mark.parametrize("path", QUEUE_FILES, ids=lambda p: p.name)
def test_a_files_resources_make_the_same_configuration(path):
    config = load_queues(path)
    assembly = qr.assemble(resources_of(qr.manifests(config)))
    assert assembly.problems == {} and assembly.general == []
    assert assembly.config is not None and in_order(assembly.config) == in_order(config)


def test_the_built_in_default_is_one_queue_resource_and_the_settings():
    manifests = qr.manifests(QueuesConfig())
    assert [(m["kind"], m["metadata"]["name"]) for m in manifests] == [("OpsConfig", "opsched"), ("OpsQueue", "default")]
    assert manifests[1]["spec"] == {"concurrency": 10}


def test_a_misspelt_field_is_refused_by_its_path_not_pruned():
    resources = resources_of(qr.manifests(QueuesConfig()))
    resources[1] = qr.Resource("OpsQueue", "default", {"concurency": 3, "preemption": {"withinQeue": "Never"}})
    assembly = qr.assemble(resources)
    assert assembly.config is None
    assert assembly.problems == {("OpsQueue", "default"): [
        "spec.concurency: unknown field (misspelt? it would be ignored)"]}  # msgspec stops at the first


def test_a_wrong_type_is_said_by_its_path():
    assembly = qr.assemble([qr.Resource("OpsQueue", "default", {"preemption": {"cooldownSeconds": "soon"}})])
    assert assembly.problems == {("OpsQueue", "default"): [
        "spec.preemption.cooldownSeconds: Expected `float`, got `str`"]}


def test_a_problem_of_the_configuration_is_the_resource_it_is_about():
    resources = [qr.Resource("OpsQueue", "a", {"cohort": "team"}), qr.Resource("OpsQueue", "b", {
        "resources": [{"resource": "nvidia.com/gpu", "flavors": [{"name": "h100", "nominal": 4}]}]}),
        qr.Resource("OpsConfig", "opsched", {"defaultQueue": "c"})]
    assembly = qr.assemble(resources)
    assert assembly.config is None and assembly.general == []
    assert set(assembly.problems) == {("OpsQueue", "b"), ("OpsConfig", "opsched")}
    assert assembly.problems[("OpsQueue", "b")][0].startswith("spec.resources[0].flavors[0].name: ")
    assert "h100" in assembly.problems[("OpsQueue", "b")][0]
    assert assembly.problems[("OpsConfig", "opsched")] == [
        "spec.defaultQueue: 'c' is not one of the queues ['a', 'b']"]


def test_a_name_is_metadata_name():
    assembly = qr.assemble([qr.Resource("OpsQueue", "a", {"name": "b"})])
    assert assembly.problems[("OpsQueue", "a")][0].startswith("spec.name: 'b' differs from metadata.name 'a'")
    assert qr.assemble([qr.Resource("OpsQueue", "default", {"name": "default"})]).config is not None


def test_the_settings_carry_no_list_and_only_the_one_named_opsched_is_read():
    assembly = qr.assemble([qr.Resource("OpsQueue", "default", {}),
                            qr.Resource("OpsConfig", "opsched", {"queues": [{"name": "x"}]})])
    assert assembly.problems == {("OpsConfig", "opsched"): [
        "spec.queues: not a field of OpsConfig: each of queues is an OpsQueue resource"]}
    assembly = qr.assemble([qr.Resource("OpsQueue", "default", {}),
                            qr.Resource("OpsConfig", "other", {"defaultQueue": "nope"})])
    assert assembly.config is not None and assembly.ignored == [("OpsConfig", "other")]


def test_settings_alone_make_no_configuration():
    assembly = qr.assemble([qr.Resource("OpsConfig", "opsched", {"placement": "spread"})])
    assert assembly.config is None and assembly.general == ["queues: at least one queue is needed"]
    assert assembly.problems == {("OpsConfig", "opsched"): ["spec.defaultQueue: 'default' is not one of the queues []"]}


def test_budgets_are_named_freely_and_carry_what_they_limit():
    config = QueuesConfig(budgets=[{"scope": "queue", "name": "default", "window": "month", "money": 100.0}])  # type: ignore[list-item]
    config = msgspec.convert(msgspec.to_builtins(config), QueuesConfig)
    manifests = qr.manifests(config)
    budget = next(m for m in manifests if m["kind"] == "OpsBudget")
    assert budget["metadata"]["name"] == "queue-default-month"
    assert budget["spec"] == {"scope": "queue", "name": "default", "window": "month", "money": 100.0}


# ---- the CRDs --------------------------------------------------------------------------------------------------

def non_structural(node: Any, at: str = "") -> list[str]:
    """Where a schema breaks the API server's structural rules (as far as these schemas could): a node without a
    type (unless int-or-string or preserve-unknown-fields), references, alternatives, defaults."""
    out: list[str] = []
    if not isinstance(node, dict):
        return out
    for banned in ("$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "default", "title"):
        if banned in node:
            out.append(f"{at or '.'}: {banned}")
    if "type" not in node and not (node.get("x-kubernetes-int-or-string")
                                   or node.get("x-kubernetes-preserve-unknown-fields")):
        out.append(f"{at or '.'}: no type")
    for name, child in (node.get("properties") or {}).items():
        out += non_structural(child, f"{at}.{name}")
    if isinstance(node.get("items"), dict):
        out += non_structural(node["items"], f"{at}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += non_structural(node["additionalProperties"], f"{at}{{}}")
    return out


@pytest.mark.parametrize("crd", qr.crds(), ids=lambda c: c["metadata"]["name"])
def test_each_crd_is_structural_cluster_scoped_with_a_status(crd):
    version = crd["spec"]["versions"][0]
    assert crd["spec"]["scope"] == "Cluster" and version["subresources"] == {"status": {}}
    assert non_structural(version["schema"]["openAPIV3Schema"]) == []
    assert crd["spec"]["names"]["categories"] == ["opsched"]


@pytest.mark.parametrize("kind", qr.KINDS, ids=lambda k: k.kind)
def test_each_spec_schema_has_every_field_of_the_contract(kind):
    fields = {f.encode_name for f in msgspec.structs.fields(kind.item or QueuesConfig)}
    expected = fields - ({"name"} if kind.named and kind.item is not None else set())
    if kind.item is None:
        expected -= {k.path for k in qr.LIST_KINDS}
    assert set(qr.spec_schema(kind)["properties"]) == expected


def test_a_quantity_is_int_or_string_and_an_optional_field_nullable():
    queue = qr.spec_schema(qr.BY_KIND["OpsQueue"])["properties"]
    line = queue["resources"]["items"]["properties"]["flavors"]["items"]["properties"]
    assert line["nominal"] == {"x-kubernetes-int-or-string": True}
    assert line["borrowingLimit"] == {"x-kubernetes-int-or-string": True, "nullable": True}
    assert queue["concurrency"] == {"type": "integer", "minimum": 1, "nullable": True}
    assert queue["weight"] == {"type": "number", "minimum": 0, "exclusiveMinimum": True}
    assert queue["ordering"] == {"type": "string", "enum": ["fair-by-user", "fifo"]}
    assert queue["tolerations"]["items"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


# ---- `opsched queues --to-resources FILE` and the manual's example --------------------------------------------

def test_to_resources_prints_what_kubectl_applies_and_sends_nothing(capsys):
    from opsched import cli

    path = EXAMPLES / "queues.yaml"
    assert cli.main(["queues", "--to-resources", str(path)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"# the queue configuration of {path} as opsched.io resources")
    docs = list(yaml.safe_load_all(printed))
    assert all(d["apiVersion"] == "opsched.io/v1alpha1" for d in docs)
    assembly = qr.assemble(resources_of(docs))
    assert assembly.config is not None and in_order(assembly.config) == in_order(load_queues(path))


def test_to_resources_of_an_invalid_file_exits_non_zero_saying_why(capsys, tmp_path):
    from opsched import cli

    bad = tmp_path / "queues.yaml"
    bad.write_text("queues:\n  - name: a\n    concurency: 2\n")
    assert cli.main(["queues", "--to-resources", str(bad)]) != 0
    assert "concurency" in capsys.readouterr().err


def test_the_manuals_example_queue_is_one():
    (doc,) = yaml.safe_load_all(snippet("queue-resource-yaml"))
    assembly = qr.assemble([qr.Resource(doc["kind"], doc["metadata"]["name"], doc["spec"]),
                            qr.Resource("OpsFlavor", "a100", {}),
                            qr.Resource("OpsConfig", "opsched", {"defaultQueue": "research"})])
    assert assembly.config is not None and assembly.config.queues[0].resources[0].flavors[0].nominal == 4


def test_the_example_configuration_of_deploy_is_valid():
    docs = list(yaml.safe_load_all((EXAMPLES.parent / "deploy" / "queues" / "queues.yaml").read_text()))
    assembly = qr.assemble(resources_of(docs))
    assert assembly.problems == {} and assembly.config is not None
    assert [q.name for q in assembly.config.queues] == ["cpu", "production", "research"]
