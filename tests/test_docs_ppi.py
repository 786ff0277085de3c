"""docs/ppi.md: every command in it runs, and every output it shows is what the command prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from rankwise.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "ppi.md"


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def test_every_command_in_docs_ppi_runs_and_prints_what_the_doc_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    blocks = _blocks(DOC.read_text(encoding="utf-8"))
    commands = [line[2:] for kind, body in blocks if kind == "console" for line in body.splitlines()
                if line.startswith("$ ")]
    assert len(commands) >= 6 and all(c.startswith("rankwise ") for c in commands)
    last_output = ""
    checked = 0
    for kind, body in blocks:
        if kind == "console":
            last_output = ""
            for line in body.splitlines():
                if not line.startswith("$ "):
                    continue
                res = CliRunner(env={"COLUMNS": "200"}).invoke(main, shlex.split(line[2:])[1:])
                assert res.exit_code == 0, f"{line}\n{res.stdout}\n{res.stderr}"
                last_output += res.stdout
        elif kind == "text" and last_output:
            for shown in body.strip().splitlines():
                assert shown in last_output, f"docs/ppi.md shows {shown!r}, the command printed:\n{last_output}"
                checked += 1
    assert checked >= 15
