"""``rankwise sweep`` on the bundled Kestrel set: a small grid (BM25, two chunk sizes, two overlaps)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rankwise.datasets import bundled_files, load_bundled_testset
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag
from rankwise.retrieval import load_corpus, run_retrievers
from rankwise.sweep import sweep, sweep_metrics

WHOLE = 100_000  # larger than any Kestrel document: overlap changes nothing, the index is reused


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    return sweep("kestrel", chunk_sizes=[400, WHOLE], overlaps=[0, 50], retrievers=["bm25"], permutations=2000,
                 out=out, progress=False), out


def test_grid_numbers_are_those_of_the_pipeline(result):
    res, _ = result
    assert [c.label for c in res.configs] == ["bm25 recursive 400/0", "bm25 recursive 400/50",
                                              f"bm25 recursive {WHOLE}/0", f"bm25 recursive {WHOLE}/50"]
    assert res.metrics == sweep_metrics(10) and res.baseline == "bm25 recursive 400/0"
    # one configuration, recomputed by hand through run_retrievers + evaluate_rag
    corpus = load_corpus(bundled_files("kestrel").corpus)
    ts = load_bundled_testset("kestrel")
    bm25 = run_retrievers(corpus, {c.id: c.question for c in ts}, ["bm25"], k=10, chunk_size=400, chunk_overlap=50,
                          quiet=True)["bm25"]
    rows = [{"id": c.id, "question": c.question, "reference_contexts": [p.to_dict() for p in c.reference_contexts],
             "retrieved_contexts": bm25.contexts(c.id)} for c in ts]
    alone = evaluate_rag(rows, "span", metrics=res.metrics)
    for m in res.metrics:
        assert res.means["bm25 recursive 400/50"][m] == pytest.approx(alone.mean[m], abs=1e-12), m
    # best per metric is the argmax (first in grid order on ties); deltas are differences of means
    for m in res.metrics:
        top = max(res.means[c.label][m] for c in res.configs)
        label, value = res.best[m]
        assert value == top and label == next(c.label for c in res.configs if res.means[c.label][m] == top)
        for c in res.configs[1:]:
            delta, p, sig = res.significance(c.label, m)
            assert delta == pytest.approx(res.means[c.label][m] - res.means[res.baseline][m], abs=1e-12)
            assert sig == (p is not None and p < 0.05)
    # whole documents contain whole passages: span recall is higher than with 400-character chunks
    assert res.means[f"bm25 recursive {WHOLE}/0"]["recall@10"] > res.means["bm25 recursive 400/0"]["recall@10"]


def test_index_builds_cached_across_the_grid(result):
    res, _ = result
    assert res.settings["chunkings"] == 4 and res.settings["index_builds"] == 3
    assert res.info[f"bm25 recursive {WHOLE}/50"]["reused_from"] == f"recursive {WHOLE}/0"
    assert res.info["bm25 recursive 400/50"]["reused_from"] is None
    assert res.means[f"bm25 recursive {WHOLE}/50"] == res.means[f"bm25 recursive {WHOLE}/0"]


def test_files_and_report(result):
    res, out = result
    data = json.loads((out / "sweep.json").read_text())
    assert [r["label"] for r in data["rows"]] == [c.label for c in res.configs]
    assert data["best"]["mrr"]["config"] == res.best["mrr"][0]
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and all(c.label in html for c in res.configs)
    assert len(list((out / "records").glob("*.jsonl"))) == 4
    text = res.table_text()
    assert "(baseline)" in text and "*" in text


def test_reranked_cell_and_bad_grids():
    # a callable reranker (the cross-encoder path is tests/test_cross_encoder.py): shortest chunk first
    res = sweep("kestrel", chunk_sizes=[600], overlaps=[0], retrievers=["bm25", "bm25+rerank"],
                rerank_model=lambda q, t: -len(t), rerank_top_n=10, permutations=500, progress=False)
    recs = res.records["bm25+rerank recursive 600/0"]
    lengths = [len(c.text) for c in recs[0].chunks]
    assert lengths == sorted(lengths)
    with pytest.raises(InputError, match="needs a reranker"):
        sweep("kestrel", retrievers=["bm25+rerank"], progress=False)
    with pytest.raises(InputError, match="unknown splitter"):
        sweep("kestrel", splitters=["semantic"], progress=False)
    with pytest.raises(InputError, match="no valid configuration"):
        sweep("kestrel", chunk_sizes=[50], overlaps=[50], progress=False)
    skipped = sweep("kestrel", chunk_sizes=[50, 800], overlaps=[100], permutations=200, progress=False).skipped
    assert skipped == [("bm25 recursive 50/100", "overlap 100 is not smaller than chunk size 50")]


def test_cli(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rankwise.cli", "sweep", "--chunk-size", f"400,{WHOLE}",
                          "--overlap", "0", "--permutations", "500", "--out", str(tmp_path / "s"), "--quiet"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "2 configurations, 73 questions, 38 documents" in out.stdout
    assert f"best mrr: bm25 recursive {WHOLE}/0" in out.stdout
    assert (tmp_path / "s" / "report.html").is_file()
    bad = subprocess.run([sys.executable, "-m", "rankwise.cli", "sweep", "--retriever", "bm25,colbert", "--quiet",
                          "--out", str(tmp_path / "t")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "colbert" in bad.stderr


@pytest.mark.browser
def test_report_in_chromium(result, tmp_path):
    import os

    from _chromium import Chromium, find_chromium

    if find_chromium() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the sweep report test needs chromium (CI is set, so this is a failure, not a skip)")
        pytest.skip("needs chromium")
    res, out = result
    with Chromium.start(tmp_path) as browser:
        page = browser.open(out / "report.html")
        assert page.console_errors == []
        cells = page.evaluate("JSON.stringify(Array.from(document.querySelectorAll('#summary-table td[data-mean]'))"
                              ".map(e => [e.dataset.system, e.dataset.metric, e.dataset.mean]))")
        got = {(s, m): float(v) for s, m, v in json.loads(cells)}
        assert got == {(c.label, m): res.means[c.label][m] for c in res.configs for m in res.metrics}
        # chunk drill-down for the baseline and the best configurations
        shown = set(json.loads(page.evaluate(
            "JSON.stringify(Array.from(document.querySelectorAll('details.query .system')).map(e => e.dataset.system))")))
        assert shown == {res.baseline} | {lab for lab, _ in res.best.values()}
