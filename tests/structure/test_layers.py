"""The house's rule, held: imports run down the layer table of docs/architecture.md, never up; no
package imports another's private names or modules; the packages form no circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rankwise"
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
FACES = {"", "traces", "mlflow", "testing", "datasets"}  # the top-level faces: they may import any layer


def _layers() -> dict[str, int]:
    """Package (or top-level module) -> layer number, read from the page's layer table."""
    table = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\| (\d+) \| (.+?) \|", line)
        if m:
            for name in re.findall(r"`([\w.]+?)/?`", m.group(2)):
                table[name.removesuffix(".py")] = int(m.group(1))
    return table


LAYERS = _layers()


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def imports_of(module: str, source: str) -> list[tuple[str, int, str, list[str]]]:
    """(module, line, imported module, names) for every rankwise import in ``source``, lazy ones
    included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("rankwise."):
            found.append((module, node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(module, node.lineno, a.name, []) for a in node.names if a.name.startswith("rankwise.")]
    return found


def _all_imports() -> list[tuple[str, int, str, list[str]]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        found += imports_of(".".join(parts[:-1] if parts[-1] == "__init__" else parts), path.read_text())
    return found


def upward(imports) -> list[str]:
    return [f"{me}:{line} imports {target} (layer {LAYERS[_package(target)]} > {LAYERS[_package(me)]})"
            for me, line, target, _ in imports
            if _package(me) not in FACES and _package(target) not in FACES
            and LAYERS[_package(target)] > LAYERS[_package(me)]]


def private_uses(imports) -> list[str]:
    out = []
    for me, line, target, names in imports:
        if _package(me) == _package(target) or _package(target) in FACES:
            continue
        hidden = [n for n in target.split(".")[2:] + names if n.startswith("_") and not n.endswith("__")]
        if hidden:
            out.append(f"{me}:{line} uses {target} {hidden}")
    return out


def circles(imports) -> list[str]:
    edges: dict[str, set[str]] = {}
    for me, _, target, _ in imports:
        a, b = _package(me), _package(target)
        if a != b and a not in FACES and b not in FACES:
            edges.setdefault(a, set()).add(b)
    return sorted(f"{a} <-> {b}" for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))


IMPORTS = _all_imports()


def test_the_table_places_every_package():
    packages = {_package(m) for m, *_ in IMPORTS} | {_package(t) for _, _, t, _ in IMPORTS}
    assert packages - FACES <= set(LAYERS), f"not in the layer table: {sorted(packages - FACES - set(LAYERS))}"
    assert LAYERS["data"] < LAYERS["metrics"] < LAYERS["report"] < LAYERS["cli"]


def test_no_import_runs_up():
    assert upward(IMPORTS) == []


def test_no_package_uses_another_ones_private_names():
    assert private_uses(IMPORTS) == []


def test_the_packages_form_no_circle():
    assert circles(IMPORTS) == []


def test_the_checks_catch_planted_breaches():
    """The checks themselves, on planted sources: an import up, a private module and name, a circle.
    """
    planted = imports_of("rankwise.metrics.x", "def f():\n    from rankwise.cli import main\n")
    assert upward(planted) == [f"rankwise.metrics.x:2 imports rankwise.cli (layer {LAYERS['cli']} > {LAYERS['metrics']})"]
    planted = imports_of("rankwise.metrics.x", "from rankwise.data.text import _private\nimport rankwise.llm._y\n")
    assert private_uses(planted) == ["rankwise.metrics.x:1 uses rankwise.data.text ['_private']",
                                     "rankwise.metrics.x:2 uses rankwise.llm._y ['_y']"]
    planted = (imports_of("rankwise.data.a", "from rankwise.llm import b\n")
               + imports_of("rankwise.llm.b", "from rankwise.data import a\n"))
    assert circles(planted) == ["data <-> llm"]


# other libraries' private names rankwise reads on purpose: namedtuple's public ``_replace``,
# ``os._exit``, and MLflow's tracking-store registry and active experiment
# (integrations/_mlflow_uri.py says why)
THIRD_PARTY = {"_replace", "_exit", "_tracking_uri", "_active_experiment_id", "_registry"}


def private_attributes(sources: dict[str, str]) -> list[str]:
    """``obj._name`` read in a package where no ``_name`` is defined: another package's private
    attribute."""
    defined: dict[str, set[str]] = {}
    uses = []
    for module, source in sources.items():
        package = _package(module)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.setdefault(package, set()).add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.setdefault(package, set()).add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                defined.setdefault(package, set()).add(node.value)  # __dict__["_name"], __slots__
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.endswith("__"):
                if isinstance(node.ctx, ast.Store):
                    defined.setdefault(package, set()).add(node.attr)
                elif isinstance(node.value, ast.Name) and node.value.id not in ("self", "cls"):
                    uses.append((module, node.lineno, node.value.id, node.attr))
    return [f"{m}:{line} reads {obj}.{attr}" for m, line, obj, attr in uses
            if attr not in defined.get(_package(m), set()) and attr not in THIRD_PARTY]


def _sources() -> dict[str, str]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text()
    return out


def test_no_package_reads_another_ones_private_attributes():
    assert private_attributes(_sources()) == []


def test_the_attribute_check_catches_a_planted_read():
    planted = {"rankwise.data.run": "class Run:\n    def f(self):\n        self._position = {}\n",
               "rankwise.report.html": "def g(run):\n    return run._position\n"}
    assert private_attributes(planted) == ["rankwise.report.html:2 reads run._position"]
