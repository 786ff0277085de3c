"""The report package renders: no import cycle between its modules, no file loading or probing in
it, and every rich table and progress bar comes from the one console and the one progress helper."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "rankwise"
REPORT = PACKAGE / "report"


def imports(path: Path) -> set[str]:
    """Every module imported anywhere in ``path`` (top level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_no_import_cycle_between_report_modules():
    graph = {p.stem: {m.split(".")[2] for m in imports(p) if m.startswith("rankwise.report.")}
             for p in REPORT.glob("*.py")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(m for m in graph if reaches(m, m, {m}))
    assert cycles == [], f"report modules in an import cycle: {cycles}"
    assert "compare_console" not in graph["html"] | graph["markdown"]


def test_report_modules_do_not_load_or_probe():
    forbidden = {"rankwise.data.load", "rankwise.analysis.probe", "rankwise.data.corpus",
                 "rankwise.data.records.load_records"}
    for path in REPORT.glob("*.py"):
        bad = sorted(m for m in imports(path) if any(m == f or m.startswith(f + ".") for f in forbidden))
        assert bad == [], f"{path.name} imports {bad}"


def test_one_console_and_one_progress_helper():
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        if rel != "progress.py":
            assert "rich.progress" not in text, rel
        if rel != "report/console.py":
            assert "Console()" not in text, rel
