"""Importers (Ragas, DeepEval, LlamaIndex, BEIR-style) map text contexts to corpus spans and count
the rest; exporters write Ragas' and DeepEval's shapes with span ids."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from _inprocess import run_cli
from rankwise.data.corpus import load_corpus
from rankwise.data.locate import locate, normalise
from rankwise.testsets.importers import export_testset, import_testset, read_foreign

REPO = Path(__file__).resolve().parents[2]
KESTREL = REPO / "src" / "rankwise" / "datasets" / "kestrel" / "corpus.jsonl"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


@pytest.fixture(scope="module")
def corpus():
    return load_corpus(KESTREL)


def pieces(corpus):
    """Three real passages of the corpus, and what splitters make of them."""
    doc = corpus["wal.md"].text
    a = doc[200:420]
    b = corpus["overview.md"].text[300:520]
    c = corpus["backup.md"].text[100:300]
    rejoined = " ".join(a.split())  # Ragas' splitter re-joins lines: not a substring any more
    mangled = c[:60] + c[62:]  # two characters lost: only a fuzzy match finds it
    return a, b, c, rejoined, mangled


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_spans(corpus, out: Path) -> None:
    for r in rows(out):
        for ref in r["reference_contexts"]:
            assert corpus[ref["doc_id"]].text[ref["start"]:ref["end"]] == ref["text"]


def test_ragas_multi_hop_prefixes_are_stripped_and_contexts_mapped(corpus, tmp_path):
    a, b, c, rejoined, mangled = pieces(corpus)
    assert rejoined not in corpus["wal.md"].text
    src = tmp_path / "ragas.jsonl"
    samples = [
        {"user_input": "What does the WAL do?", "reference_contexts": [f"<1-hop>\n\n{rejoined}", f"<2-hop>\n\n{b}"],
         "reference": "It logs.", "synthesizer_name": "multi_hop_abstract_query_synthesizer"},
        {"user_input": "Backups?", "reference_contexts": [mangled, "Text that is in no document of this corpus."],
         "reference": "Daily.", "synthesizer_name": "single_hop_specifc_query_synthesizer"},
    ]
    src.write_text("".join(json.dumps(s) + "\n" for s in samples))
    out = tmp_path / "ours.jsonl"
    s = import_testset(src, corpus, out=out)
    assert s.format == "ragas" and s.questions == 2 and s.contexts == 4
    assert dict(s.mapped) == {"normalised": 1, "exact": 1, "fuzzy": 1} and s.unmapped == 1
    got = rows(out)
    assert got[0]["reference_contexts"][0]["doc_id"] == "wal.md"
    assert got[0]["reference_contexts"][0]["start"] == 200 + (len(a) - len(a.lstrip()))
    start = corpus["overview.md"].text.index(b.strip())
    assert got[0]["reference_contexts"][1] == {"text": b.strip(), "doc_id": "overview.md", "start": start,
                                               "end": start + len(b.strip())}
    assert got[1]["unmapped_contexts"] == [{"text": "Text that is in no document of this corpus."}]
    assert got[1]["provenance"]["located"][0].startswith("fuzzy:")
    assert got[1]["provenance"]["synthesizer_name"] == "single_hop_specifc_query_synthesizer"
    check_spans(corpus, out)


def test_ragas_csv_with_list_cells_and_old_field_names(corpus, tmp_path):
    a, b, *_ = pieces(corpus)
    src = tmp_path / "ragas01.csv"
    with open(src, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["question", "contexts", "ground_truth", "evolution_type"])
        w.writerow(["What does the WAL do?", json.dumps([a]), "It logs.", "simple"])
        w.writerow(["Overview?", str([b]), "A database.", "reasoning"])
    s = import_testset(src, corpus, out=tmp_path / "o.jsonl")
    assert s.questions == 2 and dict(s.mapped) == {"exact": 2} and s.unmapped == 0


def test_deepeval_goldens(corpus, tmp_path):
    a, b, c, rejoined, _ = pieces(corpus)
    src = tmp_path / "goldens.json"
    src.write_text(json.dumps([
        {"input": "What does the WAL do?", "expected_output": "It logs.", "context": [rejoined],
         "source_file": "wal.md", "actual_output": None, "retrieval_context": None},
        {"input": "Backups?", "expected_output": "Daily.", "context": [c, b], "source_file": "backup.md"},
    ]))
    out = tmp_path / "o.jsonl"
    s = import_testset(src, corpus, out=out)
    assert s.format == "deepeval" and s.contexts == 3 and s.unmapped == 0
    assert rows(out)[1]["reference"] == "Daily." and rows(out)[1]["provenance"]["source_file"] == "backup.md"
    check_spans(corpus, out)


def test_llamaindex_labelled_rag_dataset_and_finetune_dataset(corpus, tmp_path):
    a, b, c, *_ = pieces(corpus)
    src = tmp_path / "rag_dataset.json"
    src.write_text(json.dumps({"examples": [
        {"query": "What does the WAL do?", "query_by": {"model_name": "gpt-4", "type": "ai"},
         "reference_contexts": [a], "reference_answer": "It logs.",
         "reference_answer_by": {"model_name": "gpt-4", "type": "ai"}}]}))
    s = import_testset(src, corpus, out=tmp_path / "o1.jsonl")
    assert s.format == "llamaindex" and dict(s.mapped) == {"exact": 1}
    src2 = tmp_path / "qa_finetune.json"
    src2.write_text(json.dumps({"queries": {"q1": "Backups?", "q2": "Overview?"}, "corpus": {"n1": c, "n2": b},
                                "relevant_docs": {"q1": ["n1"], "q2": ["n2", "n1"]}, "mode": "text"}))
    out = tmp_path / "o2.jsonl"
    s = import_testset(src2, corpus, out=out)
    assert s.questions == 2 and s.contexts == 3 and s.unmapped == 0
    assert rows(out)[1]["provenance"]["node_ids"] == ["n2", "n1"]
    check_spans(corpus, out)


def test_beir_style_generated_set(corpus, tmp_path):
    a, b, *_ = pieces(corpus)
    root = tmp_path / "gen"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "p1", "text": a}) + "\n" +
                                       json.dumps({"_id": "p2", "text": b + " [generator footer]"}) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "g1", "text": "What does the WAL do?"}) + "\n" +
                                        json.dumps({"_id": "g2", "text": "Overview?"}) + "\n")
    (root / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\ng1\tp1\t1\ng2\tp2\t1\n")
    out = tmp_path / "o.jsonl"
    s = import_testset(root, corpus, out=out)
    assert s.format == "beir" and s.questions == 2
    assert dict(s.mapped) == {"exact": 1, "fuzzy": 1}
    check_spans(corpus, out)


def test_bad_inputs_are_one_line_errors(corpus, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"input": "", "context": ["x"]}]))
    with pytest.raises(Exception, match=r"bad.json:1: field 'input': no question"):
        read_foreign(bad)
    proc = run_cli(["import-testset", str(bad), "--corpus",
                    str(KESTREL), "--out", str(tmp_path / "o.jsonl")], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_exporters_write_ragas_and_deepeval_shapes_with_ids(corpus, tmp_path):
    ours = tmp_path / "ours.jsonl"
    text = corpus["wal.md"].text
    ours.write_text(json.dumps({"id": "synth-00001", "user_input": "Q?", "reference": "A.", "style": "factual",
                                "difficulty": "easy", "reference_contexts": [
                                    {"text": text[10:50], "doc_id": "wal.md", "start": 10, "end": 50}]}) + "\n")
    assert export_testset(ours, to="ragas", out=tmp_path / "r.jsonl") == 1
    assert rows(tmp_path / "r.jsonl") == [{"id": "synth-00001", "user_input": "Q?", "reference": "A.",
                                           "reference_contexts": [text[10:50]],
                                           "reference_context_ids": ["wal.md#10-50"]}]
    export_testset(ours, to="deepeval", out=tmp_path / "d.json")
    golden = json.loads((tmp_path / "d.json").read_text())[0]
    assert golden["input"] == "Q?" and golden["expected_output"] == "A." and golden["context"] == [text[10:50]]
    assert golden["name"] == "synth-00001" and golden["source_file"] == "wal.md"
    assert golden["additional_metadata"]["reference_spans"] == [{"doc_id": "wal.md", "start": 10, "end": 50}]
    # and back: the exported sets import to the same spans
    s = import_testset(tmp_path / "r.jsonl", corpus, out=tmp_path / "back.jsonl")
    assert rows(tmp_path / "back.jsonl")[0]["reference_contexts"][0]["start"] == 10 and s.unmapped == 0
    s = import_testset(tmp_path / "d.json", corpus, out=tmp_path / "back2.jsonl")
    assert s.format == "deepeval" and rows(tmp_path / "back2.jsonl")[0]["reference_contexts"][0]["end"] == 50


@pytest.mark.parametrize("text", ["Kestrel keeps\u00a0three \u201ccopies\u201d \u2014 always.\n\nNew  para.",
                                  "Caf\u00e9 \ufb01le \u2460 end", "  leading and trailing  "])
def test_normalised_offsets_map_back_to_the_original(text):
    norm, where = normalise(text)
    assert len(norm) == len(where) and where == sorted(where)
    for a in range(len(norm)):
        for b in range(a + 1, min(len(norm), a + 12) + 1):
            quote = text[where[a]:where[b - 1] + 1]
            if not quote.strip():
                continue
            hit = locate(quote, text)
            assert hit is not None and normalise(text[hit.start:hit.end])[0] == normalise(quote)[0]


@pytest.mark.parametrize("target", ["ragas", "deepeval"])
def test_round_trip_keeps_case_ids_so_compare_rag_matches_the_original(corpus, tmp_path, target):
    text, other = corpus["wal.md"].text, corpus["backup.md"].text
    original = [{"id": "synth-00007", "user_input": "What does the WAL hold?", "reference": "Records.",
                 "reference_contexts": [{"text": text[200:420], "doc_id": "wal.md", "start": 200, "end": 420}],
                 "retrieved_contexts": [text[150:450], other[0:200]]},
                {"id": "synth-00002", "user_input": "How are backups kept?", "reference": "Copies.",
                 "reference_contexts": [{"text": other[100:300], "doc_id": "backup.md", "start": 100, "end": 300}],
                 "retrieved_contexts": [text[0:100], other[50:350]]}]
    ours = tmp_path / "ours.jsonl"
    ours.write_text("".join(json.dumps(r) + "\n" for r in original), encoding="utf-8")
    exported = tmp_path / ("r.jsonl" if target == "ragas" else "d.json")
    assert export_testset(ours, to=target, out=exported) == 2
    back = tmp_path / "back.jsonl"
    s = import_testset(exported, corpus, out=back)
    assert s.format == target and s.unmapped == 0
    imported = rows(back)
    assert [r["id"] for r in imported] == ["synth-00007", "synth-00002"]  # not ragas-00001 ...
    # the imported set, run through the same retriever (here: the same contexts), compares case by
    # case
    for r, o in zip(imported, original, strict=True):
        r["retrieved_contexts"] = o["retrieved_contexts"]
    back.write_text("".join(json.dumps(r) + "\n" for r in imported), encoding="utf-8")
    proc = run_cli(["compare-rag", str(ours), str(back), "-m", "precision@2", "--format", "json",
                    "--permutations", "100"], capture_output=True, text=True, env=ENV)
    assert proc.returncode == 0, proc.stderr
    means = json.loads(proc.stdout)["means"]
    assert means["ours"]["precision@2"] == means["back"]["precision@2"] == 0.5
