"""Reading a judge's reply: tolerant JSON extraction, verdict checks, refusal detection.

Models wrap JSON in code fences, surround it with prose, use single quotes or Python literals, or
stop mid-object. :func:`json_candidates` recovers what can be recovered, the likeliest answer first
(the whole reply, else the last fenced block, else the last object in the text: the answer the
prompt asks for comes last, after anything the model quotes); what cannot be read raises
:class:`ParseError`, whose message is sent back to the model in the one repair attempt.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from rankwise.errors import CountMismatch, ParseError
from rankwise.llm.client import utf8_safe

__all__ = ["ParseError", "CountMismatch", "Judgement", "extract_json", "json_candidates", "parse_verdict",
           "parse_batch", "refusal_of", "answer_refusal", "verdict_schema", "ANY_OBJECT"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js|python)?[ \t]*\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
MAX_REPLY_CHARS = 100_000  # longer replies are not read (a batch of 20 verdicts is a few thousand)
_MAX_RESTARTS = 8
_MAX_ATTEMPTS = 200
_READ_BUDGET = 4 * MAX_REPLY_CHARS  # characters parsed at most, over all the spans tried
_REFUSAL = re.compile(
    r"\b(i['’]?m sorry|i am sorry|i apologi[sz]e|i can['’]?not|i can['’]t|i won['’]t|i will not|"
    r"i['’]?m (?:not )?(?:able|unable) to|unable to (?:help|assist|comply|provide)|as an ai\b|"
    r"against (?:my|the) (?:guidelines|polic))", re.I)
_VERDICT_KEYS = ("verdict", "relevant", "relevance", "is_relevant", "label", "judgement", "judgment", "score")
_GRADE_KEYS = ("grade", "score", "relevance", "verdict", "rating")
_REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "justification")
_YES = {"1", "yes", "y", "true", "relevant", "useful", "pass"}
_NO = {"0", "no", "n", "false", "irrelevant", "not relevant", "not_relevant", "not useful", "fail"}


ANY_OBJECT: dict[str, Any] = {"type": "object"}  # the schema of a reply that is some JSON object


def verdict_schema(graded: bool, n: int | None = None) -> dict[str, Any]:
    """The JSON schema of the verdict reply a judge prompt declares: ``{"verdict": 0|1, "reason":
    ...}`` (``"grade": 0..3`` when graded), or, for a batch of ``n`` chunks, ``{"verdicts": [{"id":
    i, "verdict"|"grade": .., "reason": ..}, ...]}`` with exactly ``n`` items. Sent as
    ``response_format`` where the endpoint takes it (constrained output); the reply is read by
    :func:`parse_verdict` / :func:`parse_batch` all the same.

    Example:
        >>> verdict_schema(False)["properties"]["verdict"]
        {'type': 'integer', 'enum': [0, 1]}
        >>> verdict_schema(True, n=3)["properties"]["verdicts"]["items"]["required"]
        ['id', 'grade', 'reason']
    """
    name, values = ("grade", [0, 1, 2, 3]) if graded else ("verdict", [0, 1])
    item: dict[str, Any] = {"type": "object", "properties": {name: {"type": "integer", "enum": values},
                                                             "reason": {"type": "string", "minLength": 4, "maxLength": 80}},
                            "required": [name, "reason"], "additionalProperties": False}
    if n is None:
        return item
    item = {**item, "properties": {"id": {"type": "integer"}, **item["properties"]}, "required": ["id", name, "reason"]}
    return {"type": "object", "properties": {"verdicts": {"type": "array", "items": item, "minItems": n,
                                                          "maxItems": n}},
            "required": ["verdicts"], "additionalProperties": False}


@dataclass(frozen=True)
class Judgement:
    """One parsed verdict: ``verdict`` 0/1, ``grade`` 0-3 (graded scale only), ``reason``."""

    verdict: int
    grade: int | None
    reason: str | None


def _loads_lenient(text: str) -> Any:
    """json.loads, then the usual repairs: raw line breaks or tabs inside a string (small models
    write them), trailing commas, Python literals, single quotes."""
    for strict in (True, False):
        try:
            return json.loads(text, strict=strict)
        except (ValueError, RecursionError):
            pass
    fixed = _TRAILING_COMMA.sub(r"\1", text.replace("“", '"').replace("”", '"'))
    try:
        return json.loads(fixed)
    except (ValueError, RecursionError):
        pass
    py = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", fixed)))
    try:
        value = ast.literal_eval(py)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ParseError("the reply is not valid JSON") from None
    if not isinstance(value, (dict, list)):
        raise ParseError("the reply is not a JSON object")
    return value


def _balanced(text: str, start: int) -> str | None:
    """The bracketed span opening at ``start``, honouring quotes; None if it never closes."""
    open_ch = text[start]
    close_ch = "}" if open_ch == "{" else "]"
    depth, quote, escape = 0, "", False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def _bracket_spans(text: str) -> set[tuple[int, int]]:
    """``(start, end)`` of every balanced ``{...}`` / ``[...]`` span, quotes inside brackets
    honoured.

    One pass with a stack, so a hostile reply (``{{{{...``) costs linear time, not quadratic; an
    open quote (a stray apostrophe in prose) restarts the pass just after the first bracket it left
    open, at most ``_MAX_RESTARTS`` times."""
    spans: set[tuple[int, int]] = set()
    pos, n = 0, len(text)
    for _ in range(_MAX_RESTARTS):
        stack: list[int] = []
        quote, escape = "", False
        for i in range(pos, n):
            ch = text[i]
            if not stack:
                if ch in "{[":
                    stack.append(i)
            elif quote:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch in "{[":
                stack.append(i)
            elif ch in "}]":
                start = stack.pop()
                if (text[start] == "{") == (ch == "}"):
                    spans.add((start, i + 1))
                else:  # mismatched brackets: nothing open can close properly
                    stack.clear()
        if not stack or not quote:  # all closed, or brackets really left open: another pass finds nothing new
            break
        pos = stack[0] + 1  # a quote left open (an apostrophe in prose?): read on after that bracket
    return spans


def _spans(text: str) -> list[str]:
    """The top-level bracketed spans of ``text`` that parse, in order (spans inside one are not
    listed; the spans inside one that does not parse are tried instead)."""
    out: list[str] = []
    covered = -1
    attempts, budget = 0, _READ_BUDGET
    for start, end in sorted(_bracket_spans(text), key=lambda se: (se[0], -se[1])):
        if start < covered:
            continue
        attempts += 1
        budget -= end - start
        if attempts > _MAX_ATTEMPTS or budget < 0:  # bounded work, whatever the reply holds
            break
        try:
            _loads_lenient(text[start:end])
        except ParseError:
            continue
        out.append(text[start:end])
        covered = end
    return out


def json_candidates(text: str | None) -> list[Any]:
    """Every JSON value a reply may hold as its answer, the likeliest first: the whole reply if it
    is JSON; else the code-fenced blocks, last first; else the top-level objects in the text, last
    first.

    The answer the prompt asks for comes at the end, so a reply that quotes an object (from the
    chunk, or as an example) before its own answer is read by its answer.

    Example:
        >>> json_candidates(
        ...     'The chunk says {"verdict": 1}. My answer: {"verdict": 0, "reason": "r"}'
        ... )
        [{'verdict': 0, 'reason': 'r'}, {'verdict': 1}]
    """
    if text is None or not text.strip():
        raise ParseError("the reply is empty")
    if len(text) > MAX_REPLY_CHARS:
        raise ParseError(f"the reply is too long ({len(text):,} characters; a verdict needs a few hundred)")
    try:
        return [_loads_lenient(text.strip())]
    except ParseError:
        pass
    out: list[Any] = []
    for block in reversed([m.group(1).strip() for m in _FENCE.finditer(text)]):
        try:
            out.append(_loads_lenient(block))
            continue
        except ParseError:
            pass
        out.extend(_loads_lenient(span) for span in reversed(_spans(block)))
    if not out:
        out.extend(_loads_lenient(span) for span in reversed(_spans(text)))
    out = [v for v in out if isinstance(v, dict) or (isinstance(v, list) and v and isinstance(v[0], dict))]
    if out:
        return out
    if "{" not in text:
        raise ParseError("no JSON object in the reply")
    if _balanced(text, text.index("{")) is None:
        raise ParseError("the JSON object in the reply is cut off (unbalanced braces)")
    raise ParseError("the reply is not valid JSON")


def extract_json(text: str | None) -> Any:
    """The JSON object (or array) in a model reply, tolerating fences, prose and Python-style
    quoting; the likeliest answer of :func:`json_candidates`.

    Example:
        >>> extract_json("Sure! ```json\\n{'verdict': 1, 'reason': 'ok',}\\n``` Hope it helps.")
        {'verdict': 1, 'reason': 'ok'}
    """
    return json_candidates(text)[0]


def _first_valid(candidates: list[Any], read: Any) -> Any:
    """``read`` of the first candidate it accepts; else the error it gave for the likeliest one."""
    first: ParseError | None = None
    for cand in candidates:
        try:
            return read(cand)
        except CountMismatch as exc:
            first = first or exc
        except ParseError as exc:
            first = first or exc
    assert first is not None
    raise first


def _first_key(obj: dict, keys: tuple[str, ...]) -> tuple[str | None, Any]:
    lowered = {str(k).lower(): k for k in obj}
    for k in keys:
        if k in lowered:
            return k, obj[lowered[k]]
    return None, None


def _binary(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str):
        v = value.strip().strip(".").lower()
        if v in _YES:
            return 1
        if v in _NO:
            return 0
    raise ParseError(f'"verdict" must be 1 or 0, got {json.dumps(value)}')


def _grade(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3:
        return value
    raise ParseError(f'"grade" must be an integer 0, 1, 2 or 3, got {json.dumps(value)}')


def _judgement(obj: Any, graded: bool, relevant_from: int) -> Judgement:
    if not isinstance(obj, dict):
        raise ParseError(f"expected a JSON object, got {type(obj).__name__}")
    _, reason = _first_key(obj, _REASON_KEYS)
    reason = None if reason is None else utf8_safe(str(reason).strip()) or None
    if graded:
        key, value = _first_key(obj, _GRADE_KEYS)
        if key is None:
            raise ParseError('the JSON object has no "grade"')
        g = _grade(value)
        return Judgement(int(g >= relevant_from), g, reason)
    key, value = _first_key(obj, _VERDICT_KEYS)
    if key is None:
        raise ParseError('the JSON object has no "verdict"')
    return Judgement(_binary(value), None, reason)


def parse_verdict(text: str | None, *, graded: bool = False, relevant_from: int = 2) -> Judgement:
    """One verdict from a reply; graded replies give ``verdict = grade >= relevant_from``.

    Example:
        >>> parse_verdict('{"verdict": 1, "reason": "states the date"}')
        Judgement(verdict=1, grade=None, reason='states the date')
        >>> parse_verdict('{"grade": 2, "reason": "partial"}', graded=True).verdict
        1
    """
    def read(obj: Any) -> Judgement:
        if isinstance(obj, list) and len(obj) == 1:
            obj = obj[0]
        return _judgement(obj, graded, relevant_from)

    return _first_valid(json_candidates(text), read)


def parse_batch(text: str | None, n: int, *, graded: bool = False, relevant_from: int = 2) -> list[Judgement]:
    """``n`` verdicts, in chunk order, from a batch reply ``{"verdicts": [{"id", "verdict",
    "reason"}]}``.

    Items are matched by ``id`` (1..n) when every item has one, else by position. A different count,
    a duplicate or an unknown id raises :class:`CountMismatch`.

    Example:
        >>> [
        ...     j.verdict
        ...     for j in parse_batch(
        ...         '{"verdicts": [{"id": 2, "verdict": 0}, {"id": 1, "verdict": 1}]}', 2
        ...     )
        ... ]
        [1, 0]
    """
    return _first_valid(json_candidates(text), lambda obj: _batch(obj, n, graded, relevant_from))


def _batch(obj: Any, n: int, graded: bool, relevant_from: int) -> list[Judgement]:
    items = obj
    if isinstance(obj, dict):
        _, items = _first_key(obj, ("verdicts", "judgements", "judgments", "results", "chunks", "grades"))
        if items is None:
            raise ParseError('the JSON object has no "verdicts" list')
    if not isinstance(items, list):
        raise ParseError('"verdicts" must be a list')
    if len(items) != n:
        raise CountMismatch(f"expected {n} verdicts, one per chunk, got {len(items)}")
    ids = [it.get("id") if isinstance(it, dict) else None for it in items]
    if all(i is not None for i in ids):
        try:
            ids = [int(i) for i in ids]
        except (TypeError, ValueError):
            raise ParseError(f"chunk ids must be the numbers 1..{n}, got {ids}") from None
        if sorted(ids) != list(range(1, n + 1)):
            raise CountMismatch(f"chunk ids must be 1..{n} once each, got {ids}")
        items = [it for _, it in sorted(zip(ids, items, strict=True), key=lambda p: p[0])]
    return [_judgement(it, graded, relevant_from) for it in items]


def refusal_of(content: str | None, refusal: str | None = None, finish_reason: str | None = None) -> str | None:
    """The refusal text if the reply is a refusal (API refusal field, content filter, or apology
    without any JSON), else None.

    Example:
        >>> refusal_of("I'm sorry, but I can't help with that.")
        "I'm sorry, but I can't help with that."
        >>> refusal_of('{"verdict": 0, "reason": "I cannot see the answer here"}') is None
        True
    """
    if refusal:
        return refusal.strip() or "refused"
    if finish_reason == "content_filter":
        return "blocked by the endpoint's content filter"
    if content and "{" not in content and _REFUSAL.search(content):
        return content.strip()[:300]
    return None


def answer_refusal(content: str | None, refusal: str | None = None, finish_reason: str | None = None) -> str | None:
    """The refusal text if a free-text answer is a refusal (API refusal field, content filter, or a
    reply that opens with an apology or a refusal), else None. Only the opening counts: an answer
    that mentions "I can't" later on is an answer; "I don't know." (what the answer prompt asks for)
    is an answer.

    Example:
        >>> answer_refusal("I'm sorry, but I can't help with that request.")
        "I'm sorry, but I can't help with that request."
        >>> (
        ...     answer_refusal("I don't know.") is None,
        ...     answer_refusal("Paris. I can't say more.") is None,
        ... )
        (True, True)
    """
    if refusal:
        return refusal.strip() or "refused"
    if finish_reason == "content_filter":
        return "blocked by the endpoint's content filter"
    text = (content or "").strip().lstrip("\"'*_ ")
    if _REFUSAL.match(text) or re.match(r"sorry\b", text, re.I):
        return text[:300]
    return None
