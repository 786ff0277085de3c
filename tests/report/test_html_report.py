"""The HTML report, opened in a real headless Chromium (Debian `chromium`) over the DevTools
protocol.

Skipped only when chromium (or websocket-client) is missing AND $CI is unset; under CI a missing
browser fails.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from click.testing import CliRunner

from _chromium import Chromium, find_chromium
from _synthetic_runs import qrels_dict, system_run, write_trec
from rankwise.analysis.compare import compare, compare_records
from rankwise.analysis.ksweep import ksweep, ksweep_records
from rankwise.analysis.probe import probe_records
from rankwise.cli import main
from rankwise.data.records import Verdict
from rankwise.metrics.rag import evaluate_rag
from rankwise.report.html import render_html_report, write_html_report

METRICS = ["ndcg@10", "map", "precision@10"]


@pytest.fixture(scope="module")
def browser_ok():
    missing = []
    if find_chromium() is None:
        missing.append("chromium (apt-get install chromium)")
    try:
        import websocket  # noqa: F401
    except ImportError:
        missing.append("websocket-client (pip install websocket-client)")
    if missing:
        message = "HTML report browser test needs " + " and ".join(missing)
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
        pytest.skip(message)


@pytest.fixture(scope="module")
def cranfield(shared_data):
    base = shared_data / "cranfield"
    qrels_path = base / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    runs = {"bm25": system_run(qrels, strength=0.6, seed=1), "dense": system_run(qrels, strength=1.0, seed=2),
            "hybrid": system_run(qrels, strength=0.6, seed=3)}
    queries = {}
    for line in (base / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        queries[obj["_id"]] = obj["text"]
    documents = {}
    for line in (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        documents[obj["_id"]] = obj["text"]
    return qrels_path, runs, queries, documents


def js_list(page, selector: str, expression: str):
    return page.evaluate(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => {expression})")


def visible_metrics(page, selector: str) -> list[str]:
    return js_list(page, selector, "getComputedStyle(e).display === 'none' ? null : e.dataset.metric")


@pytest.mark.browser
def test_runs_report_in_chromium(browser_ok, cranfield, tmp_path):
    qrels_path, runs, queries, documents = cranfield
    result = compare(qrels_path, list(runs.values()), METRICS, names=list(runs))
    sweep = ksweep(qrels_path, list(runs.values()), "ndcg", max_k=15, names=list(runs))
    path = write_html_report(tmp_path / "report.html", result, sweeps=[sweep], runs=runs, qrels=qrels_path,
                             queries=queries, documents=documents, title="Cranfield: bm25 vs dense vs hybrid")
    html = path.read_text(encoding="utf-8")
    # one self-contained file: nothing fetched from anywhere
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<link" not in html and "@import" not in html

    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)
        assert page.evaluate("document.documentElement.dataset.ready") == "1"
        assert page.console_errors == []
        assert page.requests == [path.resolve().as_uri()]
        assert page.evaluate("document.title") == "Cranfield: bm25 vs dense vs hybrid"

        # summary: every mean shown equals the computed one
        cells = js_list(page, "#summary-table td[data-mean]",
                        "[e.dataset.system, e.dataset.metric, e.querySelector('.mean').textContent, e.dataset.mean]")
        assert len(cells) == len(runs) * len(METRICS)
        for system, metric, shown, exact in cells:
            assert shown == f"{result.means[system][metric]:.4f}"
            assert float(exact) == result.means[system][metric]
        # significance marks: one per significant comparison, pointing the right way
        marks = js_list(page, "#summary-table td[data-significant]",
                        "[e.dataset.system, e.dataset.metric, e.querySelector('.mark').textContent]")
        for system, metric, mark in marks:
            c = result.comparison(system, metric)
            assert mark == (("\u25B2*" if c.delta > 0 else "\u25BC*") if c.significant else "n.s.")
        assert any(m[2] == "\u25B2*" for m in marks) and any(m[2] == "n.s." for m in marks)

        # charts: the sweep, per-query deltas (metrics x candidates) and box plots (metrics), all
        # rendered
        n_svg = page.evaluate("document.querySelectorAll('svg.chart').length")
        assert n_svg == 1 + len(METRICS) * 2 + len(METRICS)
        sizes = js_list(page, "#ksweep svg.chart, #deltas .metric-panel:not([hidden]) svg.chart",
                        "e.getBoundingClientRect().height")
        assert len(sizes) == 3 and all(h > 200 for h in sizes)
        assert page.evaluate("document.querySelectorAll('#ksweep polyline.series').length") == 3
        n_bars = page.evaluate("document.querySelectorAll('#deltas .metric-panel:not([hidden]) rect.bar').length")
        assert n_bars == 2 * 225
        # the metric selector switches the per-query and distribution panels
        assert [m for m in visible_metrics(page, "#deltas .metric-panel") if m] == ["ndcg@10"]
        page.evaluate("(() => { const s = document.getElementById('metric-select'); s.value = 'map';"
                      " s.dispatchEvent(new Event('change')); })()")
        assert [m for m in visible_metrics(page, "#deltas .metric-panel") if m] == ["map"]
        assert [m for m in visible_metrics(page, "#distributions .metric-panel") if m] == ["map"]

        # drill-down: every query, largest |dense - bm25| first; opening one shows documents and
        # grades
        qids = js_list(page, "details.query", "e.dataset.qid")
        assert len(qids) == 225
        deltas = abs(result.deltas("dense", "ndcg@10"))
        assert deltas[result.query_ids.index(qids[0])] == deltas.max()
        first = qids[0]
        page.evaluate(f"document.querySelector('details.query[data-qid=\"{first}\"]').open = true")
        page.evaluate("new Promise(r => setTimeout(r, 100))")
        texts = js_list(page, f"details.query[data-qid=\"{first}\"] .system[data-system=\"dense\"] .chunk-text",
                        "e.textContent")
        top = sorted(runs["dense"][first].items(), key=lambda kv: (-kv[1], kv[0]))[:10]
        assert texts[0] == documents[top[0][0]][:2400]
        grades = js_list(page, f"details.query[data-qid=\"{first}\"] .system[data-system=\"dense\"] .badge",
                         "e.textContent")
        judged = qrels_dict(qrels_path)[first]
        assert grades[0] == (f"qrels: {judged[top[0][0]]}" if top[0][0] in judged else "unjudged")
        assert queries[first] in page.evaluate(f"document.querySelector('details.query[data-qid=\"{first}\"]"
                                               f" .question').textContent")
        # the filter box
        page.evaluate("(() => { const f = document.getElementById('query-filter'); f.value = 'heat transfer';"
                      " f.dispatchEvent(new Event('input')); })()")
        shown = js_list(page, "details.query", "e.hidden ? null : e.dataset.qid")
        expected = [q for q in qids if "heat transfer" in queries[q].lower()]
        assert [q for q in shown if q] == expected and expected
        assert page.console_errors == []

        shot = page.screenshot(tmp_path / "report.png", height=2400)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


def _records_for(system_chunks: dict[str, list[str]], reasons: dict[str, str]) -> list:
    cases = [
        {"id": "paris", "question": "What is the capital of France?",
         "reference_contexts": ["paris is the capital of france"],
         "retrieved_contexts": system_chunks["paris"]},
        {"id": "water", "question": "At what temperature does water boil?",
         "reference_contexts": ["water boils at 100 degrees"],
         "retrieved_contexts": system_chunks["water"]},
        {"id": "moon", "question": "Who first walked on the Moon?",
         "reference_contexts": ["neil armstrong was the first person to walk on the moon"],
         "retrieved_contexts": system_chunks["moon"]},
    ]
    records = evaluate_rag(cases, "containment", k=3).records
    for rec in records:  # a second verdict source with reasons, as a human annotator would give
        for chunk in rec.chunks:
            relevant = chunk.verdicts["containment"].verdict
            chunk.verdicts["human"] = Verdict(relevant, reason=reasons.get(chunk.text or "", "not about it"))
    return records


@pytest.mark.browser
def test_records_report_in_chromium(browser_ok, tmp_path):
    reasons = {"Paris is the capital of France.": "states the answer outright",
               "Water boils at 100 degrees at sea level.": "gives the boiling point"}
    bm25 = _records_for({"paris": ["Lyon is in France.", "Paris is the capital of France.", "Rome."],
                         "water": ["Ice melts at 0 degrees.", "Steam is hot.", "Water boils at 100 degrees at sea level."],
                         "moon": ["The Moon orbits Earth.", "Mars is red.", "Jupiter is big."]}, reasons)
    dense = _records_for({"paris": ["Paris is the capital of France.", "Lyon is in France.", "Rome."],
                          "water": ["Water boils at 100 degrees at sea level.", "Ice melts at 0 degrees.", "Steam."],
                          "moon": ["Neil Armstrong was the first person to walk on the Moon.", "Mars.", "Venus."]},
                         reasons)
    sets = {"bm25": bm25, "dense": dense}
    result = compare_records(sets, "containment", ["wcp@3", "precision@3"])
    sweep = ksweep_records(sets, "containment", "wcp", max_k=3)
    path = write_html_report(tmp_path / "rag.html", result, sweeps=[sweep], records=sets,
                             probe_sources=["containment", "human"])
    probe = probe_records(dense, ["containment", "human"], ["wcp@3", "precision@3"])  # the compared metrics

    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)
        assert page.console_errors == []
        assert page.requests == [path.resolve().as_uri()]
        cells = js_list(page, "#summary-table td[data-mean]", "[e.dataset.system, e.dataset.metric, e.dataset.mean]")
        assert {(s, m): float(v) for s, m, v in cells} == {(s, m): result.means[s][m] for s in sets
                                                           for m in result.metrics}
        # drill-down with chunk text, verdict badges and reasons
        page.evaluate("document.querySelector('details.query[data-qid=\"paris\"]').open = true")
        dense_block = "details.query[data-qid=\"paris\"] .system[data-system=\"dense\"]"
        assert js_list(page, f"{dense_block} .chunk-text", "e.textContent")[0] == "Paris is the capital of France."
        badges = js_list(page, f"{dense_block} li:first-child .badge", "e.textContent")
        assert badges == ["containment: 1", "human: 1"]
        assert "states the answer outright" in js_list(page, f"{dense_block} li:first-child .reason",
                                                       "e.textContent")
        assert page.evaluate("document.querySelector('details.query[data-qid=\"paris\"] .ref').textContent") \
            .startswith("Reference passages:")
        # the probe's rank-vs-verdict summary, per system, equal to probe_records
        rows = js_list(page, "table.probe[data-system=\"dense\"] tbody tr",
                       "Array.from(e.cells).map(c => c.textContent)")
        by_metric = {r[0]: r[1:] for r in rows}
        for metric, means in probe.mean.items():
            assert by_metric[metric][0] == f"{means['containment']:.4f}"
            assert by_metric[metric][-1] == f"{means['verdict_effect']:.4f}"
        page.screenshot(tmp_path / "rag.png")
    assert (tmp_path / "rag.png").stat().st_size > 20_000


def test_cli_html_and_static_render(cranfield, tmp_path):
    qrels_path, runs, _, _ = cranfield
    paths = [write_trec(runs[n], tmp_path / f"{n}.trec") for n in ("bm25", "dense")]
    out = CliRunner().invoke(main, ["compare", str(qrels_path), *map(str, paths), "-m", "ndcg@10",
                                    "--permutations", "500", "--html", str(tmp_path / "r.html"),
                                    "--format", "json"])
    assert out.exit_code == 0, out.output
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="ksweep"' in html  # --html sweeps the first metric by default
    assert html.count('class="query"') == 225
    result = compare(qrels_path, paths, ["ndcg@10"], permutations=500)
    assert f'data-mean="{result.means["dense"]["ndcg@10"]!r}"' in html
    # the report escapes what it shows
    tricky = compare({"<q>": {"a": 1}}, [{"<q>": ["a"]}, {"<q>": ["b", "a"]}], "mrr", names=["<b>x", "y&z"])
    text = render_html_report(tricky, queries={"<q>": "<script>alert(1)</script>"})
    assert "<script>alert(1)" not in text and "&lt;b&gt;x" in text and "y&amp;z" in text


def _two_source_records() -> dict[str, list]:
    """Two systems, three cases; containment from the text, LLM verdicts set to differ from it."""
    llm = {"A": {"c1": [0, 0, 1], "c2": [0, 0, 0], "c3": [1, 0, 0]},
           "B": {"c1": [1, 0, 0], "c2": [1, 1, 1], "c3": [1, 1, 0]}}
    sets = {}
    for system, per_case in llm.items():
        cases = [{"id": cid, "question": f"question {cid}", "reference_contexts": ["the answer"],
                  "retrieved_contexts": ["here is the answer", "something else", "more of nothing"]}
                 for cid in per_case]
        records = evaluate_rag(cases, "containment", k=3, metrics=["precision@3", "mrr"]).records
        for rec in records:
            for chunk, v in zip(rec.chunks, per_case[rec.id], strict=True):
                chunk.verdicts["llm"] = Verdict(v, reason=f"llm says {v}")
        sets[system] = evaluate_rag(records, "llm", k=3, metrics=["precision@3", "mrr"]).records
    return sets


@pytest.mark.browser
def test_stripes_follow_the_selected_source_and_metric_reorders(browser_ok, tmp_path):
    sets = _two_source_records()
    result = compare_records(sets, "llm", ["precision@3", "mrr"], permutations=200)
    path = write_html_report(tmp_path / "sources.html", result, records=sets)

    def expected(source):
        return {(s, r.id): ["rel" if c.verdicts[source].verdict else "nonrel" for c in r.chunks]
                for s, recs in sets.items() for r in recs}

    llm, containment = expected("llm"), expected("containment")
    assert llm != containment  # the two sources disagree, so the stripes can tell them apart

    def stripes(page):
        out = {}
        for s, recs in sets.items():
            for r in recs:
                out[(s, r.id)] = js_list(page, f'details.query[data-qid="{r.id}"] .system[data-system="{s}"] '
                                               f"ol.chunks li", "e.className")
        return out

    def choose(page, select_id, value):
        page.evaluate(f"(() => {{ const s = document.getElementById('{select_id}'); s.value = '{value}';"
                      " s.dispatchEvent(new Event('change')); })()")

    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)
        assert page.console_errors == []
        # built from LLM verdicts: the stripes show the LLM's verdicts, not containment's
        assert page.evaluate("document.getElementById('source-select').value") == "llm"
        assert stripes(page) == llm
        choose(page, "source-select", "containment")
        assert stripes(page) == containment
        choose(page, "source-select", "llm")
        assert stripes(page) == llm
        selected = js_list(page, ".badge.selected", "e.dataset.source")
        assert selected and set(selected) == {"llm"}

        # drill-down order: largest |B - A| on the selected metric first
        def order():
            return js_list(page, "#query-list details.query", "e.dataset.qid")

        def by_delta(metric):
            d = dict(zip(result.query_ids, abs(result.deltas("B", metric)), strict=True))
            return sorted(result.query_ids, key=lambda q: (-d[q], result.query_ids.index(q)))

        assert order() == by_delta("precision@3") == ["c2", "c3", "c1"]
        choose(page, "metric-select", "mrr")
        assert order() == by_delta("mrr") == ["c2", "c1", "c3"]
        assert page.evaluate("document.getElementById('order-metric').textContent") == "mrr"
        choose(page, "metric-select", "precision@3")
        assert order() == ["c2", "c3", "c1"]
        assert page.console_errors == []
