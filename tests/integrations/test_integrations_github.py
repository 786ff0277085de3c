"""The GitHub Action: its script run with the GitHub environment variables set, and action.yml's
steps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from integrations.test_integrations_pytest import _write_inputs
from rankwise.integrations.github import main, parser

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def github_env(tmp_path, monkeypatch):
    """$GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT as temp files (each holding a line already: the
    script appends)."""
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
    assert re.search(r"\| ndcg@10 \| 1\.0000 \| 0\.7723 \| -0\.2277 ▼ \| \[-0\.\d{4}, -0\.\d{4}\] \| 0\.0005 \| 0\.1518 \| - \| "
                     r"❌ drop > 0\.01, p < 0\.05 \|", text), text
    assert "| recall@10 | 1.0000 | 1.0000 | 0.0000 | [0.0000, 0.0000] | 1.0000 | - | 0.5 | ✅ pass |" in text
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
                              "RANKWISE_VERSION": "${{ inputs.rankwise-version }}",
                              "RANKWISE_ACTION_PATH": "${{ github.action_path }}"}
    gate = next(s for s in steps if s.get("id") == "gate")
    assert "python -m rankwise.integrations.github" in gate["run"]
    # every gate input reaches the script through the environment (no input pasted into the shell
    # text)
    flags = dict(re.findall(r'(--[\w-]+) "\$(\w+)"', gate["run"]))
    for name in ("baseline", "candidate", "qrels", "metrics", "alpha", "max-drop", "floors", "relevance", "labels"):
        var = flags[f"--{name}"]
        assert gate["env"][var] == f"${{{{ inputs.{name} }}}}", name
        assert name in inputs
    assert "${{" not in gate["run"]
    # the flags the action passes are the script's own, and all of them empty parse (to the
    # defaults)
    assert set(flags) | {"--html"} <= set(parser()._option_string_actions)
    args = parser().parse_args([x for f in flags for x in (f, "")])
    assert args.alpha == "" and args.floors == [""]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and "rankwise-gate.html" in upload["with"]["path"]
    assert "rankwise-gate.html" in gate["run"]


def _run_action(workdir: Path, inputs: dict[str, str], action_path: Path = REPO) -> tuple[int, dict, list[str]]:
    """Run action.yml's composite steps as a GitHub runner does: each ``run:`` step with ``${{
    inputs.* }}``, ``${{ github.action_path }}`` and ``${{ runner.temp }}`` substituted, its
    ``env:`` set, by ``bash --noprofile --norc -eo pipefail`` (GitHub's ``shell: bash``), stopping
    at the first failing step; the ``uses:`` steps (setup-python, upload-artifact) are GitHub's own
    and not run. ``python`` on PATH is this interpreter, except that ``python -m pip install`` only
    records its arguments (no network here: the venv already holds rankwise), and ``rankwise`` runs
    this checkout's CLI. Returns the exit code, the outputs the action declares (read from
    $GITHUB_OUTPUT as GitHub maps them) and the pip installs asked for."""
    action = yaml.safe_load((REPO / "action.yml").read_text())
    values = {name: spec.get("default", "") for name, spec in action["inputs"].items()} | inputs
    temp, bin_ = workdir / "runner-temp", workdir / "bin"
    temp.mkdir()
    bin_.mkdir()
    pip_log = workdir / "pip-installs.txt"
    (bin_ / "python").write_text(f'#!/bin/bash\nif [ "$1 $2 $3" = "-m pip install" ]; then shift 3; '
                                 f'echo "$*" >> {pip_log}; exit 0; fi\nexec {sys.executable} "$@"\n')
    (bin_ / "rankwise").write_text(f'#!/bin/bash\nexec {sys.executable} -m rankwise.cli "$@"\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    output = workdir / "github-output.txt"
    output.write_text("")
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "GITHUB_OUTPUT": str(output),
           "GITHUB_STEP_SUMMARY": str(workdir / "summary.md"), "GITHUB_ACTION_PATH": str(action_path),
           "RUNNER_TEMP": str(temp),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}

    def substitute(text: str) -> str:
        text = re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: values[m.group(1)], str(text))
        return text.replace("${{ github.action_path }}", str(action_path)).replace("${{ runner.temp }}", str(temp))

    code = 0
    for step in action["runs"]["steps"]:
        if "run" not in step:
            continue
        assert step["shell"] == "bash"
        step_env = {**env, **{k: substitute(v) for k, v in step.get("env", {}).items()}}
        script = workdir / "step.sh"
        script.write_text(substitute(step["run"]))
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workdir,
                              env=step_env, capture_output=True, text=True, timeout=300)
        code = proc.returncode
        if code:
            break
    set_ = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    declared = {}
    for name, spec in action["outputs"].items():
        found = re.fullmatch(r"\$\{\{ steps\.gate\.outputs\.([\w-]+) \}\}", spec["value"])
        declared[name] = set_.get(found.group(1)) if found else None
    installs = pip_log.read_text().splitlines() if pip_log.exists() else []
    return code, declared, installs


def test_the_action_run_as_github_runs_it_installs_its_own_checkout_and_fails_on_a_regression(tmp_path):
    """The action used as ``uses: OWNER/NAME@REF`` or ``uses: ./``: it installs rankwise from its
    own checkout ($GITHUB_ACTION_PATH, whatever the repository is called), the gate step fails the
    job on the planted regression and the declared outputs carry its verdict."""
    _write_inputs(tmp_path)
    code, outputs, installs = _run_action(tmp_path, {"baseline": "base.trec", "candidate": "worse.trec",
                                                     "qrels": "qrels.txt", "metrics": "P@1"},
                                          action_path=REPO)
    assert installs == [f"{REPO}[stats]"]
    assert code == 1
    assert outputs == {"passed": "false", "exit-code": "1", "failed": "precision@1"}
    assert (tmp_path / "runner-temp" / "rankwise-gate.html").stat().st_size > 0  # the artifact step's file


def test_the_action_passes_and_honours_a_pinned_version(tmp_path):
    _write_inputs(tmp_path)
    code, outputs, installs = _run_action(tmp_path, {"baseline": "base.trec", "candidate": "same.trec",
                                                     "qrels": "qrels.txt", "metrics": "P@1",
                                                     "rankwise-version": "0.1.0"})
    assert installs == ["rankwise[stats]==0.1.0"]
    assert code == 0 and outputs == {"passed": "true", "exit-code": "0", "failed": ""}


def test_docs_name_no_fixed_owner_or_version_for_the_action():
    """docs/integrations.md shows the action by placeholder (OWNER/rankwise@REF) and as ``uses:
    ./``: no repository name or release that a fork or a new tag would make wrong."""
    page = (REPO / "docs" / "integrations.md").read_text()
    uses = re.findall(r"uses: (\S+)", page)
    ours = [u for u in uses if not u.startswith("actions/")]
    assert ours and set(ours) <= {"OWNER/rankwise@REF", "./"}, ours
    assert "./" in ours
