"""docs/integrations.md beyond its ``rankwise`` commands (tests/docs/test_docs_commands.py runs
those): the test file it shows run by the ``pytest`` commands it shows, with the output shown; its
Python snippets run as they are; the job summary it shows is what the script writes; its workflow
uses the action's own inputs."""

from __future__ import annotations

import contextlib
import io
import re
import sys

import pytest
import yaml

from _extras import need
from docs.test_docs_commands import REPO, fenced_blocks, setup_common, setup_compare
from integrations.test_integrations_pytest import LOAD

pytest_plugins = ["pytester"]

PAGE = REPO / "docs" / "integrations.md"
BLOCKS = list(fenced_blocks(PAGE.read_text(encoding="utf-8")))


def _blocks(lang: str) -> list[list[str]]:
    return [lines for block_lang, _, lines in BLOCKS if block_lang == lang]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, shared_data):
    """The page's folder, as tests/docs/test_docs_commands.py prepares it (the Cranfield runs, the
    test sets)."""
    folder = tmp_path_factory.mktemp("integrations-docs")
    setup_common(folder)
    setup_compare(folder)
    return folder


def _shown_lines_appear(shown: list[str], actual: str) -> list[str]:
    """The shown lines (``...`` skipped, ``<time>`` any time) missing from the output, in order (a
    shown line may be part of an output line: pytest pads its summary lines with ``=`` to the
    terminal's width)."""
    lines, missing, at = actual.splitlines(), [], 0
    for want in shown:
        if want.strip() == "...":
            continue
        pattern = re.compile(re.escape(want.rstrip()).replace(re.escape("<time>"), r"[\d.]+s"))
        hit = next((i for i in range(at, len(lines)) if pattern.search(lines[i].rstrip())), None)
        if hit is None:
            missing.append(want)
        else:
            at = hit + 1
    return missing


def test_the_pytest_file_runs_as_shown(workdir, pytester, monkeypatch):
    """The page's three ``pytest`` commands, run in this process by pytester (the process boundary
    is not what the page shows; the plugin, its options and its output are)."""
    test_file = _blocks("python")[0]
    assert test_file[0] == "# test_retrieval.py"
    (workdir / "test_retrieval.py").write_text("\n".join(test_file) + "\n")
    consoles = [lines for lines in _blocks("console") if lines and lines[0].startswith("$ pytest")]
    assert len(consoles) == 2
    monkeypatch.chdir(workdir)
    # this suite's own tests/retrieval/test_retrieval.py, when this worker ran it, holds the module
    # name the page's file takes
    monkeypatch.delitem(sys.modules, "test_retrieval", raising=False)
    runs = 0
    for block in consoles:
        commands = [i for i, line in enumerate(block) if line.startswith("$ ")] + [len(block)]
        for start, end in zip(commands, commands[1:], strict=False):
            args = block[start][2:].split()[1:]
            # an installed rankwise registers the plugin (entry point); a checkout's is loaded by
            # name
            result = pytester.runpytest_inprocess(*LOAD, "-p", "no:cacheprovider", *args)
            stdout = "\n".join(result.outlines)
            missing = _shown_lines_appear(block[start + 1:end], stdout)
            assert not missing, f"{block[start]}: not in the output:\n{missing}\n\n{stdout[-4000:]}"
            runs += 1
    assert runs == 3 and (workdir / "baseline.json").exists()


def test_the_mlflow_snippets_run_as_shown(workdir, monkeypatch):
    need("mlflow")
    import mlflow

    monkeypatch.chdir(workdir)
    before = mlflow.get_tracking_uri()
    try:
        log_snippet, scorer_snippet = _blocks("python")[1:3]
        exec(compile("\n".join(log_snippet), f"{PAGE}:log", "exec"), {})
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile("\n".join(scorer_snippet), f"{PAGE}:scorers", "exec"), {})
        shown = re.search(r"#\s*(.+)$", scorer_snippet[-1]).group(1).strip()
        assert out.getvalue().strip().splitlines()[-1] == shown
    finally:
        mlflow.set_tracking_uri(before)


def test_the_summary_shown_is_what_the_script_writes(workdir, monkeypatch):
    from rankwise.integrations.github import main

    line = next(x for lines in _blocks("console") for x in lines if "rankwise.integrations.github" in x
                and "GITHUB_STEP_SUMMARY" in x)
    args = line.split("python -m rankwise.integrations.github ")[1].split()
    monkeypatch.chdir(workdir)
    summary = workdir / "shown-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(args) == 1
    assert summary.read_text(encoding="utf-8").rstrip("\n").split("\n") == _blocks("markdown")[0]


def test_the_workflow_uses_the_actions_inputs():
    workflow = yaml.safe_load("\n".join(_blocks("yaml")[0]))
    action = yaml.safe_load((REPO / "action.yml").read_text())
    step = next(s for s in workflow["jobs"]["gate"]["steps"] if "rankwise" in str(s.get("uses", "")))
    assert set(step["with"]) <= set(action["inputs"])
    assert all(name in step["with"] for name, spec in action["inputs"].items() if spec.get("required"))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/integrations.md" in readme and "action.yml" in readme
