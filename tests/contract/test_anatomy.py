"""One anatomy per service (issue 12): every service package has ``__main__.py`` (``main(TheService)``)
and ``service.py`` (a docstring saying what it consumes and emits; one ``Service`` subclass named for
the package, its consumers and handler methods; ``build(settings, clock=None)`` returning it)."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from opsched.services.runtime.service import Service
from opsched.services.runtime.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("admission", "cost", "cache", "dispatcher", "notifier")


def service_class(name: str) -> type[Service]:
    module = importlib.import_module(f"opsched.services.{name}.service")
    classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
               if issubclass(c, Service) and c is not Service and c.__module__ == module.__name__]
    assert len(classes) == 1, f"services/{name}/service.py defines {classes}: one Service subclass"
    return classes[0]


@pytest.mark.parametrize("name", SERVICES)
def test_every_service_has_the_same_files(name):
    package = ROOT / "services" / name
    assert {"__init__.py", "__main__.py", "service.py"} <= {p.name for p in package.iterdir()}


@pytest.mark.parametrize("name", SERVICES)
def test_service_py_is_one_service_class_named_for_the_package(name):
    cls = service_class(name)
    assert cls.name == name
    module = importlib.import_module(f"opsched.services.{name}.service")
    assert module.__doc__ and "onsumes" in module.__doc__, "the docstring says what the service consumes"


@pytest.mark.parametrize("name", SERVICES)
def test_build_returns_an_instance_whose_handlers_are_its_methods(name):
    module = importlib.import_module(f"opsched.services.{name}.service")
    service = module.build(Settings(dispatcher_mode="null"))
    assert type(service) is service_class(name) and service.name == name
    assert service.subscriptions, f"{name} consumes nothing"
    for sub in service.subscriptions:
        assert sub.handlers, f"{name}: consumer {sub.durable} has no handler"
        assert all(getattr(h, "__self__", None) is service for h in sub.handlers.values())


@pytest.mark.parametrize("name", SERVICES)
def test_main_serves_the_service_class(name):
    tree = ast.parse((ROOT / "services" / name / "__main__.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "main"]
    assert [[a.id for a in c.args if isinstance(a, ast.Name)] for c in calls] == [[service_class(name).__name__]]
