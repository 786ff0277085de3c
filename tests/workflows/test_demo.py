"""`rankwise demo`, the main job: runs offline on the bundled benchmark and writes consistent files.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data import load_run
from rankwise.data.records import load_records
from rankwise.metrics.rag import evaluate_rag
from rankwise.workflows.demo import DEMO_KS, demo_metrics, run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return run_demo(out, quiet=True, permutations=2000), out


def test_demo_scores_every_system_at_every_k(demo):
    result, _ = demo
    assert result.systems == ["bm25", "dense", "hybrid"]
    assert result.metrics == demo_metrics(DEMO_KS)
    assert result.settings["questions"] >= 60 and result.settings["documents"] >= 30
    for system in result.systems:
        means = result.means[system]
        assert set(means) == set(result.metrics)
        assert all(0.0 <= v <= 1.0 for v in means.values())
        # nothing unscorable in the bundled set: every question has ground truth and chunks
        assert result.summaries[system]["evaluated"] == result.settings["questions"]
        # cutoff monotonicity that must hold for any ranking
        assert means["hit_rate@1"] <= means["hit_rate@3"] <= means["hit_rate@5"] <= means["hit_rate@10"]
        assert means["recall@1"] <= means["recall@10"]
        assert means["precision@1"] == means["hit_rate@1"] == means["mrr@1"]
    # keyword and paraphrase questions pull BM25 and dense apart; fusing them wins on nDCG@10 here
    assert result.winner == "hybrid"
    assert result.means["hybrid"]["ndcg@10"] > max(result.means["bm25"]["ndcg@10"], result.means["dense"]["ndcg@10"])


def test_demo_files_reproduce_the_printed_numbers(demo):
    result, out = demo
    summary = json.loads((out / "summary.json").read_text())
    assert summary["winner"]["system"] == result.winner
    for system in result.systems:
        assert summary["mean"][system] == pytest.approx(result.means[system], abs=0)
        records = load_records(out / "records" / f"{system}.jsonl")
        assert len(records) == result.settings["questions"]
        again = evaluate_rag(records, "span", k=list(DEMO_KS), metrics=result.metrics)
        assert again.mean == pytest.approx(result.means[system], abs=1e-12)
        run = load_run(out / "runs" / f"{system}.trec")
        assert run.n_queries == result.settings["questions"]
        assert max(len(run.ranking(q)) for q in run.queries) <= max(DEMO_KS)
        lines = (out / "runs" / f"{system}.trec.chunks.jsonl").read_text().splitlines()
        chunks = [json.loads(line) for line in lines]
        assert all(c["end"] - c["start"] == len(c["text"]) for c in chunks)
    html = (out / "report.html").read_text()
    assert "<html" in html and "hybrid" in html and f"{result.means['hybrid']['ndcg@10']:.4f}" in html


def test_demo_cli_prints_the_table(tmp_path):
    out = tmp_path / "demo"
    res = CliRunner().invoke(main, ["demo", "--out", str(out), "--quiet", "--no-html"])
    assert res.exit_code == 0, res.output
    assert "Best system: hybrid" in res.output
    assert "context_recall" in res.output and "wcp(decay=linear)" in res.output
    assert (out / "summary.json").exists() and not (out / "report.html").exists()


def _records(pairs):
    from rankwise.data.records import CaseRecord, ChunkRecord, Verdict

    return [CaseRecord("q1", chunks=[ChunkRecord(rank=i + 1, verdicts={"span": Verdict(a), "llm": Verdict(b)})
                                     for i, (a, b) in enumerate(pairs)])]


def test_agreement_sentence_says_what_the_kappa_means():
    from rankwise.relevance.agreement import agreement
    from rankwise.workflows.demo import agreement_sentence

    constant = agreement(_records([(1, 0), (0, 0), (1, 0), (0, 0)]), "span", "llm")
    text = agreement_sentence(constant)
    assert constant.kappa == 0.0  # one source constant: kappa 0, not undefined; the sentence says why
    assert text.startswith("Cohen's kappa is 0.00: the judge called every compared chunk not relevant, so "
                           "its verdicts carry no information")
    assert "270M-parameter" in text and "kappa 0.3-0.65" in text
    # 6 of 8 agree, both call half relevant: kappa = (0.75 - 0.5) / 0.5 = 0.5
    fair = agreement(_records([(1, 1), (1, 1), (1, 1), (1, 0), (0, 0), (0, 0), (0, 0), (0, 1)]), "span", "llm")
    assert fair.kappa == 0.5
    assert agreement_sentence(fair).startswith(
        f"Cohen's kappa 0.50 (95% CI {fair.kappa_ci[0]:.2f} to {fair.kappa_ci[1]:.2f}, 8 chunks): moderate "
        "agreement with the span labels.")
    labels_one_class = agreement(_records([(1, 1), (1, 0), (1, 1)]), "span", "llm")
    assert labels_one_class.kappa == 0.0 or labels_one_class.kappa is None
    both_constant = agreement(_records([(1, 1), (1, 1)]), "span", "llm")
    assert both_constant.kappa is None
    assert agreement_sentence(both_constant).startswith("Cohen's kappa is undefined: the judge called every "
                                                        "compared chunk relevant")
    opposite = agreement(_records([(1, 0), (0, 1), (1, 0), (0, 1)]), "span", "llm")
    assert "no agreement beyond chance" in agreement_sentence(opposite)


def test_demo_judge_rejects_an_empty_slice(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "rankwise.cli", "demo", "--judge", "local", "--questions", "0",
                           "--out", str(tmp_path / "d")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--questions" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "d").exists()
