"""Replies checked at the boundary: a chat completion read field by field (:func:`reply_of`), text
made UTF-8 safe, and the one-line causes of a failed request (HTTP error bodies, refused or dropped
connections).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

from rankwise.errors import (
    ReplyError,
)
from rankwise.llm.endpoint import value_shape

__all__ = ["ChatReply", "reply_of", "utf8_safe", "one_line", "refused_connection", "error_message",
           "connect_failure", "error_cause"]


@dataclass
class ChatReply:
    """One completion: its text (or refusal), why it stopped, and its token counts."""

    content: str | None
    refusal: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens the server took from its cache, where it says


def _count(usage: dict, key: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReplyError(f"bad reply: usage.{key} is {value_shape(value)} ({str(value)[:40]!r}), not a token count")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ReplyError(f"bad reply: usage.{key} is {value!r}, not a token count")
    if value < 0:
        raise ReplyError(f"bad reply: usage.{key} is negative ({value})")
    return int(value)


def reply_of(resp: Any) -> ChatReply:
    """A chat-completion body checked field by field; anything that is not one raises
    :class:`ReplyError`.

    ``usage`` may be absent (some local servers send none: 0 tokens); when present it must be an
    object of non-negative integer counts. ``choices`` must be a non-empty list whose first item has
    a ``message`` object; its ``content`` is text, null, or a list of text parts.

    Example:
        >>> reply_of({"choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}]}).content
        '{}'
        >>> reply_of({"choices": {"message": {}}})
        Traceback (most recent call last):
        rankwise.errors.ReplyError: bad reply: choices is an object, not a list
    """
    if not isinstance(resp, dict):
        raise ReplyError(f"bad reply: the body is {value_shape(resp)}, not a JSON object: {str(resp)[:80]!r}")
    usage = resp.get("usage")
    if usage is None:
        usage = {}
    if not isinstance(usage, dict):
        raise ReplyError(f"bad reply: usage is {value_shape(usage)} ({str(usage)[:40]!r}), not an object")
    pt, ct = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    cached = _cached_tokens(usage, resp.get("timings"))
    if "choices" not in resp:
        error = resp.get("error")
        if isinstance(error, dict) and error.get("message"):
            raise ReplyError(f"bad reply: an error in a 200 reply: {str(error['message'])[:200]}")
        raise ReplyError("bad reply: no choices")
    choices = resp["choices"]
    if not isinstance(choices, list):
        raise ReplyError(f"bad reply: choices is {value_shape(choices)}, not a list")
    if not choices:
        raise ReplyError("bad reply: choices is empty")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ReplyError(f"bad reply: choices[0] is {value_shape(choice)}, not an object")
    msg = choice.get("message")
    if not isinstance(msg, dict):
        raise ReplyError("bad reply: choices[0] has no message" if msg is None
                         else f"bad reply: choices[0].message is {value_shape(msg)}, not an object")
    content = msg.get("content")
    if isinstance(content, list):  # content parts
        if not all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content):
            raise ReplyError("bad reply: message.content is a list that is not of text parts")
        content = "".join(p.get("text", "") for p in content)
    elif content is not None and not isinstance(content, str):
        raise ReplyError(f"bad reply: message.content is {value_shape(content)} ({str(content)[:40]!r}), not text")
    refusal = msg.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise ReplyError(f"bad reply: message.refusal is {value_shape(refusal)}, not text")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise ReplyError(f"bad reply: finish_reason is {value_shape(finish)}, not text")
    return ChatReply(content=utf8_safe(content), refusal=utf8_safe(refusal), finish_reason=utf8_safe(finish),
                     prompt_tokens=pt, completion_tokens=ct, cached_tokens=cached)


def _cached_tokens(usage: dict, timings: Any) -> int:
    """Prompt tokens served from the server's cache: ``usage.prompt_tokens_details.cached_tokens``
    (OpenAI, vLLM), else llama.cpp's ``timings.cache_n``; 0 when the server does not say. Never
    raises: a detail the server fills oddly is not worth failing a reply over."""
    for holder, key in ((usage.get("prompt_tokens_details"), "cached_tokens"), (timings, "cache_n")):
        if isinstance(holder, dict):
            with contextlib.suppress(ReplyError):
                value = _count(holder, key)
                if value:
                    return value
    return 0


def utf8_safe(text: str | None) -> str | None:
    """``text`` as UTF-8 can carry it: a lone surrogate (``"\\ud800"``, from a bad escape in a JSON
    file or a reply) becomes U+FFFD instead of failing a request, a cache write or a records file.

    Example:
        >>> utf8_safe("a\\ud800b")
        'a\ufffdb'
    """
    if text is None:
        return None
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def refused_connection(exc: BaseException) -> bool:
    """Whether a connection error is a connection never made (refused, no such host), not a reset.
    """
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        names = {c.__name__ for c in type(cur).__mro__}
        if names & {"ClientConnectorError", "ConnectError", "ConnectionRefusedError", "gaierror"}:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def error_message(exc: Any) -> str:
    return utf8_safe(_raw_error_message(exc)) or ""


def _raw_error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and "error" not in body and body.get("detail"):
        return _detail_message(body["detail"])[:300]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(getattr(exc, "message", exc))[:300]


def _detail_message(detail: Any) -> str:
    """A FastAPI/pydantic validation body (``{"detail": [{"loc": [...], "msg": ...}]}``, what
    llama-cpp-python's server sends for a field it does not take) as one line: ``body.x.y: msg;
    ...``."""
    if not isinstance(detail, list):
        return str(detail)
    parts = []
    for item in detail[:5]:
        if isinstance(item, dict):
            loc = ".".join(str(p) for p in item.get("loc") or [])
            parts.append(f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", "")))
        else:
            parts.append(str(item))
    return "; ".join(parts)


def connect_failure(exc: BaseException) -> str | None:
    """Why the connection could not be made, if a timeout error really is a refused/failed connect.
    """
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ == "ClientConnectorError" or (
                isinstance(cur, OSError) and not isinstance(cur, TimeoutError)):
            return str(cur).splitlines()[0][:200] or type(cur).__name__
        cur = cur.__cause__ or cur.__context__
    return None


def error_cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__
    text = str(inner or exc) or type(inner or exc).__name__
    return text.splitlines()[0][:200]
