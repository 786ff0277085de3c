"""The bundled Kestrel DB benchmark: size, question mix, verified passages, and offsets that survive
re-chunking."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from rankwise.datasets import (
    QUESTION_KINDS,
    bundled_files,
    bundled_names,
    load_bundled_corpus,
    load_bundled_questions,
    load_bundled_testset,
)
from rankwise.errors import InputError, RankwiseError


@pytest.fixture(scope="module")
def corpus():
    return load_bundled_corpus("kestrel")


@pytest.fixture(scope="module")
def questions():
    return load_bundled_questions("kestrel")


def test_kestrel_is_listed_and_its_files_exist():
    assert "kestrel" in bundled_names()
    files = bundled_files("kestrel")
    assert files.corpus.is_file() and files.questions.is_file()


def test_corpus_size_and_unique_ids(corpus):
    assert len(corpus) >= 30
    assert sum(len(d.text) for d in corpus) >= 100_000
    ids = [d.id for d in corpus]
    assert len(set(ids)) == len(ids)
    for d in corpus:
        assert d.title and d.text.startswith("# " + d.title), d.id
        assert len(d.text) >= 1500, f"{d.id} is too short to be a real chapter"


def test_question_count_mix_and_ids(questions):
    assert len(questions) >= 60
    ids = [q.id for q in questions]
    assert len(set(ids)) == len(ids)
    kinds = Counter(q.kind for q in questions)
    assert set(kinds) == set(QUESTION_KINDS)
    assert kinds["multi_passage"] >= 15
    assert kinds["paraphrase"] >= 15
    assert kinds["keyword"] >= 15


def test_every_question_has_a_reference_answer_and_passages(questions):
    for q in questions:
        assert q.question.strip().endswith("?"), q.id
        assert len(q.reference.strip()) >= 20, q.id
        assert q.reference_contexts, q.id


def test_multi_passage_questions_need_two_or_more_passages(questions):
    multi = [q for q in questions if q.kind == "multi_passage"]
    assert all(len(q.reference_contexts) >= 2 for q in multi)
    across_documents = [q for q in multi if len({p.doc_id for p in q.reference_contexts}) >= 2]
    assert len(across_documents) >= 12


def test_keyword_questions_name_an_identifier(questions):
    """Keyword questions carry a config key, error code, flag or metric name that also appears in a
    passage."""
    import re

    ident = re.compile(r"KST-\d{4}|--[a-z][a-z-]+|\b[a-z0-9]+(?:[._][a-z0-9]+)+\b|`([^`]+)`")
    for q in (q for q in questions if q.kind == "keyword"):
        names = {m.group(1) or m.group(0) for m in ident.finditer(q.question)}
        assert names, q.id
        assert any(n in p.text for n in names for p in q.reference_contexts), q.id


def test_every_passage_is_at_its_offsets_and_sized_as_a_passage(corpus, questions):
    texts = {d.id: d.text for d in corpus}
    n = 0
    for q in questions:
        for p in q.reference_contexts:
            assert texts[p.doc_id][p.start:p.end] == p.text, (q.id, p.doc_id)
            assert 80 <= len(p.text) <= 600, (q.id, len(p.text))
            n += 1
    assert n >= 90


def test_bundled_testset_keeps_answers_and_spans(questions):
    ts = load_bundled_testset("kestrel")
    assert ts.ids == [q.id for q in questions]
    case = ts["q02"]
    assert case.reference.startswith("The incremental backup chain")
    assert [p.span for p in case.reference_contexts] == [(p.doc_id, p.start, p.end)
                                                         for p in questions[1].reference_contexts]
    assert case.chunks == []


def _fixed_windows(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    step = size - overlap
    return [(a, min(a + size, len(text))) for a in range(0, max(len(text) - overlap, 1), step)]


@pytest.mark.parametrize(("size", "overlap"), [(300, 0), (800, 100)])
def test_rechunking_keeps_every_passage_locatable(corpus, questions, size, overlap):
    texts = {d.id: d.text for d in corpus}
    chunks = {doc_id: [(a, b, text[a:b]) for a, b in _fixed_windows(text, size, overlap)]
              for doc_id, text in texts.items()}
    for q in questions:
        for p in q.reference_contexts:
            covered = set()
            best = 0.0
            for a, b, chunk_text in chunks[p.doc_id]:
                lo, hi = max(a, p.start), min(b, p.end)
                if lo >= hi:
                    continue
                # the chunk's own text, read at the passage's offsets, is the passage's text
                assert chunk_text[lo - a:hi - a] == p.text[lo - p.start:hi - p.start]
                covered.update(range(lo, hi))
                best = max(best, (hi - lo) / (p.end - p.start), (hi - lo) / (b - a))
            assert covered == set(range(p.start, p.end)), (q.id, size)
            # span verdict (docs/metrics.md §4, min_overlap 0.5): some chunk is relevant to every
            # passage
            assert best >= 0.5, (q.id, p.doc_id, size)


def _copy_benchmark(tmp_path):
    files = bundled_files("kestrel")
    folder = tmp_path / "bench"
    folder.mkdir()
    shutil.copy(files.corpus, folder / "corpus.jsonl")
    shutil.copy(files.questions, folder / "questions.jsonl")
    return folder


def test_a_folder_in_the_same_layout_loads(tmp_path):
    folder = _copy_benchmark(tmp_path)
    assert len(load_bundled_questions(folder)) == len(load_bundled_questions("kestrel"))


def test_a_shifted_passage_is_reported_with_question_and_passage(tmp_path):
    folder = _copy_benchmark(tmp_path)
    lines = (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[4])
    row["reference_contexts"][0]["start"] += 1
    lines[4] = json.dumps(row, ensure_ascii=False)
    (folder / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(RankwiseError) as err:
        load_bundled_questions(folder)
    msg = str(err.value)
    assert f"question {row['id']}: passage 0" in msg
    assert "questions.jsonl:5" in msg and "reference_contexts[0]" in msg


def test_a_passage_naming_an_unknown_document_is_reported(tmp_path):
    folder = _copy_benchmark(tmp_path)
    lines = (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    row["reference_contexts"][1]["doc_id"] = "nope.md"
    lines[0] = json.dumps(row, ensure_ascii=False)
    (folder / "questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"question q01: passage 1 names unknown document 'nope.md'"):
        load_bundled_questions(folder)


def test_unknown_benchmark_name_lists_the_available_ones():
    with pytest.raises(InputError, match="no bundled benchmark 'nope'; available: kestrel"):
        load_bundled_corpus("nope")
