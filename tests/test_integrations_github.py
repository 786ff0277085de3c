"""The GitHub Action: its script run with the GitHub environment variables set, and action.yml's steps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rankwise.integrations.github import main, parser
from test_integrations_pytest import _write_inputs

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def github_env(tmp_path, monkeypatch):
    """$GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT as temp files (each holding a line already: the script appends)."""
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    summary.write_text("earlier step\n")
    output.write_text("earlier=1\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    return summary, output


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_regression_fails_with_summary_outputs_and_report(github_env, capsys):
    summary, output = github_env
    code = main(["--baseline", "base.trec", "--candidate", "worse.trec", "--qrels", "qrels.txt",
                 "--metrics", "ndcg@10,P@1", "--floors", "recall@10=0.5", "--html", "report.html"])
    assert code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ rankwise gate failed: ndcg@10, precision@1\n")
    assert re.search(r"\| ndcg@10 \| 1\.0000 \| 0\.7723 \| -0\.2277 ▼ \| \[-0\.\d{4}, -0\.\d{4}\] \| 0\.0005 \| - \| "
                     r"❌ drop > 0\.01, p < 0\.05 \|", text), text
    assert "| recall@10 | 1.0000 | 1.0000 | 0.0000 | [0.0000, 0.0000] | 1.0000 | 0.5 | ✅ pass |" in text
    assert "### ndcg@10: the queries that lost most" in text and "| q00 | 1.0000 | 0.4307 | -0.5693 |" in text
    assert "30 paired queries" in text
    assert _outputs(output) == {"earlier": "1", "passed": "false", "exit-code": "1", "failed": "ndcg@10,precision@1",
                                "report": "report.html"}
    html = Path("report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "gate FAILED: ndcg@10, precision@1" in html
    assert "GATE FAILED: ndcg@10, precision@1" in capsys.readouterr().out


def test_no_regression_passes(github_env):
    summary, output = github_env
    assert main(["--baseline", "base.trec", "--candidate", "same.trec", "--qrels", "qrels.txt", "--metrics",
                 "ndcg@10", "--html", ""]) == 0
    assert "## ✅ rankwise gate passed" in summary.read_text()
    assert "the queries that lost most" not in summary.read_text()
    assert _outputs(output)["passed"] == "true" and _outputs(output)["exit-code"] == "0"


def test_saved_baseline_gives_the_gate_page(github_env, tmp_path):
    from click.testing import CliRunner

    from rankwise.cli import main as cli

    out = CliRunner().invoke(cli, ["eval", "qrels.txt", "base.trec", "-m", "ndcg@10", "--format", "json", "--per-query"])
    Path("base.json").write_text(out.stdout)
    assert main(["--baseline", "base.json", "--candidate", "worse.trec", "--qrels", "qrels.txt", "--metrics",
                 "ndcg@10", "--html", "gate.html"]) == 1
    html = Path("gate.html").read_text()
    assert "<td>ndcg@10</td><td>1.0000</td><td>0.7723</td><td>-0.2277 ▼</td>" in html and "<script" not in html


@pytest.mark.parametrize(("args", "message"), [
    (["--candidate", "missing.trec"], "missing.trec"),
    (["--candidate", "worse.trec", "--floors", "ndcg@10"], "--floors: a floor is METRIC=VALUE, e.g. ndcg@10=0.40; "
                                                           "got 'ndcg@10'"),
    (["--candidate", "worse.trec", "--metrics", "nosuch@10"], "nosuch"),
    (["--candidate", "worse.trec", "--alpha", "2"], "--alpha: alpha must be between 0 and 1, not 2.0"),
    (["--candidate", "worse.trec", "--max-drop", "a lot"], "--max-drop: 'a lot' is not a number"),
    (["--candidate", "worse.trec", "--qrels", ""], "a run needs qrels to be scored"),
])
def test_bad_input_exits_2_with_one_line_and_a_summary(github_env, capsys, args, message):
    summary, output = github_env
    base = ["--baseline", "base.trec", "--qrels", "qrels.txt", "--metrics", "ndcg@10"]
    code = main([*base, *args] if "--metrics" not in args else [*base[:4], *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("rankwise: error: ") and message in err[0], err
    assert "## ⚠️ rankwise gate: bad input" in summary.read_text() and message in summary.read_text()
    assert _outputs(output)["exit-code"] == "2" and _outputs(output)["passed"] == "false"


def test_script_as_the_action_runs_it(github_env):
    """A real process, as the action's step runs it: exit code 1 and the summary written."""
    summary, _ = github_env
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "rankwise.integrations.github", "--baseline", "base.trec",
                           "--candidate", "worse.trec", "--qrels", "qrels.txt", "--metrics", "P@1", "--floors", "",
                           "--relevance", "", "--labels", "", "--html", ""], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "FAIL precision@1: 1.0000 -> 0.6000" in proc.stdout and "❌" in summary.read_text()


def test_action_yml_calls_the_script_with_its_inputs():
    action = yaml.safe_load((REPO / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    inputs = set(action["inputs"])
    assert {"baseline", "candidate", "qrels", "metrics", "alpha", "floors", "python-version", "rankwise-version",
            "rankwise-path"} <= inputs
    steps = action["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@") and "${{ inputs.python-version }}" in str(steps[0])
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert install["env"] == {"RANKWISE_PATH": "${{ inputs.rankwise-path }}",
                              "RANKWISE_VERSION": "${{ inputs.rankwise-version }}"}
    gate = next(s for s in steps if s.get("id") == "gate")
    assert "python -m rankwise.integrations.github" in gate["run"]
    # every gate input reaches the script through the environment (no input pasted into the shell text)
    flags = dict(re.findall(r'(--[\w-]+) "\$(\w+)"', gate["run"]))
    for name in ("baseline", "candidate", "qrels", "metrics", "alpha", "max-drop", "floors", "relevance", "labels"):
        var = flags[f"--{name}"]
        assert gate["env"][var] == f"${{{{ inputs.{name} }}}}", name
        assert name in inputs
    assert "${{" not in gate["run"]
    # the flags the action passes are the script's own, and all of them empty parse (to the defaults)
    assert set(flags) | {"--html"} <= set(parser()._option_string_actions)
    args = parser().parse_args([x for f in flags for x in (f, "")])
    assert args.alpha == "" and args.floors == [""]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and "rankwise-gate.html" in upload["with"]["path"]
    assert "rankwise-gate.html" in gate["run"]
