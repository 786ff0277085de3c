"""``rankwise sweep`` on the bundled Kestrel set: a small grid (BM25, two chunk sizes, two
overlaps)."""

from __future__ import annotations

import json
import re

import pytest

from _inprocess import run_cli
from rankwise.datasets import bundled_files, load_bundled_testset
from rankwise.errors import InputError
from rankwise.metrics.rag import evaluate_rag
from rankwise.report.labels import signed
from rankwise.retrieval import load_corpus, run_retrievers
from rankwise.workflows.sweep_run import sweep, sweep_metrics

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
    # each cell's failure classes and headroom (docs/failures.md): those of the same records scored
    # alone
    from rankwise.analysis.diagnosis import diagnose

    diagnose(alone)
    cell = res.diagnoses["bm25 recursive 400/50"]
    assert cell["failure_classes"]["by_case"] == alone.summary["failure_classes"]["by_case"]
    assert cell["headroom"] == alone.summary["headroom"]
    assert sum(cell["failure_classes"]["counts"].values()) == len(ts)
    assert res.to_json()["failure_classes"]["bm25 recursive 400/50"]["counts"] == cell["failure_classes"]["counts"]
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
    # a callable reranker (the cross-encoder path is tests/retrieval/test_cross_encoder.py):
    # shortest chunk first
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
    out = run_cli(["sweep", "--chunk-size", f"400,{WHOLE}",
                   "--overlap", "0", "--permutations", "500", "--out", str(tmp_path / "s"), "--quiet"],
                  capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "2 configurations, 73 questions, 38 documents" in out.stdout
    assert f"best mrr: bm25 recursive {WHOLE}/0" in out.stdout
    assert (tmp_path / "s" / "report.html").is_file()
    bad = run_cli(["sweep", "--retriever", "bm25,colbert", "--quiet",
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


# --------------------------------------------------------------------------- documents judged by
# qrels (Cranfield)

DOC_METRICS = {"ndcg@10": "ndcg_cut_10", "map": "map", "mrr": "recip_rank", "precision@10": "P_10",
               "recall@100": "recall_100"}


@pytest.fixture(scope="module")
def cranfield_sweep(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("cranfield")
    res = sweep(shared_data / "cranfield", chunk_sizes=[0, 400], overlaps=[0, 400], permutations=2000, out=out,
                html=False, progress=False)
    return res, out


def _trec_eval_lines(text: str) -> dict[str, float]:
    rows = [line.split() for line in text.splitlines() if line.strip()]
    return {m: float(v) for m, q, v in rows if q == "all"}


def test_cranfield_documents_give_what_run_and_eval_print(cranfield_sweep, shared_data, tmp_path):
    """The same number through two commands: a sweep cell equals `rankwise run --beir` + `rankwise
    eval`."""
    res, _ = cranfield_sweep
    assert [c.label for c in res.configs] == ["bm25 whole documents", "bm25 recursive 400/0"]
    assert res.skipped == [("bm25 0/400", "whole documents (chunk size 0) take no overlap"),
                           ("bm25 recursive 400/400", "overlap 400 is not smaller than chunk size 400")]
    assert res.metrics == list(DOC_METRICS) and res.settings["level"] == "documents"
    assert res.settings["cases"] == 225 and res.settings["k"] == 100 and res.settings["unjudged"] == 0
    cran = shared_data / "cranfield"
    for label, size in (("bm25 whole documents", []), ("bm25 recursive 400/0", ["--chunk-size", "400",
                                                                                "--chunk-overlap", "0"])):
        run = tmp_path / f"{len(size)}.trec"
        made = run_cli(["run", "--beir", str(cran), *size,
                        "--out", str(run), "--quiet"], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        ev = run_cli(["eval", str(cran / "qrels" / "test.tsv"), str(run),
                      "-m", "ndcg_cut.10", "-m", "map", "-m", "recip_rank", "-m", "P.10", "-m", "recall.100",
                      "--format", "trec"], capture_output=True, text=True)
        assert ev.returncode == 0, ev.stderr
        printed = _trec_eval_lines(ev.stdout)
        for ours, theirs in DOC_METRICS.items():
            assert f"{res.means[label][ours]:.4f}" == f"{printed[theirs]:.4f}", (label, ours)
    # and to the last bit against the library's evaluate() on the lifted run
    from rankwise import evaluate
    from rankwise.data.corpus import load_beir
    from rankwise.retrieval.pipeline import RetrieverSpec, run_retrieval

    data = load_beir(cran)
    lifted = run_retrieval(data.corpus, data.queries, RetrieverSpec("bm25"), k=1000, chunk_size=400, chunk_overlap=0,
                           quiet=True).documents(100)
    direct = evaluate(data.qrels, lifted, list(DOC_METRICS.values()))
    for ours in DOC_METRICS:
        assert res.means["bm25 recursive 400/0"][ours] == direct.mean[ours], ours
    # the whole-document cell is the README's pinned BM25 figure
    assert round(res.means["bm25 whole documents"]["ndcg@10"], 3) == 0.373


def test_cranfield_records_are_documents_with_their_best_chunk(cranfield_sweep):
    res, out = cranfield_sweep
    rec = res.records["bm25 recursive 400/0"][0]
    assert len(rec.chunks) == 100 and len({c.id for c in rec.chunks}) == 100
    assert all(c.id == c.doc_id for c in rec.chunks)
    scores = [c.score for c in rec.chunks]
    assert scores == sorted(scores, reverse=True)
    assert all(c.text and c.end - c.start == len(c.text) for c in rec.chunks)
    verdicts = [c.verdicts["ids"] for c in rec.chunks]
    assert all(v.verdict == (v.grade >= 1) for v in verdicts) and sum(v.verdict for v in verdicts) >= 1
    # the records written re-score to the same numbers (eval-rag / compare-rag read them as stored)
    again = evaluate_rag(str(out / "records" / "bm25_recursive_400-0.jsonl"), "ids", metrics=res.metrics)
    assert again.mean == res.means["bm25 recursive 400/0"] and again.summary["r_basis"] == "qrels"
    data = json.loads((out / "sweep.json").read_text())
    assert data["settings"]["level"] == "documents" and data["settings"]["relevance"] == "ids"
    assert data["rows"][1]["ndcg@10"] == res.means["bm25 recursive 400/0"]["ndcg@10"]


def test_qrels_with_a_question_file_and_unjudged_questions(tmp_path):
    corpus = {"d1": "BM25 ranks by term frequency.", "d2": "Dense models embed text.", "d3": "Unrelated words."}
    questions = tmp_path / "q.tsv"
    questions.write_text("q1\tterm frequency\nq2\tembed text\nq3\twords nobody judged\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 2\nq2 0 d2 1\nq2 0 d3 0\n")
    from rankwise.errors import RankwiseWarning

    with pytest.warns(RankwiseWarning, match="^system 'bm25 whole documents': K = 2 is larger than every"):
        res = sweep(corpus, questions, qrels=qrels, chunk_sizes=[0], overlaps=[0], k=2, progress=False)
    assert res.settings["cases"] == 2 and res.settings["unjudged"] == 1
    assert res.means["bm25 whole documents"] == {"ndcg@2": 1.0, "map": 1.0, "mrr": 1.0, "precision@2": 0.5,
                                                 "recall@2": 1.0}
    with pytest.raises(InputError, match="relevance must be 'ids'"):
        sweep(corpus, questions, qrels=qrels, relevance="span", progress=False)
    with pytest.raises(InputError, match="judge none of the test set"):
        sweep(corpus, {"x": "term"}, qrels=qrels, progress=False)


def test_cli_beir(shared_data, tmp_path):
    out = run_cli(["sweep", "--beir", str(shared_data / "cranfield"),
                   "--chunk-size", "0,400", "--overlap", "0", "--permutations", "500", "--no-html",
                   "--out", str(tmp_path / "s"), "--quiet"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "2 configurations, 225 questions, 1400 documents" in out.stdout
    assert "scoring documents (top 100 per question, judged by qrels at grade >= 1)" in out.stdout
    assert "best ndcg@10: bm25 whole documents = 0.3730" in out.stdout
    both = run_cli(["sweep", "--beir", str(shared_data / "cranfield"),
                    "--corpus", "x.jsonl", "--testset", "t.jsonl", "--quiet"], capture_output=True, text=True)
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "--beir" in both.stderr
    cran = shared_data / "cranfield"
    bad_qrels = tmp_path / "bad.txt"
    bad_qrels.write_text("1 0 184 2\n1 0 29\n")
    (tmp_path / "empty").mkdir()
    for args, message in (
            (["--beir", str(tmp_path / "missing")], f"{tmp_path / 'missing'}: no such file or folder"),
            (["--beir", str(tmp_path / "empty")], f"{tmp_path / 'empty'}: BEIR folder has no corpus.jsonl"),
            (["--corpus", str(cran / "corpus.jsonl"), "--testset", str(cran / "queries.jsonl"), "--qrels",
              str(bad_qrels)], f"{bad_qrels}:2: field 'relevance': expected 4 fields")):
        bad = run_cli(["sweep", *args, "--quiet", "--out",
                       str(tmp_path / "t")], capture_output=True, text=True)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and message in bad.stderr, bad.stderr
    # a BEIR queries file as --testset with --qrels: the same output as --beir (what is read is the
    # point, not the size: the first 30 questions keep it cheap; the cost of a sweep is per
    # question)
    small = tmp_path / "cran-small"
    (small / "qrels").mkdir(parents=True)
    (small / "corpus.jsonl").symlink_to(cran / "corpus.jsonl")
    (small / "queries.jsonl").write_text("".join((cran / "queries.jsonl").read_text().splitlines(True)[:30]))
    (small / "qrels" / "test.tsv").write_text((cran / "qrels" / "test.tsv").read_text())
    grid = ["--chunk-size", "0,400", "--overlap", "0", "--permutations", "500", "--no-html", "--quiet"]
    beir = run_cli(["sweep", "--beir", str(small), *grid, "--out", str(tmp_path / "b")],
                   capture_output=True, text=True)
    same = run_cli(["sweep", "--corpus", str(small / "corpus.jsonl"), "--testset", str(small / "queries.jsonl"),
                    "--qrels", str(small / "qrels" / "test.tsv"), *grid, "--out", str(tmp_path / "u")],
                   capture_output=True, text=True)
    assert beir.returncode == 0 and same.returncode == 0, beir.stderr + same.stderr
    assert "2 configurations, 30 questions, 1400 documents" in beir.stdout
    assert same.stdout == beir.stdout


def test_cli_never_overwrites_a_strangers_file(tmp_path):
    """--out: a rerun into the sweep's own folder needs no --force; a file rankwise did not write is
    refused (one line, exit 2, nothing run) unless --force."""
    out = tmp_path / "s"
    args = ["sweep", "--chunk-size", "600", "--overlap", "0", "--retriever", "bm25", "--out", str(out), "--quiet"]
    first = run_cli(args, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert json.loads((out / "sweep.json").read_text())["generator"] == "rankwise sweep"
    again = run_cli(args, capture_output=True, text=True)  # every file there is ours
    assert again.returncode == 0, again.stderr
    (out / "report.html").write_text("<!DOCTYPE html><p>my own notes</p>")
    refused = run_cli(args, capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "report.html" in refused.stderr
    assert "--force" in refused.stderr and (out / "report.html").read_text().endswith("my own notes</p>")
    forced = run_cli([*args, "--force"], capture_output=True, text=True)
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "sweep.json").read_text())["rows"][0]["label"] == "bm25 recursive 600/0"


# --------------------------------------------------------------------------- the report read as a
# grid (browser)

LAYOUT_JS = r"""
(() => {
  const wide = [], cut = [];
  for (const card of document.querySelectorAll('section.card')) {
    const c = card.getBoundingClientRect();
    for (const el of card.querySelectorAll('*')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.left < c.left - 0.5 || r.right > c.right + 0.5)
        wide.push(card.id + ' ' + el.tagName + ' ' + Math.round(r.width) + 'px in ' + Math.round(c.width) + 'px');
    }
  }
  for (const svg of document.querySelectorAll('svg.chart')) {
    const s = svg.getBoundingClientRect();
    if (s.width === 0) continue;
    for (const t of svg.querySelectorAll('text, tspan')) {
      const r = t.getBoundingClientRect();
      if (r.width === 0) continue;
      if (r.left < s.left - 0.5 || r.right > s.right + 0.5 || r.top < s.top - 0.5 || r.bottom > s.bottom + 0.5)
        cut.push(t.textContent);
    }
  }
  return JSON.stringify({wide: wide, cut: cut});
})()
"""


@pytest.fixture(scope="module")
def grid_sweep(tmp_path_factory):
    """10 configurations: 5 chunk sizes x (bm25, bm25 reranked shortest-chunk-first), a grid for the
    heat map."""
    out = tmp_path_factory.mktemp("grid")
    res = sweep("kestrel", chunk_sizes=[300, 400, 500, 600, 800], overlaps=[0], retrievers=["bm25", "bm25+rerank"],
                rerank_model=lambda q, t: -len(t), rerank_top_n=10, permutations=5000, out=out, progress=False)
    return res, out


def test_grid_rows_are_chunkings_and_columns_retrievers(grid_sweep):
    res, _ = grid_sweep
    grid = res.grid()
    assert grid["rows"] == [f"recursive {n}/0" for n in (300, 400, 500, 600, 800)]
    assert grid["columns"] == ["bm25", "bm25+rerank"]
    assert grid["cells"]["recursive 500/0"]["bm25+rerank"] == "bm25+rerank recursive 500/0"


@pytest.mark.browser
def test_sweep_report_reads_as_a_grid_at_1280_and_1920(grid_sweep, tmp_path):
    import os

    from _chromium import Chromium, find_chromium

    if find_chromium() is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the sweep report test needs chromium (CI is set, so this is a failure, not a skip)")
        pytest.skip("needs chromium")
    res, out = grid_sweep
    with Chromium.start(tmp_path) as browser:
        page = browser.open(out / "report.html")
        assert page.console_errors == []
        # the heat map comes first, above the tables: rows = chunkings, columns = retrievers
        order = json.loads(page.evaluate("JSON.stringify(Array.from(document.querySelectorAll('section.card'))"
                                         ".map(e => e.id))"))
        assert order[:2] == ["grid", "summary"]
        metric = res.metrics[0]
        cells = json.loads(page.evaluate(
            f"JSON.stringify(Array.from(document.querySelectorAll('#grid .metric-panel[data-metric=\"{metric}\"] "
            f"table.heatmap tbody tr')).map(tr => [tr.querySelector('th').textContent, "
            f"Array.from(tr.querySelectorAll('td')).map(td => [td.dataset.system, Number(td.dataset.mean), "
            f"td.querySelector('.mark').textContent])]))"))
        assert [row for row, _ in cells] == res.grid()["rows"]
        marks = set()
        for row, tds in cells:
            for col, (label, mean, mark) in zip(["bm25", "bm25+rerank"], tds, strict=True):
                assert label == res.grid()["cells"][row][col] and mean == res.means[label][metric]
                delta, _, sig = res.significance(label, metric)
                expected = "base" if label == res.baseline else ("\u25B2*" if delta > 0 else "\u25BC*") if sig else ""
                assert mark == expected, (label, mark, expected)
                marks.add(mark)
        assert "\u25BC*" in marks and "base" in marks  # the shortest-first reranker loses significantly
        # the metric picker switches the heat map
        other = res.metrics[1]
        page.evaluate(f"(() => {{ const s = document.getElementById('metric-select'); s.value = '{other}'; "
                      f"s.dispatchEvent(new Event('change')); }})()")
        shown = json.loads(page.evaluate("JSON.stringify(Array.from(document.querySelectorAll('#grid .metric-panel'))"
                                         ".filter(e => !e.hidden).map(e => e.dataset.metric))"))
        assert shown == [other]
        for width in (1280, 1920):
            page.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 1000, "deviceScaleFactor": 1,
                                                             "mobile": False})
            layout = json.loads(page.evaluate(LAYOUT_JS))
            assert layout["wide"] == [], (width, layout["wide"][:5])  # nothing wider than its card
            assert layout["cut"] == [], (width, layout["cut"][:5])  # chart titles and labels whole
        titles = json.loads(page.evaluate(
            f"JSON.stringify(Array.from(document.querySelectorAll('#deltas .metric-panel[data-metric=\"{metric}\"] "
            f"svg text.title')).map(t => Array.from(t.querySelectorAll('tspan')).map(s => s.textContent).join(' ')))"))
        expected = []
        for cfg in res.configs[1:]:
            delta, _, sig = res.significance(cfg.label, metric)
            expected.append(f"{cfg.label} \u2212 {res.baseline}: {metric} per query (mean {signed(delta)}"
                            f"{' *' if sig else ''})")
        assert titles == expected  # whole: the mean and the significance mark included
        assert not re.search(r"(?<![\d.])-0\.0000(?!\d)", page.evaluate("document.body.textContent"))


def test_a_difference_that_rounds_to_zero_has_no_sign():
    assert [signed(x) for x in (-0.0, -1e-17, 0.0, 4e-5, -4e-5, 0.00005, -0.25)] == \
        ["0.0000", "0.0000", "0.0000", "0.0000", "0.0000", "+0.0001", "-0.2500"]


def _same_comparison(got, want) -> None:
    """Two comparisons equal to the last bit (NaN where undefined in both)."""
    import numpy as np

    assert (got.systems, got.baseline, got.metrics, got.query_ids, got.settings) == \
        (want.systems, want.baseline, want.metrics, want.query_ids, want.settings)
    assert all(np.array_equal(got.values[s], want.values[s], equal_nan=True) for s in want.systems)
    assert repr(got.means) == repr(want.means) and repr(got.comparisons) == repr(want.comparisons)
    assert got.summary == want.summary


@pytest.mark.parametrize("which", ["result", "cranfield_sweep"])
def test_the_sweeps_comparison_is_compare_rag_on_its_records(which, request):
    """The same numbers by two roads: the sweep compares its cells from the results it scored them
    with (``compare_results``); ``compare_records`` (``rankwise compare-rag``) on the records it
    wrote gives the same comparison — means, deltas, p-values, intervals, counts and warnings.
    Chunks with span verdicts, and documents with qrels."""
    from rankwise.analysis.compare import compare_records

    res, out = request.getfixturevalue(which)
    relevance = res.settings["relevance"]
    files = {c.label: str(out / "records" / f"{c.label.replace(' ', '_').replace('/', '-')}.jsonl")
             for c in res.configs}
    again = compare_records(files, relevance, res.metrics, baseline=res.baseline,
                            permutations=res.settings["permutations"], seed=res.settings["seed"],
                            correction=res.settings["correction"], alpha=res.settings["alpha"])
    _same_comparison(res.comparison, again)
    assert len(res.comparison.comparisons) == (len(res.configs) - 1) * len(res.metrics)


def test_sweep_keywords_are_the_spec_fields_with_its_defaults():
    """sweep() names every SweepSpec field as an explicit keyword, default for default (no
    **options)."""
    import dataclasses
    import inspect

    from rankwise.workflows.sweep_run import SweepSpec

    params = inspect.signature(sweep).parameters
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    keywords = {n: p.default for n, p in params.items() if p.kind is p.KEYWORD_ONLY and n not in ("qrels", "split")}
    fields = {f.name: f.default for f in dataclasses.fields(SweepSpec)}
    assert keywords == fields


def test_sweep_and_run_sweep_give_the_same_numbers():
    from rankwise.workflows.sweep_run import SweepSpec, run_sweep

    corpus = {"d1": "BM25 ranks by term frequency.", "d2": "Dense models embed text.", "d3": "Term weights."}
    questions, qrels = {"q1": "term frequency", "q2": "embed text"}, {"q1": {"d1": 1, "d3": 1}, "q2": {"d2": 2}}
    a = sweep(corpus, questions, qrels=qrels, chunk_sizes=[0, 12], overlaps=[0], progress=False, permutations=200)
    b = run_sweep(corpus, questions, SweepSpec(chunk_sizes=(0, 12), overlaps=(0,), progress=False, permutations=200),
                  qrels=qrels)
    assert a.means == b.means and [c.label for c in a.configs] == [c.label for c in b.configs]
