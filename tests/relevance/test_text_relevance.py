"""Verdicts from ground-truth text (docs/metrics.md §4): containment, span, fuzzy; re-chunking;
character recall."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from rankwise.cli import main
from rankwise.data.records import records_from_testset
from rankwise.data.testset import Chunk, ReferencePassage
from rankwise.errors import InputError, RankwiseWarning
from rankwise.metrics.rag import evaluate_rag
from rankwise.relevance.text import (
    contains_match,
    evidence_chars,
    fuzzy_similarity,
    is_fragment,
    judge_text,
    normalize,
    span_match,
    span_overlap,
    spans_char_recall,
)

DOC = ("Orbit kettles boil water fast. "            # 0..31
       "To descale, fill with vinegar and water, wait one hour, then rinse three times. "  # 31..111
       "The warranty lasts two years. "             # 111..141
       "Limescale damage is not covered by the warranty. "  # 141..190
       "Toasters are a different product entirely and have crumb trays.")  # 190..
PASSAGES = [
    "To descale, fill with vinegar and water, wait one hour, then rinse three times.",
    "The warranty lasts two years.",
    "Limescale damage is not covered by the warranty.",
]


def passage_spans(doc_id="kettle"):
    out = []
    for p in PASSAGES:
        s = DOC.index(p)
        out.append({"text": p, "doc_id": doc_id, "start": s, "end": s + len(p)})
    return out


def fixed_chunks(text: str, size: int, first: int | None = None, doc_id: str = "kettle") -> list[dict]:
    """A plain fixed-size splitter (optionally a different first chunk size), exact offsets."""
    out, start = [], 0
    cut = first or size
    while start < len(text):
        end = min(len(text), start + cut)
        out.append({"id": f"{doc_id}@{start}-{end}", "text": text[start:end], "doc_id": doc_id, "start": start,
                    "end": end})
        start, cut = end, size
    return out


def test_normalize_and_containment():
    assert normalize("Ｆｕｌｌ\u00a0WIDTH\n\ttext ") == "full width text"
    assert contains_match("Intro. The WARRANTY   lasts two years. More.", "the warranty lasts two years")
    assert contains_match("warranty lasts", "The warranty lasts two years.")  # chunk inside the passage
    assert not contains_match("The warranty lasts three years.", "The warranty lasts two years.")
    assert not contains_match("", "x") and not contains_match("x", "   ")


def test_span_overlap_both_directions():
    assert span_overlap(("d", 0, 100), ("d", 50, 150)) == 50
    assert span_overlap(("d", 0, 100), ("e", 0, 100)) == 0
    assert span_match(("d", 0, 100), ("d", 50, 150))            # covers 50% of the passage
    assert not span_match(("d", 0, 100), ("d", 51, 151))        # 49% of the passage, 49% of the chunk
    assert span_match(("d", 0, 1000), ("d", 100, 200))          # chunk holds the passage
    assert span_match(("d", 100, 120), ("d", 0, 1000))          # passage holds the chunk (100% of chunk)
    assert not span_match(("d", 0, 1000), ("d", 950, 1100))     # 1/3 of passage, 5% of chunk
    assert span_match(("d", 0, 1000), ("d", 950, 1100), min_overlap=0.3)


def test_fuzzy_similarity():
    assert fuzzy_similarity("intro. The warranty lasts two years. more", "The warranty lasts two years.") == 1.0
    s = fuzzy_similarity("The warranty last 2 years", "The warranty lasts two years.")
    assert 0.7 < s < 0.95
    assert fuzzy_similarity("bananas", "The warranty lasts two years.") < 0.5


def test_char_recall_counts_each_character_once():
    chunks = [Chunk(doc_id="d", start=0, end=60), Chunk(doc_id="d", start=50, end=120), Chunk(doc_id="e", start=0,
                                                                                               end=10)]
    passages = [ReferencePassage(doc_id="d", start=40, end=80), ReferencePassage(doc_id="d", start=70, end=140)]
    # gold characters: 40..140 = 100; covered by the first chunk: 40..60 = 20; by both: 40..120 = 80
    assert spans_char_recall(chunks, passages, k=1) == 0.2
    assert spans_char_recall(chunks, passages, k=2) == 0.8
    assert spans_char_recall(chunks, passages) == 0.8
    assert spans_char_recall(chunks, [ReferencePassage("text only")]) == 0.0


def rich_case(chunks, case_id="q"):
    return {"id": case_id, "user_input": "How do I descale, and what is covered?",
            "retrieved_contexts": chunks, "reference_contexts": passage_spans()}


def test_containment_fails_where_a_passage_straddles_two_chunks_but_span_survives():
    # chunk boundary at 70 cuts the 'descale' passage (31..111) in two: 39 and 41 characters
    chunks = [{"id": "a", "text": DOC[0:70], "doc_id": "kettle", "start": 0, "end": 70},
              {"id": "b", "text": DOC[70:141], "doc_id": "kettle", "start": 70, "end": 141}]
    recs = records_from_testset([rich_case(chunks)])
    judge_text(recs, "containment")
    judge_text(recs, "span")
    # containment: chunk b holds the whole warranty passage; neither holds the descale passage
    assert recs[0].passages_found["containment"] == [[], [1]]
    # span: chunk b covers 41/80 of the descale passage (>= 0.5) and all of the warranty passage;
    # chunk a covers 39/80 of the descale passage, but the passage covers 39/70 of chunk a (>= 0.5)
    assert recs[0].passages_found["span"] == [[0], [0, 1]]
    assert recs[0].verdicts("containment") == [0, 1]
    assert recs[0].verdicts("span") == [1, 1]


def test_rechunking_changes_span_verdicts_only_where_the_chunk_moved():
    # chunking A: 50-character chunks; chunking B: the same first 100 characters, the rest re-cut at
    # 30
    a = fixed_chunks(DOC, 50)
    b = fixed_chunks(DOC[:100], 50) + [
        {**c, "id": f"kettle@{c['start'] + 100}", "start": c["start"] + 100, "end": c["end"] + 100}
        for c in fixed_chunks(DOC[100:], 30)]
    assert "".join(c["text"] for c in b) == DOC
    ra = evaluate_rag([rich_case(a)], "span", k=(len(a),))
    rb = evaluate_rag([rich_case(b)], "span", k=(len(b),))
    spans_a = [(c.start, c.end) for c in ra.records[0].chunks]
    spans_b = [(c.start, c.end) for c in rb.records[0].chunks]
    assert spans_b == [(0, 50), (50, 100), (100, 130), (130, 160), (160, 190), (190, 220), (220, 250), (250, 253)]
    # the two unmoved chunks keep their verdicts and matched passages
    for rank in (0, 1):
        assert spans_a[rank] == spans_b[rank]
        assert ra.records[0].chunks[rank].verdicts["span"] == rb.records[0].chunks[rank].verdicts["span"]
        assert ra.records[0].passages_found["span"][rank] == rb.records[0].passages_found["span"][rank]
    # the moved chunks are judged by where they now sit
    assert ra.records[0].verdicts("span") == [0, 1, 1, 1, 0, 0]
    assert ra.records[0].passages_found["span"] == [[], [0], [1], [2], [], []]
    assert rb.records[0].verdicts("span") == [0, 1, 1, 1, 1, 0, 0, 0]
    assert rb.records[0].passages_found["span"] == [[], [0], [1], [2], [2], [], [], []]
    # and the passages found, and the characters covered, survive the re-chunking
    for r, k in ((ra, len(a)), (rb, len(b))):
        assert r.mean[f"recall@{k}"] == 1.0
        assert r.mean[f"char_recall@{k}"] == 1.0
    # containment loses passages that no chunk holds whole (and that hold no chunk whole)
    ca = evaluate_rag([rich_case(a)], "containment", k=(len(a),))
    cb = evaluate_rag([rich_case(b)], "containment", k=(len(b),))
    assert ca.records[0].verdicts("containment") == [0, 1, 1, 0, 0, 0]
    assert cb.records[0].verdicts("containment") == [0, 1, 0, 0, 1, 0, 0, 0]
    assert ca.mean[f"recall@{len(a)}"] == cb.mean[f"recall@{len(b)}"] == pytest.approx(2 / 3)


def test_worked_example_ten_chunks_two_match_three_passages():
    chunks = [f"filler chunk number {i} about nothing" for i in range(10)]
    chunks[2] = "Intro. To descale, fill with vinegar and water, wait one hour, then rinse three times. Outro."
    chunks[6] = "the warranty LASTS two   years."
    r = evaluate_rag([{"id": "q", "retrieved_contexts": chunks, "reference_contexts": PASSAGES}], k=10)
    assert {m: round(r.mean[m], 2) for m in ("hit_rate@10", "precision@10", "recall@10", "f1@10")} == {
        "hit_rate@10": 1.0, "precision@10": 0.2, "recall@10": 0.67, "f1@10": 0.31}
    assert r.records[0].passages_found["containment"][2] == [0]
    assert r.records[0].passages_found["containment"][6] == [1]


def test_two_chunks_matching_one_passage_count_once_for_recall():
    # the second chunk lies inside the passage with 21 letters/digits (>= the evidence minimum of
    # 20)
    r = evaluate_rag([{"id": "q", "retrieved_contexts": ["The warranty lasts two years.", "warranty lasts two years",
                                                          "x"], "reference_contexts": PASSAGES}], k=3)
    assert r.mean["precision@3"] == pytest.approx(2 / 3)
    assert r.mean["recall@3"] == pytest.approx(1 / 3)
    assert r.mean["context_recall@3"] == pytest.approx(1 / 3)
    assert r.mean["ndcg@3"] <= 1.0


def test_fuzzy_mode_threshold():
    chunks = ["The warranty last 2 years, it says.", "bananas"]
    case = {"id": "q", "retrieved_contexts": chunks, "reference_contexts": ["The warranty lasts two years."]}
    loose = evaluate_rag([case], "fuzzy", k=2, threshold=0.7)
    strict = evaluate_rag([case], "fuzzy", k=2, threshold=0.95)
    assert loose.records[0].verdicts("fuzzy") == [1, 0]
    assert strict.records[0].verdicts("fuzzy") == [0, 0]
    sim = loose.records[0].chunks[0].verdicts["fuzzy"].meta["similarity"]["0"]
    assert 0.7 <= sim < 0.95


def test_missing_text_or_span_gives_missing_verdicts():
    recs = records_from_testset([{"id": "q", "retrieved_contexts": [{"id": "c1"}, {"text": "x", "id": "c2"}],
                                  "reference_contexts": ["x"]}])
    judge_text(recs, "containment")
    assert recs[0].chunks[0].verdicts["containment"].status == "missing"
    assert recs[0].status["containment"] == "incomplete: 1 missing verdict"
    judge_text(recs, "span")
    assert recs[0].status["span"] == "unscorable: no reference passage with (doc_id, start, end)"


def test_bad_parameters():
    recs = records_from_testset([{"id": "q", "retrieved_contexts": ["x"], "reference_contexts": ["x"]}])
    with pytest.raises(InputError, match="min_overlap"):
        judge_text(recs, "span", min_overlap=1.5)
    with pytest.raises(InputError, match="threshold"):
        judge_text(recs, "fuzzy", threshold=0)


# ------------------------------------------------------------------ a fragment is not evidence
# (issue 19.4)
FRAGMENTS = ["The warranty lasts two years.", ".", "the", "a", "Limescale damage is not covered by the warranty.",
             "bananas"]


def _ndcg(gains: list[int], n_ideal: int) -> float:
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    return dcg / sum(1 / math.log2(i + 2) for i in range(n_ideal))


@pytest.mark.parametrize("mode", ["containment", "fuzzy"])
def test_fragments_are_not_evidence(mode):
    case = {"id": "q", "retrieved_contexts": FRAGMENTS, "reference_contexts": PASSAGES}
    with pytest.warns(RankwiseWarning) as caught:
        r = evaluate_rag([case], mode, k=6)
    # ".", "the" and "a" lie inside every passage: before, P@6 0.83, recall 1, nDCG 1; now only the
    # two chunks that hold a whole passage count
    assert r.records[0].verdicts(mode) == [1, 0, 0, 0, 1, 0]
    assert r.mean["precision@6"] == pytest.approx(2 / 6)
    assert r.mean["recall@6"] == pytest.approx(2 / 3)
    assert r.mean["ndcg@6"] == pytest.approx(_ndcg([1, 0, 0, 0, 1, 0], 3))
    assert r.records[0].chunks[2].verdicts[mode].meta["fragment_of"] == [0, 1, 2]
    message = ("3 chunks (in 1 case) lie inside a reference passage but hold fewer than 20 letters/digits (e.g. "
               "case 'q' rank 2: '.'): fragments, counted as not relevant (lower --min-evidence-chars / "
               "min_evidence_chars to count them)")
    assert [str(w.message) for w in caught if str(w.message).startswith("3 chunks")] == [message]
    assert message in r.summary["warnings"]
    assert r.summary["parameters"]["min_evidence_chars"] == 20
    reason = r.records[0].chunks[2].verdicts[mode].reason
    assert reason.endswith("reference passages 1, 2, 3 but holds only 3 letters/digits, under the evidence minimum "
                           "of 20 (min_evidence_chars): a fragment, not evidence")
    # min_evidence_chars=0: any fragment counts again (the old rule, the numbers)
    old = evaluate_rag([case], mode, k=6, min_evidence_chars=0)
    assert old.records[0].verdicts(mode) == [1, 1, 1, 1, 1, 0]
    # nDCG: "." at rank 2 earns the two passages rank 1 did not hold; "the", "a" and the second
    # whole passage earn none (docs/context-metrics.md, "Redundant chunks"; before that rule nDCG
    # was 1.0 with an ideal ranking of 5 relevant chunks for 3 passages)
    assert (old.mean["precision@6"], old.mean["recall@6"], old.mean["ndcg@6"]) == pytest.approx(
        (5 / 6, 1.0, _ndcg([1, 1, 0, 0, 0, 0], 3)))
    assert not any(w.startswith("3 chunks") for w in old.summary.get("warnings", []))


def test_evidence_rule_in_reasons_and_short_passages():
    passages = ["Paris", "the warranty of every Orbit kettle lasts two years from purchase"]
    chunks = ["paris", "par", "warranty of every Orbit kettle", "every Orbit kettle"]
    recs = records_from_testset([{"id": "q", "retrieved_contexts": chunks, "reference_contexts": passages}])
    judge_text(recs, "containment")
    # a passage shorter than the minimum is enough in full; 26 letters/digits inside the long
    # passage count; "par" (3 of "paris"' 5) and "every orbit kettle" (16) are fragments
    assert recs[0].verdicts("containment") == [1, 0, 1, 0]
    reasons = [c.verdicts["containment"].reason for c in recs[0].chunks]
    assert reasons[0] == "contains reference passage 1 (chars 0\u20135 of the normalised chunk)"
    assert reasons[1] == ("lies inside reference passage 1 but holds only 3 letters/digits, under the 5 of the "
                          "passage, shorter than the evidence minimum of 20 (min_evidence_chars): a fragment, not "
                          "evidence")
    assert reasons[2] == ("lies inside reference passage 2 (chars 4\u201334 of the normalised passage; 26 "
                          "letters/digits, at least the evidence minimum of 20)")
    judge_text(recs, "containment", min_evidence_chars=10)
    assert recs[0].verdicts("containment") == [1, 0, 1, 1]
    judge_text(recs, "fuzzy")
    assert recs[0].verdicts("fuzzy") == [1, 0, 1, 0]
    assert recs[0].chunks[2].verdicts["fuzzy"].reason == (
        "similarity 1.00 to reference passage 2 >= threshold 0.8 (the chunk matched within the passage; 26 "
        "letters/digits, at least the evidence minimum of 20)")
    assert is_fragment("the", "the warranty lasts two years") and not is_fragment("paris", "paris")
    assert evidence_chars("a . b") == 2
    with pytest.raises(InputError, match="min_evidence_chars must be a whole number >= 0, got -1"):
        judge_text(recs, "containment", min_evidence_chars=-1)


def test_cli_min_evidence_chars_flag_and_one_warning(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"id": "q", "retrieved_contexts": FRAGMENTS, "reference_contexts": PASSAGES}) + "\n",
                    encoding="utf-8")
    res = CliRunner().invoke(main, ["eval-rag", str(path), "-k", "6", "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["mean"]["precision@6"] == pytest.approx(2 / 6)
    warned = [line for line in res.stderr.splitlines() if "letters/digits" in line]
    assert warned == ["rankwise: warning: 3 chunks (in 1 case) lie inside a reference passage but hold fewer than "
                      "20 letters/digits (e.g. case 'q' rank 2: '.'): fragments, counted as not relevant (lower "
                      "--min-evidence-chars / min_evidence_chars to count them)"]
    res = CliRunner().invoke(main, ["eval-rag", str(path), "-k", "6", "--format", "json", "--min-evidence-chars", "0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["mean"]["precision@6"] == pytest.approx(5 / 6)
    res = CliRunner().invoke(main, ["eval-rag", str(path), "--min-evidence-chars", "-1"])
    assert res.exit_code == 2 and "--min-evidence-chars" in res.stderr
    # compare-rag and gate take the flag too, and judge the same way
    other = tmp_path / "u.jsonl"
    other.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    res = CliRunner().invoke(main, ["compare-rag", str(path), str(other), "-m", "precision@6", "--format", "json",
                                    "--min-evidence-chars", "0"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["means"]["t"]["precision@6"] == pytest.approx(5 / 6)
    res = CliRunner().invoke(main, ["gate", "--baseline", str(path), "--candidate", str(other), "-m", "precision@6",
                                    "--format", "json"])
    assert res.exit_code == 0, res.output
    assert "3 chunks (in 1 case) lie inside a reference passage" in res.stderr


@pytest.mark.parametrize("mode", ["containment", "fuzzy"])
def test_min_evidence_chars_rejudges_stored_verdicts_only_when_given(mode, tmp_path):
    """Records written under the default rule (20) hold fragment verdicts of 0. Scored again without
    the option they are used as stored; with ``--min-evidence-chars 0`` they are re-judged by that
    rule (before: the option was silently ignored for records, and the stored verdicts scored)."""
    from click.testing import CliRunner

    from rankwise.cli import main
    from rankwise.data.records import write_records

    case = {"id": "q", "retrieved_contexts": FRAGMENTS, "reference_contexts": PASSAGES, "question": "q?"}
    with pytest.warns(RankwiseWarning):
        first = evaluate_rag([case], mode, k=6)
    path = write_records(first.records, tmp_path / "records.jsonl")
    with pytest.warns(RankwiseWarning):
        kept = evaluate_rag(str(path), mode, k=6)
    assert kept.records[0].verdicts(mode) == [1, 0, 0, 0, 1, 0]
    assert kept.summary["verdicts_from"] == "stored in the records"
    assert "min_evidence_chars" not in kept.summary["parameters"]  # stored: judged by whatever rule they were
    again = evaluate_rag(str(path), mode, k=6, min_evidence_chars=0)
    assert again.records[0].verdicts(mode) == [1, 1, 1, 1, 1, 0]
    assert again.summary["verdicts_from"] == "judged now"
    assert again.summary["parameters"]["min_evidence_chars"] == 0
    assert again.mean == evaluate_rag([case], mode, k=6, min_evidence_chars=0).mean
    for extra, want in (([], kept.mean["precision@6"]), (["--min-evidence-chars", "0"], 5 / 6)):
        out = CliRunner().invoke(main, ["eval-rag", str(path), "-r", mode, "-k", "6", "-m", "precision@6",
                                        "--format", "json", *extra])
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["mean"]["precision@6"] == pytest.approx(want)
