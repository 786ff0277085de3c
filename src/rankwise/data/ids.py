"""Chunk ids that survive reruns.

Rank-aware evaluation needs the same chunk to carry the same id on every run. Frameworks often give
random ids (LangChain's ``InMemoryVectorStore`` fills in a uuid4; LlamaIndex node ids are uuid4s
unless the parser gets an ``id_func``), so an id is resolved in this order:

1. ``id``: the item's own id, unless it looks like a random uuid (version 4) — then the next rule is
   used and a warning names the fix (with ``strategy="id"`` the item's id is kept whatever it looks
   like);
2. ``id_key``: a metadata field you name (``id_key="chunk_id"``);
3. ``offset``: ``"{doc_id}#{start}-{end}"`` (the form rankwise's own chunker gives) from the
   document id and the start offset (LangChain ``metadata["start_index"]`` with
   ``add_start_index=True``, LlamaIndex ``start_char_idx``, Haystack ``split_idx_start``);
   ``"{doc_id}#{start}"`` when the end is unknown;
4. ``text``: ``"text:"`` + the first 16 hex digits of the SHA-256 of the normalised text (Unicode
   NFC, whitespace runs collapsed to one space, trimmed).

The rule used for each chunk is stored with the run (``id_from`` per item, counts in the summary).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["ID_STRATEGIES", "looks_random", "text_id", "normalise_text", "resolve_id", "offset_id"]

ID_STRATEGIES = ("auto", "id", "id_key", "offset", "text")
_UUID4 = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$", re.I)
_SPACE = re.compile(r"\s+")


def looks_random(value: str | None) -> bool:
    """True for a random (version 4) uuid, with or without dashes.

    Example:
        >>> looks_random("f31616f7-d123-4bc9-a075-5f192c65937d"), looks_random("guide.md#0-120")
        (True, False)
    """
    return bool(value) and bool(_UUID4.match(value.strip()))


def normalise_text(text: str) -> str:
    """NFC, whitespace runs collapsed to one space, trimmed.

    Example:
        >>> normalise_text("  a\\n\\n b ")
        'a b'
    """
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def text_id(text: str) -> str:
    """``"text:"`` + 16 hex digits of the SHA-256 of the normalised text.

    Example:
        >>> text_id("a  b") == text_id(" a b")
        True
    """
    return "text:" + hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()[:16]


def offset_id(doc_id: str, start: int, end: int | None) -> str:
    """``"{doc_id}#{start}-{end}"`` (``"{doc_id}#{start}"`` without an end).

    Example:
        >>> offset_id("guide.md", 0, 120)
        'guide.md#0-120'
    """
    return f"{doc_id}#{start}-{end}" if end is not None else f"{doc_id}#{start}"


def resolve_id(native_id: str | None, metadata: dict, doc_id: str | None, start: int | None, end: int | None,
               text: str | None, *, strategy: str = "auto", id_key: str | None = None) -> tuple[str | None, str]:
    """The chunk id and the rule that gave it (``id``, ``id_key``, ``offset``, ``text`` or
    ``none``).

    ``strategy`` "auto" follows the order of the module docstring; any other value forces that rule
    (an item the forced rule cannot name gets ``None``, rule ``none``).

    Example:
        >>> resolve_id("f31616f7-d123-4bc9-a075-5f192c65937d", {}, "d1", 0, 5, "hello")
        ('d1#0-5', 'offset')
        >>> resolve_id(None, {"chunk_id": "c7"}, None, None, None, "x", id_key="chunk_id")
        ('c7', 'id_key')
    """
    if strategy not in ID_STRATEGIES:
        raise ValueError(f"id strategy must be one of {list(ID_STRATEGIES)}, not {strategy!r}")
    auto = strategy == "auto"
    if native_id and (strategy == "id" or (auto and not looks_random(native_id))):
        return native_id, "id"
    if (auto or strategy == "id_key") and id_key and metadata.get(id_key) not in (None, ""):
        return str(metadata[id_key]), "id_key"
    if (auto or strategy == "offset") and doc_id is not None and start is not None:
        return offset_id(doc_id, start, end), "offset"
    if (auto or strategy == "text") and text is not None:
        return text_id(text), "text"
    return None, "none"
