"""The fuzz net over the integrations' own readers: the GitHub Action's inputs (text an action passes: metrics,
floors, alpha, max-drop, relevance) and the expectations / retrieved documents an MLflow scorer reads. A seeded
mutator makes mutants of valid values; each gives a result (exit 0 or 1), or exit 2 with one line on stderr and the
summary saying so (an InputError from Python), never a traceback."""

from __future__ import annotations

import contextlib
import io
import os
import random

import pytest

from rankwise.errors import InputError
from rankwise.integrations.github import main
from test_integrations_pytest import _write_inputs

MUTANTS = int(os.environ.get("RANKWISE_FUZZ_MUTANTS", "300")) // 3
VALID = {"--metrics": "ndcg@10,P@1", "--floors": "recall@10=0.5", "--alpha": "0.05", "--max-drop": "0.01",
         "--relevance": ""}
NOISE = ["", " ", ",", "=", "@", "@-1", "nan", "inf", "-0", "1e309", "é", "\x00", "ndcg@", "=0.4", "P@5=", "0x10",
         "map", "ndcg_cut_10", "ids", "span", "llm", "a=b=c", ";", "'", '"', "\n", "recall@0", "1" * 40]


def _mutate(value: str, rng: random.Random) -> str:
    ops = rng.randrange(4)
    if ops == 0:
        return rng.choice(NOISE)
    if ops == 1 and value:
        i = rng.randrange(len(value))
        return value[:i] + rng.choice(NOISE) + value[i + 1:]
    if ops == 2:
        return value + rng.choice([",", " ", ""]) + rng.choice(NOISE)
    return value[: rng.randrange(len(value) + 1)]


def test_action_inputs_give_a_verdict_or_one_line(tmp_path, monkeypatch):
    _write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    rng = random.Random(24)
    codes = []
    for _ in range(MUTANTS):
        flags = dict(VALID)
        for flag in rng.sample(sorted(flags), rng.randint(1, 2)):
            flags[flag] = _mutate(flags[flag], rng)
        argv = ["--baseline", "base.trec", "--candidate", "worse.trec", "--qrels", "qrels.txt", "--html", ""]
        argv += [x for flag, value in flags.items() for x in (flag, value)]
        summary.write_text("")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: its one line, exit 2
                code = exc.code
        lines = err.getvalue().strip().splitlines()
        assert code in (0, 1, 2), (argv, code)
        if code == 2:
            assert len(lines) == 1 and lines[0].startswith("rankwise: error: "), (argv, lines)
            assert "Traceback" not in err.getvalue()
            if "the following arguments" not in lines[0]:
                assert "bad input" in summary.read_text()
        else:
            assert summary.read_text().startswith("## "), argv
        codes.append(code)
    assert {1, 2} <= set(codes)  # the mutants reach both the gate and the refusals


def test_scorer_expectations_and_documents_score_or_refuse():
    pytest.importorskip("mlflow")
    from mlflow.entities import Feedback

    from rankwise.integrations.mlflow import _score_case, case_from_trace

    rng = random.Random(7)
    values = [None, "", "d1", 3, 2.5, [], {}, ["d1"], [{"doc_uri": "d1"}], [{"content": "alpha beta gamma"}],
              [{"doc_uri": None}], [{"content": 7}], [1, 2], "x" * 50, [{"doc_uri": ["d1"]}], {"doc_uri": "d1"}]
    keys = ["expected_retrieved_context", "reference_context_ids", "reference_contexts", "other"]
    for _ in range(MUTANTS):
        expectations = {k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, 3))}
        try:
            row = case_from_trace(None, expectations, rng.choice(values))
            feedback = _score_case("ndcg@10", None, expectations, "q?", None, {}, Feedback)
        except InputError:
            continue
        assert row["retrieved_contexts"] == [] and isinstance(feedback.value, float), expectations
