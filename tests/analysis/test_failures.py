"""Why a question failed: planted failures of every class, headroom against a brute-force reorder,
and `rankwise explain` highlighting exactly the reference characters inside each chunk
(docs/failures.md)."""

from __future__ import annotations

import json
import random
from itertools import permutations

import pytest

from _inprocess import run_cli
from rankwise.analysis.diagnosis import diagnose
from rankwise.analysis.explain import explain_case, highlights
from rankwise.analysis.failures import FAILURE_CLASSES, failure_classes
from rankwise.analysis.headroom import headroom, ideal_order
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict, write_records
from rankwise.data.testset import Chunk, ReferencePassage
from rankwise.metrics.engine import evaluate_matrix
from rankwise.metrics.matrix import RelevanceMatrix
from rankwise.metrics.rag import evaluate_rag

random.seed(7)
DOC = "".join(random.choice("abcdefghij klmnop qrstuv wxyz.") for _ in range(4000))
OTHER = "".join(random.choice("ABCDEFGHIJ KLMNOP QRSTUV WXYZ.") for _ in range(4000))
DOCS = {"rules": DOC, "faq": OTHER}


def chunk(doc: str, start: int, end: int) -> dict:
    return {"id": f"{doc}#{start}", "doc_id": doc, "start": start, "end": end, "text": DOCS[doc][start:end]}


def passage(doc: str, start: int, end: int) -> dict:
    return {"doc_id": doc, "start": start, "end": end, "text": DOCS[doc][start:end]}


def filler(n: int, *, doc: str = "faq", at: int = 0) -> list[dict]:
    return [chunk(doc, at + 100 * i, at + 100 * i + 90) for i in range(n)]


def planted_cases() -> list[dict]:
    """One case per class the span source can decide (K = 10)."""
    return [
        {"id": "hit", "question": "h", "reference_contexts": [passage("rules", 100, 200)],
         "retrieved_contexts": [chunk("rules", 90, 210), *filler(4)]},
        {"id": "low", "question": "l", "reference_contexts": [passage("rules", 100, 200)],
         "retrieved_contexts": [*filler(29), chunk("rules", 90, 210)]},
        # the passage 100-200 cut in three: the two retrieved pieces hold 30% of it each, the middle
        # is not there
        {"id": "split", "question": "s", "reference_contexts": [passage("rules", 100, 200)],
         "retrieved_contexts": [chunk("rules", 0, 130), chunk("rules", 170, 300), *filler(3)]},
        {"id": "wrongchunk", "question": "w", "reference_contexts": [passage("rules", 100, 200)],
         "retrieved_contexts": [chunk("rules", 2000, 2300), *filler(3)]},
        # the passage's document is not in the corpus at all
        {"id": "absent", "question": "a", "reference_contexts": [{"doc_id": "gone", "start": 0, "end": 50,
                                                                   "text": "x" * 50}],
         "retrieved_contexts": filler(5)},
        {"id": "nogt", "question": "n", "retrieved_contexts": filler(5)},
    ]


def span_records():
    result = evaluate_rag(planted_cases(), "span", k=[1, 10], unscorable="skip")
    return result


def test_each_planted_case_gets_its_class():
    result = span_records()
    classes = failure_classes(result.records, "span", 10)
    assert classes.by_case == {"hit": "hit", "low": "ranked too low", "split": "split by chunking",
                               "wrongchunk": "right document, wrong chunk", "absent": "not retrieved",
                               "nogt": "no ground truth"}
    assert list(classes.counts) == list(FAILURE_CLASSES)
    assert sum(classes.counts.values()) == 6


def test_reranker_demotion_from_the_first_stage_list():
    before = evaluate_rag([{"id": "q", "reference_contexts": [passage("rules", 100, 200)],
                            "retrieved_contexts": [*filler(1), chunk("rules", 90, 210), *filler(10, at=1500)]}],
                          "span", k=10)
    after = evaluate_rag([{"id": "q", "reference_contexts": [passage("rules", 100, 200)],
                           "retrieved_contexts": [*filler(11), chunk("rules", 90, 210)]}], "span", k=10)
    assert failure_classes(after.records, "span", 10).by_case == {"q": "ranked too low"}
    demoted = failure_classes(after.records, "span", 10, before={r.id: r for r in before.records})
    assert demoted.by_case == {"q": "demoted by the reranker"}


def test_id_mismatch_and_disagreeing_sources():
    ids = evaluate_rag([{"id": "q", "reference_context_ids": ["rules"],
                         "retrieved_contexts": [chunk("rules", 0, 100), *filler(2)]}], "ids", k=5)
    assert ids.mean["hit_rate@5"] == 0.0
    assert failure_classes(ids.records, "ids", 5).by_case == {"q": "id mismatch"}
    fixed = evaluate_rag([{"id": "q", "reference_context_ids": ["rules"],
                           "retrieved_contexts": [chunk("rules", 0, 100), *filler(2)]}], "ids", k=5,
                         id_field="doc_id")
    assert failure_classes(fixed.records, "ids", 5, id_field="doc_id").by_case == {"q": "hit"}
    # a second source (a judge) on the same chunks that says the span hit is not relevant, and the
    # reverse
    records = span_records().records
    for r in records:
        for i, c in enumerate(r.chunks):
            same = c.verdicts["span"].verdict or 0
            planted = {"hit": 0, "absent": int(i == 0)}.get(r.id, same)
            c.verdicts["llm"] = Verdict(planted, reason="planted")
    classes = failure_classes(records, "span", 10)
    assert classes.by_case["hit"] == "sources disagree"
    assert classes.by_case["absent"] == "sources disagree"
    assert classes.by_case["nogt"] == "no ground truth"
    assert classes.by_case["low"] == "ranked too low" and classes.by_case["split"] == "split by chunking"


def _brute_force_best(record, source, measures):
    """Per measure, the best value over every ordering of the record's chunks (the engine scores
    each)."""
    best = dict.fromkeys(measures, -1.0)
    n = len(record.chunks)
    for order in permutations(range(n)):
        new = ideal_order(record, "none-such")  # a plain copy: no chunk is relevant to an unknown source
        new.chunks = [new.chunks[i] for i in order]
        for rank, c in enumerate(new.chunks, start=1):
            c.rank = rank
        new.passages_found = {s: [lists[i] for i in order] for s, lists in new.passages_found.items()}
        values = evaluate_matrix(RelevanceMatrix.from_records([new], source), measures).mean
        for m in measures:
            best[m] = max(best[m], values[m])
    return best


@pytest.mark.parametrize("seed", range(6))
def test_headroom_equals_a_brute_force_reorder(seed):
    rng = random.Random(seed)
    cases = []
    for q in range(4):
        refs = [passage("rules", 300 * p, 300 * p + 100) for p in range(rng.randint(1, 3))]
        chunks = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.5:
                p = rng.randrange(3)
                chunks.append(chunk("rules", 300 * p - 10 if p else 0, 300 * p + 110))
            else:
                chunks.append(chunk("faq", rng.randrange(3000), 3500))
        cases.append({"id": f"q{q}", "reference_contexts": refs, "retrieved_contexts": chunks})
    measures = ["hit_rate@3", "mrr", "ndcg@3", "recall@3", "precision@3", "context_recall@3"]
    result = evaluate_rag(cases, "span", metrics=measures)
    room = headroom(result)
    for m in measures:
        brute = sum(_brute_force_best(r, "span", [m])[m] for r in result.records) / len(result.records)
        assert room.reranked[m] == pytest.approx(brute, abs=1e-12), m
        assert room.reranked[m] >= room.today[m] - 1e-12


def test_headroom_sentence_and_shares():
    result = diagnose(span_records())
    room = result.summary["headroom"]
    # 5 cases in the means (the case without ground truth left out); 2 have nothing relevant in the
    # list
    assert room["cases"] == 5 and room["nothing_relevant_in_list"] == pytest.approx(3 / 5)
    assert room["split_by_chunking"] == pytest.approx(1 / 5)
    assert room["today"]["hit_rate@10"] == pytest.approx(1 / 5)
    assert room["perfect_reranker"]["hit_rate@10"] == pytest.approx(2 / 5)
    assert room["sentence"] == (f"a reranker over your top 30 could lift ndcg@10 from {room['today']['ndcg@10']:.2f} to "
                                f"at most {room['perfect_reranker']['ndcg@10']:.2f}; 60% of questions have nothing "
                                f"relevant in the top 30, which no reranker can fix; 20% have their passage split by "
                                f"chunking")
    assert room["perfect_reranker"]["ndcg@10"] == pytest.approx(2 / 5)


def test_highlights_are_exactly_the_reference_characters():
    rng = random.Random(3)
    for _ in range(200):
        ps, pe = sorted(rng.sample(range(0, 1000), 2))
        cs, ce = sorted(rng.sample(range(0, 1000), 2))
        got = highlights(Chunk(DOC[cs:ce], doc_id="rules", start=cs, end=ce),
                         [ReferencePassage(DOC[ps:pe], doc_id="rules", start=ps, end=pe)])
        lo, hi = max(cs, ps), min(ce, pe)
        if hi > lo:
            assert got == [(lo - cs, hi - cs, 0)]
            assert DOC[cs:ce][got[0][0]:got[0][1]] == DOC[lo:hi]
        else:
            assert got == []


def test_explain_command_table_and_json(tmp_path):
    result = diagnose(span_records())
    path = write_records(result.records, tmp_path / "records.jsonl")
    done = run_cli(["explain", path, "split", "-k", "10", "--format", "json"])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["failure_class"] == {"span": "split by chunking"} and out["first_relevant"] == {"span": None}
    assert out["items_found"] == {"span": [0, 1, None]}
    first, second = out["chunks"][0], out["chunks"][1]
    assert first["text"][slice(*first["highlights"][0][:2])] == DOC[100:130]
    assert second["text"][slice(*second["highlights"][0][:2])] == DOC[170:200]
    table = run_cli(["explain", path, "low", "-k", "10"], overrides={"RANKWISE_WIDTH": "160"})
    assert table.returncode == 0, table.stderr
    assert ("span: first relevant chunk at rank 30 (found by hit@K for K >= 30); 1 of 1 reference item found, the "
            "last at rank 30 (recall@K reaches 1/1 for K >= 30); failure class at K=10: ranked too low"
            in " ".join(table.stdout.split()))
    missing = run_cli(["explain", path, "nosuch"])
    assert missing.returncode == 2 and "no case 'nosuch' in the records" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_eval_rag_prints_and_writes_the_classes(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in planted_cases()))
    done = run_cli(["eval-rag", cases, "-r", "span", "-k", "1,10", "--format", "json", "--unscorable", "skip",
                    "--records", tmp_path / "rec.jsonl"])
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["summary"]
    assert summary["failure_classes"]["k"] == 10
    assert summary["failure_classes"]["counts"]["split by chunking"] == 1
    assert summary["failure_classes"]["counts"]["ranked too low"] == 1
    lines = (tmp_path / "rec.jsonl").read_text().splitlines()
    assert {json.loads(x)["id"]: json.loads(x)["failure_class"]["span"] for x in lines}["wrongchunk"] == \
        "right document, wrong chunk"
    table = run_cli(["eval-rag", cases, "-r", "span", "-k", "1,10", "--unscorable", "skip"],
                    overrides={"RANKWISE_WIDTH": "200"})
    assert "failure classes at K=10: hit 1; ranked too low 1; split by chunking 1; right document, wrong chunk 1; " \
           "not retrieved 1" in " ".join(table.stdout.split())


def test_explain_unknown_source_and_case_record_roundtrip(tmp_path):
    records = [CaseRecord("q", question="?", reference_context_ids=["c2"],
                          chunks=[ChunkRecord(rank=1, id="c1", verdicts={"ids": Verdict(0)})])]
    with pytest.raises(Exception, match=r"no verdicts from llm in case 'q' \(present: ids\)"):
        explain_case(records, "q", sources=["llm"])


def test_by_class_slices_eval_rag_and_compare_rag(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(c) + "\n" for c in planted_cases()))
    done = run_cli(["eval-rag", cases, "-r", "span", "-k", "10", "-m", "hit_rate@10", "--unscorable", "skip",
                    "--by", "class", "--format", "json"])
    assert done.returncode == 0, done.stderr
    slices = json.loads(done.stdout)["summary"]["slices"]
    assert slices["by"] == "failure class"
    assert [(s["name"], s["cases"], s["means"]["hit_rate@10"]["mean"]) for s in slices["slices"]] == [
        ("hit", 1, 1.0), ("ranked too low", 1, 0.0), ("split by chunking", 1, 0.0),
        ("right document, wrong chunk", 1, 0.0), ("not retrieved", 1, 0.0)]  # in the classes' order
    # a second system: every case found at rank 1; sliced by the baseline's classes
    better = [dict(c, retrieved_contexts=[chunk("rules", 90, 210), *c["retrieved_contexts"]][:30])
              if c.get("reference_contexts") and c["id"] != "absent" else c for c in planted_cases()]
    other = tmp_path / "better.jsonl"
    other.write_text("".join(json.dumps(c) + "\n" for c in better))
    both = run_cli(["compare-rag", cases, other, "--source", "span", "-m", "hit_rate@10", "--by", "class",
                    "--format", "json"])
    assert both.returncode == 0, both.stderr
    summary = json.loads(both.stdout)["summary"]
    assert summary["failure_classes"]["cases"]["by_case"]["low"] == "ranked too low"
    assert summary["failure_classes"]["better"]["by_case"]["low"] == "hit"
    assert "failure class of cases" in json.dumps(summary["slices"])


LAYOUT_JS = """(() => {
  const out = {overflow: document.documentElement.scrollWidth - window.innerWidth, wide: [], scrollers: [],
               charts: []};
  for (const card of document.querySelectorAll('section.card')) {
    const box = card.getBoundingClientRect();
    for (const e of card.querySelectorAll('*')) {
      if (e.closest('.table-wrap') || e.getClientRects().length === 0) continue;
      const r = e.getBoundingClientRect();
      if (r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1)) out.wide.push(e.tagName + '.' + e.className);
    }
    for (const svg of card.querySelectorAll('.charts svg')) {
      if (svg.getClientRects().length) out.charts.push(svg.getBoundingClientRect().width / (box.width - 40));
    }
  }
  for (const t of document.querySelectorAll('.chunk-text')) {
    const style = getComputedStyle(t);
    if (style.overflowY === 'auto' || style.overflowY === 'scroll') out.scrollers.push(t.textContent.slice(0, 30));
  }
  return out;
})()"""


@pytest.mark.browser
def test_drill_down_highlights_classes_and_layout_in_chromium(tmp_path):
    from _chromium import Chromium, find_chromium
    from rankwise.analysis.compare import compare_records
    from rankwise.report.html import write_html_report

    if find_chromium() is None:
        pytest.skip("chromium not installed") if not __import__("os").environ.get("CI") else pytest.fail("chromium")
    cases = planted_cases()
    cases[0]["retrieved_contexts"][0] = chunk("rules", 0, 1500)  # a long chunk holding the passage: collapsed
    base = evaluate_rag(cases, "span", k=[1, 10]).records
    better = evaluate_rag([dict(c, retrieved_contexts=c["retrieved_contexts"][::-1]) for c in cases], "span",
                          k=[1, 10]).records
    sets = {"base": base, "reversed": better}
    result = compare_records(sets, "span", ["hit_rate@10", "ndcg@10"])
    path = write_html_report(tmp_path / "report.html", result, records=sets, max_chunks=40, max_text=4000)
    with Chromium.start(tmp_path) as browser:
        page = browser.open(path)
        assert page.console_errors == []
        # the reference characters, exactly, inside each chunk (the split case: two pieces of
        # passage 1)
        page.evaluate("document.querySelectorAll('details.query').forEach(d => d.open = true)")
        marks = js(page, "details.query[data-qid=split] .system[data-system=base] .chunk-text mark",
                   "[e.textContent, e.dataset.passage]")
        assert marks == [[DOC[100:130], "1"], [DOC[170:200], "1"]]
        long_marks = js(page, "details.query[data-qid=hit] .system[data-system=base] .chunk-text.long mark",
                        "e.textContent")
        assert long_marks == [DOC[100:200]]
        # a case without ground truth is left out (as of the means), not shown as rows of 0.0000
        assert page.evaluate("document.querySelector('details.query[data-qid=nogt]')") is None
        # classes per system, the class filter with the worst first
        page.evaluate("{ const f = document.getElementById('class-filter'); f.value = 'ranked too low';"
                      "f.dispatchEvent(new Event('change')); }")
        shown = js(page, "details.query", "e.hidden ? null : e.dataset.qid")
        assert [q for q in shown if q] == ["low"]
        assert page.evaluate("document.getElementById('query-count').textContent") == "1 shown, worst first"
        page.evaluate("{ const f = document.getElementById('class-filter'); f.value = '';"
                      "f.dispatchEvent(new Event('change')); }")
        # the long chunk opens whole with its button; no chunk is a scroll box
        page.evaluate("document.querySelector('details.query[data-qid=hit] button.more').click()")
        assert page.evaluate("document.querySelector('details.query[data-qid=hit] .chunk-text.long')"
                             ".classList.contains('open')") is True
        for width in (1280, 1920):
            page.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                             "mobile": False})
            layout = page.evaluate(LAYOUT_JS)
            assert layout["overflow"] <= 0, (width, layout)
            assert layout["wide"] == [], (width, layout["wide"][:5])
            assert layout["scrollers"] == []
            assert layout["charts"] and min(layout["charts"]) > 0.9, (width, layout["charts"])
            shot = page.screenshot(tmp_path / f"drill-{width}.png", width=width)
            assert int.from_bytes(shot.read_bytes()[16:20], "big") == width  # the PNG's width: nothing wider


def js(page, selector: str, expression: str):
    return page.evaluate(f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => {expression})")


@pytest.mark.parametrize("cut", [True, False])
@pytest.mark.parametrize("source", ["span", "containment", "ids"])
def test_headroom_rescoring_only_the_moved_cases_equals_rescoring_every_case(source, cut):
    """Cases already in their best order keep today's per-case values; the means equal those of a
    matrix of every case in its best order, to the last digit (metrics with and without a cutoff).
    """
    rng = random.Random(7)
    cases = []
    for q in range(30):
        refs = [passage("rules", 300 * p, 300 * p + 100) for p in range(rng.randint(0, 3))]
        chunks = []
        for _ in range(rng.randint(0, 6)):
            p = rng.randrange(4)
            chunks.append(chunk("rules", 300 * p, 300 * p + 100) if rng.random() < 0.5
                          else chunk("faq", rng.randrange(3000), 3500))
        case = {"id": f"q{q}", "reference_contexts": refs, "retrieved_contexts": chunks}
        if source == "ids":
            case = {"id": f"q{q}", "retrieved_context_ids": [f"d{rng.randrange(6)}" for _ in chunks],
                    "reference_context_ids": [f"d{rng.randrange(6)}" for _ in refs]}
        cases.append(case)
    # metrics cut at K, taking no cutoff, and cut at each list's own depth (mrr, map, precision,
    # wcp)
    measures = ["hit_rate@3", "mrr@5", "map@5", "ndcg@5", "recall@3", "precision@2", "r_precision", "wcp@3",
                "acp@4", "context_recall@3"] + (["id_precision", "id_recall"] if source == "ids" else [])
    measures += [] if cut else ["mrr", "map", "precision", "wcp"]
    measures += ["char_recall@3", "char_recall"] if source == "span" else []
    result = evaluate_rag(cases, source, metrics=measures)
    room = headroom(result)
    scored = [r for r in result.records if r.id in result.per_query]
    every = evaluate_matrix(RelevanceMatrix.from_records([ideal_order(r, source) for r in scored], source),
                            result.measures).mean
    assert room.reranked == {m: every[m] for m in room.today if every[m] is not None}
    moved = sum(ideal_order(r, source).chunks != r.chunks for r in scored)
    assert 0 < moved < len(scored)  # both kinds of case are there


@pytest.mark.parametrize("seed", range(3))
def test_a_cases_values_never_depend_on_the_other_rows(seed):
    """Every metric that reads only the matrix, at its default cutoff and at K: a case scores the
    same alone and beside other cases of any length (what headroom's partial rescoring rests on)."""
    from rankwise.metrics.registry import METRICS

    rng = random.Random(seed)

    def record(name, n):
        chunks = [ChunkRecord(rank=i + 1, id=f"{name}{rng.randrange(4)}",
                              verdicts={"llm": Verdict(rng.randrange(4), grade=None)}) for i in range(n)]
        return CaseRecord(name, chunks=chunks)

    names = [n for n, m in METRICS.items() if not m.requires and m.cutoff != "required"
             and n not in ("num_q",)]  # num_q counts the queries of the matrix itself
    names += [f"{n}@3" for n, m in METRICS.items() if not m.requires and m.cutoff == "optional"]
    for _ in range(5):
        a = record("a", rng.randint(0, 5))
        others = [record(f"o{i}", rng.randint(0, 12)) for i in range(rng.randint(1, 3))]
        alone = evaluate_matrix(RelevanceMatrix.from_records([a], "llm"), names).per_query["a"]
        beside = evaluate_matrix(RelevanceMatrix.from_records([*others, a], "llm"), names).per_query["a"]
        differ = [n for n in names if alone[n] != beside[n] and not (alone[n] != alone[n] and beside[n] != beside[n])]
        assert differ == []
