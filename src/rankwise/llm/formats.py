"""Structured output: the ``response_format`` levels an endpoint may take, their request bodies, and
the memory of the level each endpoint and model took (kept beside the LLM cache).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.llm.endpoint import mask_url

__all__ = ["RESPONSE_FORMATS", "FORMAT_ERROR", "OVERFLOW", "FORMAT_MEMORY_DAYS", "response_format_body",
           "level_of", "FormatMemory"]


# tried in this order, each endpoint stepped down: OpenAI's json_schema (OpenAI, vLLM, Ollama,
# llama.cpp's C++ server); json_object carrying the schema (llama-cpp-python's server, which refuses
# json_schema but turns that schema into a grammar); plain json_object; no response_format (text,
# read with repair)
RESPONSE_FORMATS = ("json_schema", "json_object+schema", "json_object", "text")


FORMAT_ERROR = re.compile(r"response_format|json_schema|json_object|\bgrammar\b", re.I)


OVERFLOW = re.compile(r"context[ _-]?(?:length|window|size)|maximum context|exceeds? (?:the )?(?:available )?"
                       r"context|too many tokens|prompt is too long", re.I)


FORMAT_MEMORY_DAYS = 7.0  # a remembered step-down is probed again after this long (a server upgrade)


def response_format_body(level: str, schema: dict[str, Any], name: str = "rankwise_reply") -> dict[str, Any] | None:
    """The ``response_format`` request field of ``level`` for a reply of JSON ``schema`` (None:
    plain text).

    Example:
        >>> response_format_body("json_object", {"type": "object"})
        {'type': 'json_object'}
        >>> response_format_body("json_object+schema", {"type": "object"})
        {'type': 'json_object', 'schema': {'type': 'object'}}
        >>> response_format_body("json_schema", {"type": "object"})["json_schema"]["name"]
        'rankwise_reply'
        >>> response_format_body("json_schema", {"type": "string", "maxLength": 80})["json_schema"][
        ...     "schema"
        ... ]
        {'type': 'string'}

    A string's ``minLength``/``maxLength`` bound a grammar-constrained reply (llama.cpp turns the
    schema into a grammar, so a small model cannot ramble); OpenAI's strict ``json_schema`` mode
    refuses those keywords, so at that level they are left out.
    """
    if level == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": _strict_schema(schema),
                                                       "strict": True}}
    if level == "json_object+schema":
        return {"type": "json_object", "schema": schema}
    if level == "json_object":
        return {"type": "json_object"}
    return None


_NOT_STRICT = ("minLength", "maxLength")  # string keywords OpenAI's strict json_schema mode refuses


def _strict_schema(schema: Any) -> Any:
    """``schema`` without the keywords strict mode refuses, at any depth."""
    if isinstance(schema, dict):
        return {k: _strict_schema(v) for k, v in schema.items() if k not in _NOT_STRICT}
    if isinstance(schema, list):
        return [_strict_schema(v) for v in schema]
    return schema


def level_of(fmt: Any) -> str | None:
    """The level a ``response_format`` body stands for (None: not one of ours)."""
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object"):
        return None
    return "json_object+schema" if fmt["type"] == "json_object" and "schema" in fmt else fmt["type"]


class FormatMemory:
    """Which ``response_format`` level each endpoint and model took, kept in a JSON file (``path``;
    None: in memory only), so a later run starts where the last one ended instead of probing again.
    A row older than :data:`FORMAT_MEMORY_DAYS` is forgotten; a file that cannot be read or written
    is ignored (the endpoint is probed again), never an error.

    Example:
        >>> m = FormatMemory(None); m.put("http://127.0.0.1:8080/v1", "m", "json_object")
        >>> m.get("http://127.0.0.1:8080/v1", "m"), m.get("http://127.0.0.1:8080/v1", "other")
        ('json_object', None)
    """

    def __init__(self, path: str | PathLike | None) -> None:
        self.path = Path(path) if path is not None else None
        self._rows: dict[str, dict[str, Any]] = {}
        if self.path is not None:
            with contextlib.suppress(OSError, ValueError):
                rows = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(rows, dict):
                    self._rows = {k: v for k, v in rows.items() if isinstance(v, dict)}

    @staticmethod
    def _key(url: str, model: str) -> str:
        return f"{mask_url(url.rstrip('/'))} {model}"

    def get(self, url: str, model: str) -> str | None:
        row = self._rows.get(self._key(url, model)) or {}
        level, when = row.get("response_format"), row.get("checked")
        if level not in RESPONSE_FORMATS or not isinstance(when, (int, float)):
            return None
        return level if time.time() - when < FORMAT_MEMORY_DAYS * 86400 else None

    def put(self, url: str, model: str, level: str) -> None:
        self._rows[self._key(url, model)] = {"response_format": level, "checked": time.time()}
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            from rankwise._atomic import atomic_write_text

            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps(self._rows, indent=1, sort_keys=True))
