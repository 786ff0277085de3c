"""Rules every RAG number obeys, on random records, under every verdict source.

Random cases hold several chunks per reference passage and per document, overlapping chunks, the
same chunk twice, tied scores, graded verdicts (qrels grades for ids, 0-3 grades for human / LLM
verdicts), failed verdicts and empty lists. Under each source — ids by chunk id, ids by document
(``id_field="doc_id"``), containment, span, fuzzy, human labels and an LLM-like judge's stored
verdicts — two kinds of rule hold:

- every registered metric that declares a range (``Metric.value_range``) stays in it, per case;
- metamorphic rules: renaming ids consistently changes nothing; appending a chunk below K changes
  nothing at K; moving a relevant chunk up (past non-relevant ones) never lowers a rank metric; a
  copy of a chunk below it never raises recall (nor AP, nDCG, R-precision); splitting a chunk in two
  keeps every passage it found found (span); permuting the cases changes no mean.

Before the redundancy rule (docs/context-metrics.md, "Redundant chunks") the range test found AP =
2.0 under span (two overlapping chunks holding one passage) and nDCG > 1 under ids by document.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rankwise
from rankwise.data.records import CaseRecord, ChunkRecord, Verdict
from rankwise.metrics.registry import METRICS, parse_measure

SOURCES = ["ids", "ids_doc", "containment", "span", "fuzzy", "human", "llm"]
POOLED = ("human", "llm")
WORDS = 40
DOCS = {d: " ".join(f"{d.lower()}{w:02d}x{'q' * (w % 3)}" for w in range(WORDS)) for d in ("A", "B", "C")}
_STARTS = {d: [0] + [len(" ".join(text.split(" ")[:w])) + 1 for w in range(1, WORDS)] for d, text in DOCS.items()}
_ENDS = {d: [len(" ".join(text.split(" ")[: w + 1])) for w in range(WORDS)] for d, text in DOCS.items()}


def _span(doc: str, first: int, n: int) -> tuple[str, int, int]:
    """Words first .. first + n - 1 of a document as a character span."""
    last = min(first + n, WORDS) - 1
    return doc, _STARTS[doc][first], _ENDS[doc][last]


# a small pool of word positions and lengths, so that chunks overlap, repeat and hold passages often
words = st.tuples(st.sampled_from(sorted(DOCS)), st.sampled_from([0, 2, 3, 5, 8, 10, 12]),
                  st.sampled_from([2, 3, 4, 6, 9]))
spans = words.map(lambda w: _span(*w))


@st.composite
def case(draw) -> dict:
    """One case: reference passages; chunks, half of them a passage widened by a few words (so that
    several chunks hold one passage), each with the grade a human / LLM judge gives it; reference
    ids."""
    passages = draw(st.lists(st.tuples(words, st.sampled_from([None, 0, 1])), max_size=3))
    chunks = []
    for _ in range(draw(st.integers(0, 7))):
        if passages and draw(st.booleans()):
            (doc, first, n), _ = draw(st.sampled_from(passages))
            before, after = draw(st.integers(0, 2)), draw(st.integers(0, 3))
            w = (doc, max(0, first - before), n + before + after)
        else:
            w = draw(words)
        chunks.append((_span(*w), draw(st.integers(0, 3))))
    return {
        "passages": [(_span(*w), hop) for w, hop in passages],
        "chunks": chunks,
        "ref_ids": draw(st.lists(spans, max_size=3)),  # ids by chunk id: reference chunk ids (some never retrieved)
        "ref_docs": draw(st.lists(st.sampled_from(["A", "B", "C", "Z"]), max_size=2)),
        "qrels": draw(st.dictionaries(spans, st.integers(-1, 3), max_size=3)),  # graded ids, some below the level
        "scores": draw(st.lists(st.sampled_from([0.9, 0.5, 0.5, 0.1]), min_size=7, max_size=7)),  # ties
        "failed": draw(st.integers(-1, 6)),  # an LLM verdict that failed at this rank (-1: none)
    }


chunk = st.tuples(spans, st.integers(0, 3))  # (span, grade a human / LLM judge gives it)
cases_st = st.lists(case(), min_size=1, max_size=3)


def _first_scorable(cases: list[dict]) -> list[dict]:
    """The first case gets a passage, a chunk and a reference id (grade 3), so that some case can be
    scored."""
    first = dict(cases[0])
    first["passages"] = first["passages"] or [(_span("A", 2, 3), None)]
    first["chunks"] = first["chunks"] or [(_span("A", 0, 6), 1)]
    first["ref_ids"] = first["ref_ids"] or [first["chunks"][0][0]]
    first["ref_docs"] = first["ref_docs"] or ["A"]
    first["qrels"] = {**first["qrels"], first["ref_ids"][0]: 3}  # relevant at level 2 too
    return [first, *cases[1:]]


def _cid(span: tuple[str, int, int], ren=str) -> str:
    return f"{ren(span[0])}:{span[1]}-{span[2]}"


def build(cases: list[dict], source: str, *, ren=str, case_ids=None, failures: bool = False) -> tuple[list, dict]:
    """The cases as evaluate_rag's input under ``source``, and its keyword arguments.

    ``ren`` renames every document (and so every chunk id); ``case_ids`` names the cases.
    """
    case_ids = case_ids or [f"c{i}" for i in range(len(cases))]
    out, qrels = [], {}
    for cid, c in zip(case_ids, cases, strict=True):
        scores = sorted(c["scores"], reverse=True)
        chunks = [{"id": _cid(s, ren), "text": DOCS[s[0]][s[1]:s[2]], "doc_id": ren(s[0]), "start": s[1],
                   "end": s[2], "score": scores[j % len(scores)]} for j, (s, _) in enumerate(c["chunks"])]
        passages = []
        for s, hop in c["passages"]:
            p = {"text": DOCS[s[0]][s[1]:s[2]], "doc_id": ren(s[0]), "start": s[1], "end": s[2]}
            if hop is not None:
                p["hop"] = hop
            passages.append(p)
        if source in POOLED:
            chunk_records = []
            for j, (ch, (_, grade)) in enumerate(zip(chunks, c["chunks"], strict=True)):
                v = (Verdict(None, status="failed", error="timeout") if failures and j == c["failed"]
                     else Verdict(1 if grade > 0 else 0, grade=grade))
                chunk_records.append(ChunkRecord(rank=j + 1, id=ch["id"], text=ch["text"], doc_id=ch["doc_id"], start=ch["start"], end=ch["end"],
                                                 score=ch["score"], verdicts={source: v}))
            out.append(CaseRecord(cid, question="q", reference_contexts=[], chunks=chunk_records))
            continue
        item = {"id": cid, "question": "q", "retrieved_contexts": chunks}
        if source == "ids":
            item["reference_context_ids"] = [_cid(s, ren) for s in c["ref_ids"]]
            qrels[cid] = {_cid(s, ren): g for s, g in c["qrels"].items()}
        elif source == "ids_doc":
            item["reference_context_ids"] = [ren(d) for d in c["ref_docs"]]
        else:
            item["reference_contexts"] = passages
        out.append(item)
    kwargs: dict = {"relevance": "ids" if source == "ids_doc" else source}
    if source == "ids_doc":
        kwargs["id_field"] = "doc_id"
    if source == "ids" and any(qrels.values()):
        kwargs["labels"] = qrels
    return out, kwargs


def _bounded_names(source: str) -> list[str]:
    """Every registered metric with a declared range, at cutoffs 1, 3, 5 and without (default
    parameters)."""
    names = []
    for metric in METRICS.values():
        if metric.value_range is None or set(metric.requires) & {"prefs", "qrels_jg"}:
            continue
        if "char_spans" in metric.requires and source != "span":
            continue
        if metric.name in ("per_call", "call_mean", "merged"):
            call = ",call=0" if metric.name == "per_call" else ""
            names += [f"{metric.name}(metric={inner}{call})@3" for inner in ("map", "ndcg", "r_precision", "recall")]
            continue
        ks = [None] if metric.cutoff == "none" else ([1, 3, 5] if metric.cutoff == "required" else [None, 1, 3, 5])
        names += [metric.name if k is None else f"{metric.name}@{k}" for k in ks]
    names += ["wcp(ideal=attainable)@3", "acp(ragas_compat=true)@3", "f1_wcp(decay=linear)@5"]
    return names


def _evaluate(items, kwargs, metrics, **extra):
    return rankwise.evaluate_rag(items, metrics=metrics, **kwargs, **extra)


SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("source", SOURCES)
@SETTINGS
@given(cases=cases_st, level=st.sampled_from([1, 2]))
def test_every_bounded_metric_stays_in_its_range(source, cases, level):
    cases = _first_scorable(cases)
    items, kwargs = build(cases, source, failures=True)
    names = _bounded_names(source)
    extra = {"relevance_level": level} if source == "ids" else {}
    result = _evaluate(items, kwargs, names, min_evidence_chars=0, **extra)
    for name in names:
        lo, hi = parse_measure(name).metric.value_range
        for qid in result.per_query:
            value = result.per_query[qid][name]
            assert value is None or math.isnan(value) or lo - 1e-12 <= value <= hi + 1e-12, (
                f"{name} = {value} for {qid} under {source} (level {level}): {result.records}")
    for qid in result.per_query:  # relevant items retrieved never outnumber the relevant items there are
        assert result.per_query[qid]["num_rel_ret"] <= result.per_query[qid]["num_rel"]


# ------------------------------------------------------------------------------------- metamorphic
# rules
def rag_metrics(source: str, k: int = 3) -> list[str]:
    names = [f"{m}@{k}" for m in ("hit_rate", "precision", "recall", "f1", "ndcg", "map", "wcp", "acp",
                                  "context_recall", "relative_P")]
    names += ["mrr", "map", "ndcg", "r_precision", "bpref", "recall", "wcp(ideal=attainable)@3"]
    if source == "span":
        names.append(f"char_recall@{k}")
    return names


def _values(result, names) -> dict[str, dict[str, float]]:
    return {qid: {n: result.per_query[qid][n] for n in names} for qid in result.per_query}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.mark.parametrize("source", SOURCES)
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases=cases_st)
def test_renaming_ids_consistently_changes_nothing(source, cases):
    cases = _first_scorable(cases)
    names = rag_metrics(source)
    before = _evaluate(*build(cases, source), names, min_evidence_chars=0)
    ids = [f"renamed-{len(cases) - i}" for i in range(len(cases))]  # another byte order of the cases too
    after = _evaluate(*build(cases, source, ren=lambda d: f"doc/{d.lower()}", case_ids=ids), names,
                      min_evidence_chars=0)
    renamed = {f"c{i}": ids[i] for i in range(len(cases))}
    assert sorted(renamed[q] for q in before.per_query) == sorted(after.per_query)  # the same cases scored
    for qid in before.per_query:
        for n in names:
            assert _same(before.per_query[qid][n], after.per_query[renamed[qid]][n]), (n, source)
    for n in names:
        assert _same(before.mean[n], after.mean[n])


@pytest.mark.parametrize("source", SOURCES)
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases=cases_st, extra=chunk, k=st.sampled_from([1, 2, 3]))
def test_appending_a_chunk_below_k_changes_nothing_at_k(source, cases, extra, k):
    cases = _first_scorable(cases)
    span, grade = extra
    if source in POOLED:  # R counts the chunks judged relevant: a new one would be a new item
        grade = 0
    longer = [dict(c, chunks=c["chunks"] + [(span, grade)]) if len(c["chunks"]) >= k else c for c in cases]
    names = [n for n in rag_metrics(source, k) if n.endswith(f"@{k}") and "attainable" not in n]
    before = _values(_evaluate(*build(cases, source), names, min_evidence_chars=0), names)
    after = _values(_evaluate(*build(longer, source), names, min_evidence_chars=0), names)
    for qid in before:
        for n in names:
            assert _same(before[qid][n], after[qid][n]), (qid, n, source)


def _relevant_chunks(cases, source) -> list[list[int]]:
    items, kwargs = build(cases, source)
    result = _evaluate(items, kwargs, ["precision@1"], min_evidence_chars=0)
    by_id = {r.id: r for r in result.records}
    return [[v or 0 for v in by_id[f"c{i}"].verdicts(kwargs["relevance"])] for i in range(len(cases))]


RANK_METRICS = ["hit_rate@3", "precision@3", "recall@3", "f1@3", "ndcg@3", "map@3", "wcp@3", "acp@3",
                "context_recall@3", "mrr", "map", "ndcg", "r_precision", "bpref", "recall"]


@pytest.mark.parametrize("source", SOURCES)
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases=cases_st, pick=st.integers(0, 50))
def test_moving_a_relevant_chunk_up_never_lowers_a_rank_metric(source, cases, pick):
    cases = _first_scorable(cases)
    verdicts = _relevant_chunks(cases, source)[0]
    chunks = cases[0]["chunks"]
    movable = [j for j, v in enumerate(verdicts) if v >= 1 and j > 0 and verdicts[j - 1] == 0]
    if not movable:
        return
    j = movable[pick % len(movable)]
    i = j
    while i > 0 and verdicts[i - 1] == 0:  # past non-relevant chunks only: relevant ones keep their order
        i -= 1
    moved = chunks[:i] + [chunks[j]] + chunks[i:j] + chunks[j + 1:]
    before = _evaluate(*build(cases, source), RANK_METRICS, min_evidence_chars=0).per_query["c0"]
    after = _evaluate(*build([dict(cases[0], chunks=moved), *cases[1:]], source), RANK_METRICS,
                      min_evidence_chars=0).per_query["c0"]
    for n in RANK_METRICS:
        assert after[n] >= before[n] - 1e-12, (n, source, before[n], after[n], chunks, moved)


@pytest.mark.parametrize("source", SOURCES)
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases=cases_st, which=st.integers(0, 50), where=st.integers(0, 50))
def test_a_copy_of_a_chunk_never_raises_recall(source, cases, which, where):
    cases = _first_scorable(cases)
    chunks = cases[0]["chunks"]
    j = which % len(chunks)
    at = j + 1 + where % (len(chunks) - j)  # anywhere below the original
    copied = chunks[:at] + [chunks[j]] + chunks[at:]
    # not bpref: it divides by min(R, N), N the judged non-relevant chunks, which a copy of one
    # raises
    names = ["recall@1", "recall@3", "recall", "context_recall@5", "map", "ndcg", "r_precision", "map@3", "ndcg@3"]
    before = _evaluate(*build(cases, source), names, min_evidence_chars=0).per_query["c0"]
    after = _evaluate(*build([dict(cases[0], chunks=copied), *cases[1:]], source), names,
                      min_evidence_chars=0).per_query["c0"]
    for n in names:
        assert after[n] <= before[n] + 1e-12, (n, source, before[n], after[n], chunks, copied)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases=cases_st, which=st.integers(0, 50), cut=st.floats(0.01, 0.99))
def test_splitting_a_chunk_keeps_its_passages_found_under_span(cases, which, cut):
    cases = _first_scorable(cases)
    chunks = cases[0]["chunks"]
    j = which % len(chunks)
    (doc, start, end), grade = chunks[j]
    middle = start + max(1, min(end - start - 1, int((end - start) * cut)))
    halves = [((doc, start, middle), grade), ((doc, middle, end), grade)]
    split = chunks[:j] + halves + chunks[j + 1:]
    before = _evaluate(*build(cases, "span"), ["recall"]).records
    after = _evaluate(*build([dict(cases[0], chunks=split), *cases[1:]], "span"), ["recall"]).records
    found_before = set().union(*before[0].passages_found["span"])
    found_after = set().union(*after[0].passages_found["span"])
    assert found_before <= found_after, (chunks[j], halves, cases[0]["passages"])
    assert after[0].scores["span"]["recall"] >= before[0].scores["span"]["recall"]


@pytest.mark.parametrize("source", SOURCES)
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases=st.lists(case(), min_size=2, max_size=4), order=st.permutations(range(4)))
def test_permuting_the_cases_changes_no_mean(source, cases, order):
    cases = _first_scorable(cases)
    names = rag_metrics(source)
    items, kwargs = build(cases, source)
    perm = [i for i in order if i < len(items)]
    before = _evaluate(items, kwargs, names, min_evidence_chars=0)
    after = _evaluate([items[i] for i in perm], kwargs, names, min_evidence_chars=0)
    assert before.mean == after.mean or all(_same(before.mean[n], after.mean[n]) for n in names)
    assert np.array_equal(np.nan_to_num(before.per_query.values), np.nan_to_num(after.per_query.values))


# ----------------------------------------------------------------------------------- the worked
# example
def test_two_overlapping_chunks_holding_one_passage_are_one_relevant_item():
    """docs/context-metrics.md, "Redundant chunks": AP 2.0 before the rule, 1.0 after."""
    item = {"id": "q", "retrieved_contexts": [
        {"id": "rules#0", "doc_id": "rules", "start": 0, "end": 300, "text": "x" * 300},
        {"id": "rules#1", "doc_id": "rules", "start": 250, "end": 550, "text": "y" * 300}],
        "reference_contexts": [{"doc_id": "rules", "start": 260, "end": 290, "text": "x" * 30}]}
    names = ["map", "bpref", "r_precision", "ndcg@2", "recall@2", "hit_rate@2", "precision@2", "wcp@2", "acp@2"]
    r = rankwise.evaluate_rag([item], "span", metrics=names)
    assert {n: round(r.mean[n], 4) for n in names} == {
        "map": 1.0, "bpref": 1.0, "r_precision": 1.0, "ndcg@2": 1.0, "recall@2": 1.0, "hit_rate@2": 1.0,
        "precision@2": 1.0, "wcp@2": 1.0, "acp@2": 1.0}
    # the two chunks are the other way round: the second chunk alone earns the passage
    item["retrieved_contexts"].insert(0, {"id": "n", "doc_id": "other", "start": 0, "end": 9, "text": "z" * 9})
    r = rankwise.evaluate_rag([item], "span", metrics=names)
    assert round(r.mean["map"], 4) == 0.5 and round(r.mean["precision@2"], 4) == 0.5
    assert round(r.mean["ndcg@2"], 4) == 0.6309 and round(r.mean["acp@2"], 4) == 0.5


def test_chunks_of_one_relevant_document_are_one_item_under_ids_by_document():
    item = {"id": "q", "retrieved_contexts": [{"id": f"rules#{i}", "doc_id": "rules", "text": "t"} for i in range(3)],
            "reference_context_ids": ["rules"]}
    r = rankwise.evaluate_rag([item], "ids", id_field="doc_id", metrics=["ndcg@3", "map", "precision@3", "recall@3"])
    assert r.mean == {"ndcg@3": 1.0, "map": 1.0, "precision@3": 1.0, "recall@3": 1.0}


def test_the_command_line_applies_the_same_rule(tmp_path):
    """``eval-rag`` (and so compare-rag, gate, HTML and MLflow, which score through evaluate_rag)
    prints the rule's numbers: MAP 1.0, not 2.0, for two overlapping chunks holding one passage;
    nDCG 1.0, not 2.13, for three chunks of the one relevant document under ``-r ids --id-field
    doc_id``."""
    import json

    from click.testing import CliRunner

    from rankwise.cli import main

    chunks = [{"id": f"rules#{i}", "doc_id": "rules", "start": 250 * i, "end": 250 * i + 300, "text": "t" * 300}
              for i in range(3)]
    case = {"id": "q", "retrieved_contexts": chunks, "reference_context_ids": ["rules"],
            "reference_contexts": [{"doc_id": "rules", "start": 260, "end": 290, "text": "t" * 30}]}
    path = tmp_path / "ts.jsonl"
    path.write_text(json.dumps(case) + "\n", encoding="utf-8")
    runner = CliRunner()
    for args in (["-r", "span"], ["-r", "ids", "--id-field", "doc_id"]):
        r = runner.invoke(main, ["eval-rag", str(path), *args, "-m", "map,ndcg@3,bpref,precision@3",
                                 "--format", "json", "--quiet"])
        assert r.exit_code == 0, r.output
        mean = json.loads(r.stdout)["mean"]
        assert (mean["map"], mean["ndcg@3"], mean["bpref"]) == (1.0, 1.0, 1.0), (args, mean)
    assert mean["precision@3"] == 1.0  # every chunk holds the relevant document: relevant context
