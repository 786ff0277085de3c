"""Saved results and baselines read like every other input (issue 33, item 5, the reading half):
bytes that are not UTF-8, binary content and 100,000-deep nesting in a ``.json`` given to ``gate``
(either side), the GitHub Action or the pytest plugin are one line naming the file (and line), exit
2 or a one-line test failure; they were a UnicodeDecodeError and a RecursionError traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _inprocess import run_cli
from integrations.test_integrations_pytest import LOAD, _write_inputs
from rankwise.analysis.sides import read_saved_result
from rankwise.errors import InputError

pytest_plugins = ["pytester"]

DEEP = 100_000


def _saved(folder: Path) -> dict:
    """A real saved result of base.trec (``eval --format json --per-query``)."""
    done = run_cli(["eval", folder / "qrels.txt", folder / "base.trec", "-m", "ndcg@10,P@1,recall@10", "--format",
                    "json", "--per-query"])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _bad_files(folder: Path) -> dict[str, tuple[bytes, str]]:
    """name -> (content, what the one line says)."""
    good = json.dumps(_saved(folder), indent=2).encode()
    at = good.index(b'"q03"')
    line = good[:at].count(b"\n") + 1
    return {
        "bad_utf8.json": (good[:at] + b"\xff\xfe" + good[at:], f"bad_utf8.json:{line}: bytes that are not UTF-8"),
        "latin1.json": (good.replace(b'"summary"', '"r\u00e9sum\u00e9"'.encode("latin-1"), 1),
                        "latin1.json:2: bytes that are not UTF-8"),
        "binary.json": (bytes(range(256)) * 8, "binary.json:3: bytes that are not UTF-8 at column 115"),  # after \n, \r
        "deep.json": (b'{"per_query": ' + b"[" * DEEP + b"]" * DEEP + b"}", "deep.json: JSON nested too deeply"),
        "deep_objects.json": (b'{"a": ' * DEEP + b"1" + b"}" * DEEP, "deep_objects.json: JSON nested too deeply"),
        "deep_list.json": (b"[" * DEEP + b"]" * DEEP, "deep_list.json: JSON nested too deeply"),
    }


def test_read_saved_result_refuses_undecodable_and_deep_files(tmp_path):
    _write_inputs(tmp_path)
    for name, (content, said) in _bad_files(tmp_path).items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(InputError) as info:
            read_saved_result(tmp_path / name)
        assert str(info.value).startswith(str(tmp_path / said.split(":", 1)[0])), str(info.value)
        assert said.split(": ", 1)[1] in str(info.value)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_saved(tmp_path)))
    assert read_saved_result(good)["per_query"]["q00"]["precision@1"] == 1.0
    (tmp_path / "run.json").write_text('{"q00": {"d1": 1}}\n{"q01": {"d1": 1}}\n')  # JSON Lines: not a saved result
    assert read_saved_result(tmp_path / "run.json") is None


@pytest.mark.parametrize("side", ["--baseline", "--candidate"])
def test_gate_names_the_bad_saved_file_in_one_line(tmp_path, monkeypatch, side):
    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    for name, (content, said) in _bad_files(tmp_path).items():
        Path(name).write_bytes(content)
        other = "--candidate" if side == "--baseline" else "--baseline"
        done = run_cli(["gate", side, name, other, "base.trec", "--qrels", "qrels.txt", "-m", "ndcg@10"])
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert done.stderr.startswith(f"rankwise: error: {said}"), done.stderr
        assert done.stderr.count("\n") == 1


def test_github_action_names_the_bad_baseline(tmp_path, monkeypatch):
    from rankwise.integrations.github import main

    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    content, said = _bad_files(tmp_path)["deep.json"]
    Path("deep.json").write_bytes(content)
    assert main(["--baseline", "deep.json", "--candidate", "base.trec", "--qrels", "qrels.txt", "--metrics",
                 "ndcg@10", "--html", ""]) == 2
    assert said in (tmp_path / "summary.md").read_text()


PLUGIN_TESTS = """
from rankwise.testing import assert_no_regression

def test_option_baseline(rankwise_baseline):
    assert_no_regression(rankwise_baseline, "same.trec", metrics=["ndcg@10"], qrels="qrels.txt")

def test_bad_utf8_baseline():
    assert_no_regression("bad_utf8.json", "same.trec", metrics=["ndcg@10"], qrels="qrels.txt")

def test_binary_candidate():
    assert_no_regression("base.trec", "binary.json", metrics=["ndcg@10"], qrels="qrels.txt")
"""


def test_pytest_plugin_fails_the_test_with_the_one_line(pytester):
    """One pytest run (each takes seconds): the --rankwise-baseline file 100,000 deep, a baseline
    with bytes that are not UTF-8, a binary candidate."""
    _write_inputs(pytester.path)
    bad = _bad_files(pytester.path)
    for name in ("deep.json", "bad_utf8.json", "binary.json"):
        (pytester.path / name).write_bytes(bad[name][0])
    pytester.makepyfile(test_saved=PLUGIN_TESTS)
    result = pytester.runpytest(*LOAD, "-p", "no:cacheprovider", "--rankwise-baseline", "deep.json")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    for test, name in (("test_option_baseline", "deep.json"), ("test_bad_utf8_baseline", "bad_utf8.json"),
                       ("test_binary_candidate", "binary.json")):
        said = bad[name][1]  # the option's path is made absolute; the others are as the test gave them
        where = str(pytester.path / said) if test == "test_option_baseline" else said
        section = out.split(f"_ {test} _", 1)[1].lstrip("_ \n").splitlines()
        assert section[0].startswith(f"rankwise: error: {where}"), (test, out)
    assert "Traceback" not in out and "RecursionError" not in out and "UnicodeDecodeError" not in out
    assert "rankwise/analysis/gate.py" not in out  # no frames of rankwise's code
