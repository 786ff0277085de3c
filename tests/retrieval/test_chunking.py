"""Chunking with exact offsets: properties (Hypothesis) and worked examples."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwise.data.corpus import Corpus, Document
from rankwise.errors import InputError
from rankwise.retrieval.chunking import (
    CorpusChunk,
    check_chunking,
    chunk_corpus,
    chunk_document,
    read_chunks,
    split_text,
    write_chunks,
)

# Text made of the things the splitter cuts at: words, spaces, line breaks, blank lines, sentence
# ends, plus long unbroken runs (hard cuts) and non-ASCII characters.
_pieces = st.one_of(
    st.text(alphabet="abcdefghij", min_size=1, max_size=12),
    st.sampled_from([" ", "  ", "\n", "\n\n", "\n \n\t", ". ", "! ", "? ", "\t", "é", "日本", "。", "\r\n"]),
    st.text(alphabet="xyz", min_size=30, max_size=90),
)
texts = st.lists(_pieces, max_size=60).map("".join)
sizes = st.integers(min_value=1, max_value=120)


@st.composite
def size_and_overlap(draw):
    size = draw(sizes)
    overlap = draw(st.integers(min_value=0, max_value=size - 1))
    return size, overlap


@settings(max_examples=400, deadline=None)
@given(texts, size_and_overlap())
def test_spans_cover_every_character_within_size_and_overlap(text, so):
    size, overlap = so
    spans = split_text(text, size, overlap)
    if not text:
        assert spans == []
        return
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text)
    for s, e in spans:
        assert 0 <= s < e <= len(text)
        assert e - s <= size
    for (s1, e1), (s2, e2) in zip(spans, spans[1:], strict=False):
        assert s2 <= e1, "gap: a character is not covered"
        assert e1 - s2 <= overlap, "overlap larger than chunk_overlap"
        assert s2 > s1 and e2 > e1, "no progress"
    if overlap == 0:
        assert all(s2 == e1 for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False))


@settings(max_examples=200, deadline=None)
@given(texts, size_and_overlap())
def test_chunk_text_is_exactly_the_document_slice(text, so):
    size, overlap = so
    doc = Document("docs/a b.md", text, title="T")
    chunks = chunk_document(doc, size, overlap)
    for c in chunks:
        assert c.text == text[c.start:c.end]
        assert c.id == f"docs/a b.md#{c.start}-{c.end}"
        assert c.doc_id == "docs/a b.md" and c.title == "T"
    assert len({c.id for c in chunks}) == len(chunks)
    assert "".join(c.text[max(0, prev_end - c.start):]
                   for c, prev_end in zip(chunks, [0] + [c.end for c in chunks], strict=False)) == text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abcde", min_size=1, max_size=5), min_size=1, max_size=80),
       st.integers(min_value=20, max_value=80), st.data())
def test_overlap_reaches_the_requested_length_within_one_word(words, size, data):
    """Words of <= 5 letters, single spaces: each overlap is chunk_overlap minus at most one word +
    space."""
    overlap = data.draw(st.integers(min_value=0, max_value=size // 2))
    text = " ".join(words)
    spans = split_text(text, size, overlap)
    for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False):
        assert overlap - 6 < e1 - s2 <= overlap
        assert s2 == 0 or text[s2 - 1] == " ", "overlap must start at a word start"


def test_prefers_paragraphs_then_lines_then_sentences_then_words():
    text = "First para one.\n\nSecond para two."
    assert split_text(text, 20) == [(0, 17), (17, 33)]
    assert text[17:33] == "Second para two."
    lines = "line one here\nline two here"
    assert split_text(lines, 16) == [(0, 14), (14, 27)]
    sentences = "One sentence. Another one! Third?"
    assert [sentences[s:e] for s, e in split_text(sentences, 14)] == ["One sentence. ", "Another one! ", "Third?"]
    words = "alpha beta gamma delta"
    assert [words[s:e] for s, e in split_text(words, 11)] == ["alpha beta ", "gamma delta"]


def test_hard_cut_when_there_is_no_separator():
    assert split_text("x" * 25, 10) == [(0, 10), (10, 20), (20, 25)]


def test_overlap_example():
    text = "aaa bbb ccc ddd eee"
    spans = split_text(text, 8, 4)
    assert spans == [(0, 8), (4, 12), (8, 16), (12, 19)]
    assert [text[s:e] for s, e in spans] == ["aaa bbb ", "bbb ccc ", "ccc ddd ", "ddd eee"]


def test_whole_document_mode_uses_the_doc_id_and_skips_empty_documents():
    corpus = Corpus.from_dict({"d1": "alpha beta", "empty": "", "blank": "  \n"})
    chunks = chunk_corpus(corpus)
    assert [(c.id, c.start, c.end, c.text) for c in chunks] == [("d1", 0, 10, "alpha beta"), ("blank", 0, 3, "  \n")]


def test_short_document_is_one_chunk_even_with_chunking():
    (c,) = chunk_document(Document("d", "short"), 100, 10)
    assert (c.id, c.start, c.end) == ("d#0-5", 0, 5)


def test_titles_are_indexed_but_not_part_of_the_text():
    (c,) = chunk_corpus([Document("d", "body text", title="The Title")])
    assert c.text == "body text" and c.indexed_text == "The Title\nbody text"
    (c,) = chunk_corpus([Document("d", "body text", title="The Title")], titles=False)
    assert c.indexed_text == "body text"


def test_custom_separator_regex():
    text = "a|b|c|d"
    assert [text[s:e] for s, e in split_text(text, 4, separators=[r"\|"])] == ["a|b|", "c|d"]


@pytest.mark.parametrize("size, overlap, field", [(-1, 0, "chunk_size"), (10, 10, "chunk_overlap"),
                                                    (10, -1, "chunk_overlap"), (0, 5, "chunk_overlap"),
                                                    (2.5, 0, "chunk_size")])
def test_bad_sizes_name_the_field(size, overlap, field):
    with pytest.raises(InputError) as err:
        split_text("some text", size, overlap)
    assert err.value.field == field


def test_bad_separator_is_an_input_error():
    with pytest.raises(InputError, match="separators"):
        chunk_corpus(Corpus.from_dict({"d": "x" * 50}), 10, separators=["("])


def test_chunks_jsonl_round_trip_and_offset_check(tmp_path):
    corpus = Corpus.from_dict({"d1": "One. Two. Three. Four.", "d2": "Five six seven"})
    chunks = chunk_corpus(corpus, 10, 3)
    path = tmp_path / "chunks.jsonl"
    assert write_chunks(chunks, path) == len(chunks)
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"id", "doc_id", "start", "end", "text"}
    back = read_chunks(path, corpus)
    assert [(c.id, c.doc_id, c.start, c.end, c.text) for c in back] == \
        [(c.id, c.doc_id, c.start, c.end, c.text) for c in chunks]


def test_read_chunks_names_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "a", "doc_id": "d", "start": 0, "end": 3, "text": "abc"}\n'
                    '{"id": "b", "doc_id": "d", "start": "0", "end": 3, "text": "abc"}\n')
    with pytest.raises(InputError) as err:
        read_chunks(path)
    assert (err.value.line, err.value.field) == (2, "start")
    path.write_text('{"id": "a", "doc_id": "d", "start": 0, "end": 5, "text": "abc"}\n')
    with pytest.raises(InputError, match="offsets 0-5") as err:
        read_chunks(path)
    assert err.value.line == 1


def test_check_chunking_catches_text_that_differs_from_the_document():
    corpus = Corpus.from_dict({"d": "hello world"})
    check_chunking([CorpusChunk("d#0-5", "d", 0, 5, "hello")], corpus)
    with pytest.raises(InputError, match=r"differs from document 'd'\[0:5\]"):
        check_chunking([CorpusChunk("d#0-5", "d", 0, 5, "HELLO")], corpus)
    with pytest.raises(InputError, match="not in"):
        check_chunking([CorpusChunk("x#0-5", "x", 0, 5, "hello")], corpus)


def test_rechunking_keeps_any_span_inside_the_covered_text():
    """Ground truth given as document offsets stays valid whatever the chunk size: every passage
    character lies in some chunk of every chunking."""
    text = ("The quick brown fox jumps over the lazy dog. " * 20).strip()
    passage = (120, 170)
    for size, overlap in [(50, 0), (80, 20), (200, 50), (0, 0)]:
        spans = split_text(text, size, overlap) if size else [(0, len(text))]
        covered = set()
        for s, e in spans:
            covered.update(range(s, e))
        assert set(range(*passage)) <= covered
