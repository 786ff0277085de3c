"""Every module's ``__all__`` says what it exports, and only that (httpx's
``test_exported_members.py``).

For each module of the package that declares ``__all__``: every listed name resolves, none is listed
twice, and every public function or class the module itself defines is listed (a public definition
left out of ``__all__`` is either private — give it a leading underscore — or missing from the
module's declared surface)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import rankwise

SRC = Path(rankwise.__file__).parent
# entry points run as scripts: importing them runs the program
SCRIPTS = {"rankwise.cli.__main__", "rankwise.spark.__main__"}


def _modules() -> list[str]:
    names = ["rankwise"]
    for info in pkgutil.walk_packages([str(SRC)], prefix="rankwise."):
        if info.name not in SCRIPTS and _source(info.name).exists():  # (not the compiled rankwise.data._walk)
            names.append(info.name)
    return sorted(names)


def _source(name: str) -> Path:
    rel = Path(*name.split(".")[1:])
    pkg = SRC / rel / "__init__.py"
    return pkg if pkg.exists() else (SRC / rel).with_suffix(".py")


def _declared_all(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
               for node in tree.body)


def _public_definitions(tree: ast.Module) -> list[str]:
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node.name for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")]


MODULES = [m for m in _modules() if _declared_all(ast.parse(_source(m).read_text()))]


def test_most_modules_declare_their_surface():
    """The check below covers the package: every public module but the CLI's commands declares
    ``__all__``."""
    assert len(MODULES) >= 140


@pytest.mark.parametrize("name", MODULES)
def test_exported_members(name: str):
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    unresolved = [n for n in exported if not hasattr(module, n)]
    assert not unresolved, f"{name}.__all__ names what the module does not have: {unresolved}"
    if name.rsplit(".", 1)[-1].startswith("_"):
        return
    missing = [n for n in _public_definitions(ast.parse(_source(name).read_text())) if n not in exported]
    assert not missing, f"{name} defines public {missing} but leaves them out of __all__"
