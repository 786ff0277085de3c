"""One type per concept, one meaning per name (issue 35 item 2): a retrieved chunk is one type that
records and framework items extend, a case and a call likewise; the corpus chunker's type has its
own name; no public name means two different things across rankwise's modules."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import rankwise
from rankwise.data.items import RawItem, to_item
from rankwise.data.records import CallRecord, CaseRecord, ChunkRecord, Verdict, records_from_testset
from rankwise.data.testset import Chunk, RetrievalCall, TestCase
from rankwise.retrieval.chunking import CorpusChunk


def _own_fields(kind: type) -> set[str]:
    base = kind.__mro__[1]
    return {f.name for f in dataclasses.fields(kind)} - {f.name for f in dataclasses.fields(base)}


def test_records_and_items_extend_the_one_chunk_case_and_call_types():
    assert issubclass(ChunkRecord, Chunk) and issubclass(RawItem, Chunk)
    assert issubclass(CallRecord, RetrievalCall) and issubclass(CaseRecord, TestCase)
    # each extension adds only what it is about: a rank and verdicts; a framework's own id and
    # metadata
    assert _own_fields(ChunkRecord) == {"rank", "verdicts"}
    assert _own_fields(RawItem) == {"native_id", "metadata", "kind"}
    assert _own_fields(CallRecord) == set()  # its chunks are records: the same field, narrowed
    assert _own_fields(CaseRecord) == {"passages_found", "scores", "status", "truth", "answer_score",
                                       "answer_score_source", "extra"}
    # and none re-declares a field of its base in its own class body
    for kind in (ChunkRecord, RawItem):
        assert set(kind.__annotations__) == _own_fields(kind), kind


def test_a_record_is_the_chunk_and_case_it_was_made_from():
    rec = records_from_testset([{"id": "q1", "user_input": "Capital?", "retrieved_contexts": [
        {"id": "c1", "text": "Paris.", "doc_id": "d1", "start": 0, "end": 6}]}])[0]
    chunk = rec.chunks[0]
    assert isinstance(rec, TestCase) and isinstance(chunk, Chunk)
    assert (chunk.id, chunk.span, chunk.rank) == ("c1", ("d1", 0, 6), 1)
    assert chunk.to_chunk() == Chunk("Paris.", "c1", "d1", 0, 6)
    assert rec.to_case().chunks == [Chunk("Paris.", "c1", "d1", 0, 6)] and rec.has_ground_truth is False
    item = to_item({"text": "Paris.", "id": "native-1", "metadata": {"source": "d1"}})
    assert isinstance(item, Chunk) and (item.id, item.native_id, item.text) == (None, "native-1", "Paris.")
    # the record's own serialised form is unchanged: rank first, the verdicts last
    assert list(ChunkRecord(rank=2, id="c", verdicts={"ids": Verdict(1)}).to_dict()) == [
        "rank", "id", "text", "doc_id", "start", "end", "score", "verdicts"]


def test_the_corpus_chunker_type_has_its_own_name():
    assert CorpusChunk is not Chunk and CorpusChunk.__name__ == "CorpusChunk"
    assert not hasattr(importlib.import_module("rankwise.retrieval"), "Chunk")


def _exports() -> dict[str, dict[int, list[str]]]:
    found: dict[str, dict[int, list[str]]] = {}
    for info in pkgutil.walk_packages(rankwise.__path__, "rankwise."):
        if info.name.startswith(("rankwise.spark", "rankwise.cli")) or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            found.setdefault(name, {}).setdefault(id(obj), []).append(info.name)
    return found


def test_no_public_name_means_two_things():
    """A name exported by two modules is the same object in both (a re-export), never two different
    ones; a package's face never exports a function under the name of one of its own submodules."""
    clashes = {name: sorted(mods for mods in objs.values())
               for name, objs in _exports().items() if len(objs) > 1 and name != "main"}
    assert clashes == {}
    for info in pkgutil.walk_packages(rankwise.__path__, "rankwise."):
        if info.ispkg and not info.name.startswith(("rankwise.spark", "rankwise.cli")):
            package = importlib.import_module(info.name)
            submodules = {m.name for m in pkgutil.iter_modules(package.__path__)}
            assert set(getattr(package, "__all__", ())) & submodules == set(), info.name
