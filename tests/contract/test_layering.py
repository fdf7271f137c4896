"""The layering rules of docs/architecture.md: only ``proto/subjects.py`` spells a subject, and only the allowed
modules import nats, kubernetes or another service. The layers, each importing only those below it:
``proto/`` (the wire contract: msgspec and the standard library only), ``rules/`` (the rules every part shares),
``bus/`` (the runtime's client half: the NATS connection), ``services/`` (``services/runtime/``, the server half,
and the services) and the client ``opsched/`` (which imports no service, except the modules that start them)."""
from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# ---- (e) layering: subject literals and imports -----------------------------------------------

LAYERS = ("proto", "rules", "bus", "services", "opsched")
SOURCE_FILES = sorted(p for d in LAYERS for p in (ROOT / d).rglob("*.py"))
SUBJECTS_MODULE = ROOT / "proto" / "subjects.py"
SUBJECT_LITERAL = re.compile(r"""["'](ops|cmd|dlq)\.""")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _subject_literal_case(path: Path):
    return pytest.param(path, id=_rel(path))


def test_the_source_tree_is_found():
    assert SUBJECTS_MODULE in SOURCE_FILES and len(SOURCE_FILES) > 20
    # every layer is a package with modules: a check of an empty layer would pass without looking at anything
    for layer in LAYERS:
        assert (ROOT / layer / "__init__.py").is_file() and len(list((ROOT / layer).rglob("*.py"))) > 1, layer


@pytest.mark.parametrize("path", [_subject_literal_case(p) for p in SOURCE_FILES if p != SUBJECTS_MODULE])
def test_no_module_but_proto_subjects_spells_a_subject(path):
    hits = [f"{_rel(path)}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if SUBJECT_LITERAL.search(line)]
    assert hits == [], "spell subjects only in proto/subjects.py:\n" + "\n".join(hits)


def test_the_subject_literal_check_would_see_a_subject():
    assert SUBJECT_LITERAL.search('return f"ops.{kind}.{op_id}"')
    assert SUBJECT_LITERAL.search("x = 'cmd.stop'")
    assert not SUBJECT_LITERAL.search('name = "opsched.io/op-id"')


# The repository's top-level packages, each imported as ``opsched.<name>`` (opsched/<name> links to it).
MAPPED = ('proto', 'rules', 'bus', 'services')


def repository_name(module: str) -> str:
    """``opsched.proto.codec`` → ``proto.codec``: the rules below speak of the repository's directories."""
    head, _, rest = module.partition(".")
    return rest if head == "opsched" and rest.split(".")[0] in MAPPED else module


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, as written (absolute), at any depth; relative imports left out."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return out


@functools.cache  # a file is read by several of the tests below: parsed once
def imports_of(path: Path, root: Path | None = None) -> frozenset[str]:
    """Every module a file imports, at any depth (function-local imports too), relative ones resolved (against
    ``root``, by default the repository's)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(root or ROOT).as_posix().removesuffix(".py").replace("/", ".").split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            out.add(module)
            out |= {f"{module}.{alias.name}" for alias in node.names}
    return frozenset(repository_name(m) for m in out)


def _top(module: str) -> str:
    return module.split(".")[0]


def _service_of(rel: str) -> str | None:
    parts = rel.split("/")
    return parts[1] if parts[0] == "services" and len(parts) > 2 else None


def _allowed(rel: str, prefixes: tuple[str, ...]) -> bool:
    return rel.startswith(prefixes) or rel in prefixes


NATS_ALLOWED = ("bus/", "services/runtime/")
KUBERNETES_ALLOWED = ("services/dispatcher/", "opsched/localcluster/", "opsched/demo.py")
IMPORTING_FILES = [pytest.param(p, id=_rel(p)) for p in SOURCE_FILES]


@pytest.mark.parametrize("path", IMPORTING_FILES)
def test_only_the_bus_and_the_runtime_import_nats(path):
    rel = _rel(path)
    used = sorted(m for m in imports_of(path) if _top(m) == "nats")
    assert _allowed(rel, NATS_ALLOWED) or not used, f"{rel} imports {used}; only {', '.join(NATS_ALLOWED)} may"


@pytest.mark.parametrize("path", IMPORTING_FILES)
def test_only_the_dispatcher_and_the_local_cluster_import_kubernetes(path):
    rel = _rel(path)
    used = sorted(m for m in imports_of(path) if _top(m) == "kubernetes")
    assert _allowed(rel, KUBERNETES_ALLOWED) or not used, \
        f"{rel} imports {used}; only {', '.join(KUBERNETES_ALLOWED)} may"


@pytest.mark.parametrize("path", [p for p in IMPORTING_FILES if _service_of(_rel(p.values[0]))])
def test_no_service_imports_another_service(path):
    rel = _rel(path)
    own = _service_of(rel)
    foreign = sorted(m for m in imports_of(path)
                     if _top(m) == "services" and len(m.split(".")) > 1
                     and m.split(".")[1] not in (own, "runtime"))
    assert foreign == [], f"{rel} (service {own}) imports {foreign}; services share only proto, rules, bus and runtime"


def _in(layer: str) -> list:
    return [p for p in IMPORTING_FILES if _rel(p.values[0]).startswith(f"{layer}/")]


def _is_stdlib(module: str) -> bool:
    return _top(module) in sys.stdlib_module_names


@pytest.mark.parametrize("path", _in("proto"))
def test_the_contract_imports_only_msgspec_and_the_standard_library(path):
    used = sorted(m for m in imports_of(path) if _top(m) not in ("proto", "msgspec") and not _is_stdlib(m))
    assert used == [], f"{_rel(path)} imports {used}; proto/ is the wire contract: msgspec and the standard library"


@pytest.mark.parametrize("path", _in("rules"))
def test_the_shared_rules_import_no_service_no_client_and_no_transport(path):
    used = sorted(m for m in imports_of(path) if _top(m) in ("services", "opsched", "bus", "nats", "kubernetes"))
    assert used == [], f"{_rel(path)} imports {used}; rules/ stands on proto/ and libraries alone"


@pytest.mark.parametrize("path", _in("bus"))
def test_the_client_half_of_the_runtime_imports_no_service_and_no_client(path):
    used = sorted(m for m in imports_of(path) if _top(m) in ("services", "opsched"))
    assert used == [], f"{_rel(path)} imports {used}; bus/ is what the SDK and CLI share with the services"


# Modules of opsched/ that start services (in-process or as a local stand-in cluster) may import them;
# the client (CLI, SDK, views, the polyaxonfile edge, dry run) uses only proto/, rules/ and bus/.
RUNNERS = ("opsched/embedded.py", "opsched/demo.py", "opsched/localcluster/")


@pytest.mark.parametrize("path", _in("opsched"))
def test_the_client_imports_nothing_under_services(path):
    rel = _rel(path)
    used = sorted(m for m in imports_of(path) if _top(m) == "services")
    assert _allowed(rel, RUNNERS) or not used, \
        f"{rel} imports {used}; the client shares only proto/, rules/ and bus/ with the services"


def test_the_standard_library_check_knows_the_standard_library():
    assert all(map(_is_stdlib, ("__future__", "datetime", "collections.abc", "typing")))
    assert not any(map(_is_stdlib, ("msgspec", "yaml", "jinja2", "nats", "proto.spec")))


def test_the_import_scanner_sees_real_imports():
    bus = imports_of(ROOT / "bus/bus.py")
    assert {"nats", "nats.js.api", "proto.codec"} <= bus
    assert "kubernetes" in imports_of(ROOT / "services/dispatcher/k8s.py")
    assert "services.admission.state.admission_state" in imports_of(ROOT / "services/admission/cycle.py")
    # a function-local import is seen too
    assert "opsched.localcluster.pods" in imports_of(ROOT / "opsched/demo.py")


def test_the_import_scanner_resolves_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "services" / "cost"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("from ..admission import state\nfrom . import ledger\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert {"services.admission", "services.admission.state", "services.cost.ledger"} <= imports_of(pkg / "x.py")


# ---- admission's layers: model < state (the fold, its followers, the snapshot) < policies < cycle < service ----

ADMISSION = "services.admission"
ADMISSION_LAYERS = ("model", "state", "policies", "cycle", "service")  # lowest first: a layer imports only lower
CYCLE_MODULES = ("cycle", "parking", "rendering")  # services/admission/<name>.py in the cycle layer; the rest: service
POLICIES_MAY_READ = ("services.admission.state.snapshot", "services.admission.state.views")  # Snapshot, QueueView


def _module_of(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix().removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def admission_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the admission modules it imports (at any depth), packages' ``__init__`` left out (they import
    nothing: ``test_admission_packages_import_nothing``)."""
    files = {_module_of(p, root): p for p in (root / "services" / "admission").rglob("*.py")
             if p.name != "__init__.py"}
    graph = {}
    for module, path in files.items():
        found = set()
        for name in imports_of(path, root):
            parts = name.split(".")  # the longest prefix that is a module (``a.b.Name`` -> ``a.b``)
            target = next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in files),
                          None)
            if target is not None and target != module:
                found.add(target)
        graph[module] = found
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other by imports (each group a cycle or several)."""
    reach = {module: _reachable(graph, module) for module in graph}
    groups = {tuple(sorted({module} | {other for other in reach[module] if module in reach.get(other, ())}))
              for module in graph if module in reach[module]}
    return sorted(list(group) for group in groups)


def admission_layer(module: str) -> str:
    rest = module.removeprefix(ADMISSION + ".").split(".")
    if rest[0] in ("model", "state", "policies"):
        return rest[0]
    return "cycle" if rest[0] in CYCLE_MODULES else "service"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    rank = {name: n for n, name in enumerate(ADMISSION_LAYERS)}
    return sorted(f"{a} ({admission_layer(a)}) -> {b} ({admission_layer(b)})" for a, targets in graph.items()
                  for b in targets if rank[admission_layer(b)] > rank[admission_layer(a)])


def policies_reading_state(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} -> {b}" for a, targets in graph.items() if admission_layer(a) == "policies"
                  for b in targets if admission_layer(b) == "state" and b not in POLICIES_MAY_READ)


def test_admission_packages_import_nothing():
    inits = sorted((ROOT / "services" / "admission").rglob("__init__.py"))
    assert len(inits) >= 4
    assert {_rel(p): sorted(imports_of(p) - {"__future__", "__future__.annotations"}) for p in inits} == \
        {_rel(p): [] for p in inits}


def test_no_two_admission_modules_import_each_other():
    cycles = import_cycles(admission_graph(ROOT))
    assert cycles == [], "import cycles among services/admission modules:\n" + "\n".join(" <-> ".join(c)
                                                                                         for c in cycles)


def test_an_admission_layer_imports_no_higher_one():
    upward = upward_imports(admission_graph(ROOT))
    assert upward == [], f"layers {' < '.join(ADMISSION_LAYERS)}; imports running up:\n" + "\n".join(upward)


def test_policies_read_of_the_state_only_the_snapshot_and_the_queue_view():
    reads = policies_reading_state(admission_graph(ROOT))
    assert reads == [], "policies see the Snapshot and QueueView only:\n" + "\n".join(reads)


def test_the_admission_checks_would_see_a_cycle_and_an_upward_import():
    graph = {"services.admission.model.a": {"services.admission.state.b"},
             "services.admission.state.b": {"services.admission.model.a"},
             "services.admission.policies.c": {"services.admission.state.fold", "services.admission.state.snapshot"}}
    assert import_cycles(graph) == [["services.admission.model.a", "services.admission.state.b"]]
    assert upward_imports(graph) == ["services.admission.model.a (model) -> services.admission.state.b (state)"]
    assert policies_reading_state(graph) == ["services.admission.policies.c -> services.admission.state.fold"]
    # a function-local import is an edge too
    assert "services.admission.state.fold" in admission_graph(ROOT)["services.admission.purge"]


@pytest.mark.parametrize("path", IMPORTING_FILES + [pytest.param(p, id=_rel(p)) for d in ("tests", "bench")
                                                     for p in sorted((ROOT / d).rglob("*.py"))])
def test_everything_is_imported_by_its_one_name(path):
    """The repository's code directories are installed as ``opsched.<name>`` only (the wheel has one top-level
    name, tests/contract/test_wheel.py): importing one by the directory's name would load a second copy."""
    bare = sorted(m for m in imported_names(path) if _top(m) in MAPPED)
    assert bare == [], f"{_rel(path)} imports {bare}; write opsched.{bare[0] if bare else ''}"


def test_a_bare_import_is_seen(tmp_path):
    (tmp_path / "x.py").write_text("import proto.codec as c\nfrom services.runtime import bus\nfrom opsched.proto import x\n")
    assert {m for m in imported_names(tmp_path / "x.py") if _top(m) in MAPPED} == {
        "proto.codec", "services.runtime", "services.runtime.bus"}
