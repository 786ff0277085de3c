"""Turn what a framework's retriever returns into plain items, by duck typing (no framework is
imported).

Recognised items: a LangChain ``Document`` (``page_content``, ``metadata``, ``id``), a LlamaIndex
``NodeWithScore`` (``node``, ``score``) or node (``get_content()``, ``node_id``, ``ref_doc_id``,
``start_char_idx``, ``end_char_idx``), a Haystack ``Document`` (``content``, ``meta``, ``id``,
``score``), a ``(item, score)`` pair, a mapping (``text``/``page_content``/``content``, ``id``,
``doc_id``, ``start``, ``end``, ``score``, ``metadata``/``meta``) or a plain string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rankwise.data.finite import finite_float
from rankwise.data.ids import resolve_id
from rankwise.data.records import ChunkRecord
from rankwise.data.testset import Chunk

__all__ = ["RawItem", "to_item", "doc_id_of", "item_chunk", "DOC_ID_KEYS", "START_KEYS", "END_KEYS"]

#: metadata fields read as the document id, in this order (after an explicit ``doc_id_key``)
DOC_ID_KEYS = ("doc_id", "document_id", "source", "source_id", "file_path", "file_name", "ref_doc_id")
#: metadata fields read as the start offset: LangChain ``add_start_index=True``, Haystack
#: ``split_idx_start``
START_KEYS = ("start_index", "start", "start_char_idx", "split_idx_start", "start_char")
END_KEYS = ("end_index", "end", "end_char_idx", "end_char")


@dataclass(slots=True, kw_only=True)
class RawItem(Chunk):
    """A retrieved chunk as a framework returned it, before its ids are resolved: the
    :class:`~rankwise.data.testset.Chunk` fields it had (``id`` stays None until :func:`item_chunk`
    resolves it), the framework's own id, its metadata and what kind of object it was.

    Example:
        >>> item = to_item({"text": "Paris", "id": "c1", "score": 0.5})
        >>> item.native_id, item.id, isinstance(item, Chunk)
        ('c1', None, True)
    """

    native_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "item"


def _str_or_none(x: Any) -> str | None:
    if x is None:
        return None
    s = str(x)
    return s if s else None


def _int_or_none(x: Any) -> int | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, str) and x.strip().lstrip("-").isdigit():
        return int(x.strip())
    return None


def _first(meta: Mapping[str, Any], keys) -> Any:
    for k in keys:
        if k in meta and meta[k] is not None:
            return meta[k]
    return None


def _from_mapping(obj: Mapping[str, Any], score: float | None) -> RawItem:
    meta = dict(obj.get("metadata") or obj.get("meta") or {})
    text = obj.get("text", obj.get("page_content", obj.get("content")))
    start = _int_or_none(obj.get("start", _first(meta, START_KEYS)))
    end = _int_or_none(obj.get("end", _first(meta, END_KEYS)))
    return RawItem(text=None if text is None else str(text), native_id=_str_or_none(obj.get("id")),
                   doc_id=_str_or_none(obj.get("doc_id")), start=start, end=end,
                   score=finite_float(obj.get("score")) if score is None else score, metadata=meta, kind="mapping")


def to_item(obj: Any, score: float | None = None) -> RawItem:
    """A :class:`RawItem` from any supported item (see the module docstring).

    Example:
        >>> it = to_item(
        ...     ({"page_content": "abc", "metadata": {"source": "d1", "start_index": 4}}, 0.9)
        ... )
        >>> it.text, it.start, it.score
        ('abc', 4, 0.9)
    """
    if isinstance(obj, str):
        return RawItem(text=obj, score=score, kind="text")
    if isinstance(obj, tuple) and len(obj) == 2 and not isinstance(obj[1], (str, Mapping)):
        return to_item(obj[0], finite_float(obj[1]))
    if isinstance(obj, Mapping):
        return _from_mapping(obj, score)
    # LlamaIndex NodeWithScore: .node + .score
    node = getattr(obj, "node", None)
    if node is not None and hasattr(obj, "score") and not hasattr(obj, "page_content"):
        return to_item(node, finite_float(obj.score) if score is None else score)
    # LangChain Document
    if hasattr(obj, "page_content"):
        meta = dict(getattr(obj, "metadata", None) or {})
        return RawItem(text=obj.page_content, native_id=_str_or_none(getattr(obj, "id", None)),
                       start=_int_or_none(_first(meta, START_KEYS)), end=_int_or_none(_first(meta, END_KEYS)),
                       score=score, metadata=meta, kind="langchain")
    # LlamaIndex node
    if hasattr(obj, "node_id") and (hasattr(obj, "get_content") or hasattr(obj, "text")):
        try:
            text = obj.get_content() if hasattr(obj, "get_content") else obj.text
        except TypeError:
            text = getattr(obj, "text", None)
        meta = dict(getattr(obj, "metadata", None) or {})
        ref = getattr(obj, "ref_doc_id", None)
        start = _int_or_none(getattr(obj, "start_char_idx", None))
        end = _int_or_none(getattr(obj, "end_char_idx", None))
        return RawItem(text=text, native_id=_str_or_none(obj.node_id), doc_id=None,
                       start=start if start is not None else _int_or_none(_first(meta, START_KEYS)),
                       end=end if end is not None else _int_or_none(_first(meta, END_KEYS)),
                       score=score, metadata={**meta, **({"ref_doc_id": ref} if ref and "ref_doc_id" not in meta
                                                         else {})}, kind="llamaindex")
    # Haystack Document
    if hasattr(obj, "content") and hasattr(obj, "meta"):
        meta = dict(getattr(obj, "meta", None) or {})
        return RawItem(text=obj.content, native_id=_str_or_none(getattr(obj, "id", None)),
                       start=_int_or_none(_first(meta, START_KEYS)), end=_int_or_none(_first(meta, END_KEYS)),
                       score=finite_float(getattr(obj, "score", None)) if score is None else score, metadata=meta,
                       kind="haystack")
    if hasattr(obj, "text"):
        return RawItem(text=str(obj.text), native_id=_str_or_none(getattr(obj, "id", None)), score=score)
    raise TypeError(f"cannot read a retrieved item of type {type(obj).__name__}: expected a LangChain Document, "
                    "a LlamaIndex NodeWithScore, a Haystack Document, a (item, score) pair, a dict or a string")


def doc_id_of(item: RawItem, doc_id_key: str | None = None) -> str | None:
    """The item's document id: its own, else ``doc_id_key`` or the first of :data:`DOC_ID_KEYS` in
    its metadata.

    Example:
        >>> doc_id_of(to_item({"text": "x", "metadata": {"source": "d1"}}))
        'd1'
    """
    if item.doc_id is not None:
        return item.doc_id
    keys = ((doc_id_key,) if doc_id_key else ()) + DOC_ID_KEYS
    for key in keys:
        v = item.metadata.get(key)
        if v not in (None, ""):
            return str(v)
    return None


def item_chunk(item: RawItem, rank: int, *, doc_id_key: str | None = None, id_strategy: str = "auto",
               id_key: str | None = None) -> tuple[ChunkRecord, str, str | None]:
    """One retrieved item as a chunk at a rank: document id, offsets and id by the rules of
    :mod:`rankwise.data.ids`; also the id rule used and, for impossible offsets (dropped), what they
    were.

    Example:
        >>> chunk, rule, bad = item_chunk(
        ...     to_item({"text": "Paris", "metadata": {"source": "d1", "start_index": 4}}), 1
        ... )
        >>> chunk.id, rule, bad
        ('d1#4-9', 'offset', None)
    """
    doc_id = doc_id_of(item, doc_id_key)
    start, end = item.start, item.end
    if start is not None and end is None and item.text is not None:
        end = start + len(item.text)
    bad = None
    if start is not None and (start < 0 or end is None or end < start):
        bad = f"start {start}, end {end}"
        start = end = None  # eval-rag would refuse the record: the chunk is kept without offsets
    cid, rule = resolve_id(item.native_id, item.metadata, doc_id, start, end, item.text, strategy=id_strategy,
                           id_key=id_key)
    return ChunkRecord(rank=rank, id=cid, text=item.text, doc_id=doc_id, start=start, end=end,
                       score=item.score), rule, bad
