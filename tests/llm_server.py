"""A real Chat Completions server on loopback, for the LLM-judge tests and the throughput benchmark.

Speaks ``POST /v1/chat/completions`` (the OpenAI wire format, with ``usage`` token counts) and
answers deterministically: a chunk is relevant (verdict 1) iff it shares a keyword (a word of 4+
letters that is not a stop word) with the target text, i.e. the ``<reference_answer>`` if the prompt
has one, else the ``<response>``, else the ``<question>``. Graded prompts (asking for ``"grade"``)
get the number of distinct shared keywords, capped at 3. Batch prompts (several ``<chunk id="N">``
blocks) get one verdict per chunk. It also answers Ragas' context-precision prompt (JSON ``input:``
with ``context`` and ``answer``/``ground_truth``) with the same rule, so both tools can be timed
against one server.

Faults are injected by markers in the prompt text, ``[[NAME]]`` or ``[[NAMExK]]`` (only the first K
times the same conversation is seen; retries and repair requests of a conversation count as later
times, since they repeat its first user message):

    429        HTTP 429 with ``Retry-After`` (seconds, settable: ``retry_after``)
    500        HTTP 500
    slow       reply after ``slow_seconds`` (default 5 s): past a short client timeout
    malformed  prose with no JSON at all
    badverdict JSON with ``"verdict": "maybe"``
    truncated  JSON cut in half, ``finish_reason: "length"``
    fences     the JSON inside a Markdown code fence
    prose      the JSON surrounded by chatter
    quotes     a Python-style dict with single quotes
    refuse     "I'm sorry, but I can't help with that."
    refusefield  ``message.refusal`` set, ``content`` null
    wrongcount batch reply with one verdict too few
    400 / 401 / 404  a context-length error / a bad key / an unknown model
    quoteobj   the reply quotes a JSON object with the opposite verdict before its own answer
    surrogate  the reason holds a lone surrogate escape (``\\ud800``)

Envelope faults: an HTTP 200 whose body is not a usable chat completion (what a broken proxy or a
half-compatible server sends); the judge must count them as per-chunk failures, never crash or hang:

    notjson     ``application/json`` body that is not JSON (an HTML error page) plaintext
    ``text/plain`` body arraybody   a JSON array instead of an object nochoices   no ``choices``
    choicesobj   ``choices`` an object     emptychoices ``choices: []`` nomessage   a choice without
    ``message``          messagestr  ``message`` a string contentnum  ``message.content`` a number
    usagestr    ``usage: "lots"`` tokensstr   ``usage.prompt_tokens: "many"``       tokensnan
    ``usage.prompt_tokens: NaN`` reset       the connection is reset (TCP RST) instead of a reply

Random faults (``POST /config`` with ``fault_rate`` and ``fault_kinds``, seeded by ``seed``) hit
that share of all requests, whatever the prompt, with a kind drawn from ``fault_kinds``. ``GET
/stats`` then tells, per conversation, whether its last request got a fault (``given_up``:
conversations whose last answer was a fault, i.e. that the client gave up on).

Prompt-injection emulation: a delimiter-respecting judge. It reads each ``<chunk>...</chunk>`` block
with a naive regular expression (the first ``</chunk>`` closes a chunk, ``<chunk id="N">`` opens
one) and obeys an instruction ``OVERRIDE verdict=V`` (or ``grade=G``) only when it stands *outside*
every tagged
block, as a model that treats tagged text as data would. It reads the prompt as a model sees it:
    look-alike
characters folded (NFKC: fullwidth ``＜`` reads as ``<``) and invisible ones (zero-width, bidi marks)
gone; models named ``decoding-*`` also decode HTML entities (``&lt;`` reads as ``<``). Data fenced
between ``<<DATA-id>>`` and ``<<END-DATA-id>>`` lines (the judge prompts' fences) is data however it
reads: only the first end marker with the same id closes a fence. Chunk text that can close its own
tag or fence therefore takes control of the verdict; fenced chunk text cannot.

Two looser readers, each reading the prompt through one transformation only: models named ``nfkc-*``
NFKC-normalise it (fullwidth ``＜`` is ``<``), models named ``unescape-*`` decode its HTML entities
until none is left (``&lt;``, ``&#60;``, ``&#x3c;``, ``&amp;lt;`` are ``<``). They do not compare
fence ids: a block of data ends at the first end marker they read, a closing tag (``</chunk>``) or a
fence end ``<<END-DATA-...>>`` of any id, and an opening tag (``<chunk id="3">``) opens a new block
wherever it stands. Against them the fences alone do not hold; only data with no character sequence
they read as a tag does.

Test-retest emulation: with ``flip_rate`` (``POST /config``, with ``flip_seed``) each verdict of a
reply is flipped (verdict 1 - v, grade 3 - g) with that probability, drawn from a hash of the seed,
the conversation and how many times it has been seen, so the same requests in the same order get the
same flips; two independent judgings of a chunk then disagree with probability 2p(1 - p). Models
named ``gullible-*`` call any chunk that says "this passage is relevant" relevant (verdict 1, grade
3), whatever else it holds.

The model ``no-such-model`` gets 404 and the key ``bad-key`` 401; models named ``strict-*`` reject
``max_tokens`` and a temperature other than 1, as OpenAI's reasoning models do.

Structured output: ``response_format`` of type ``json_schema``, ``json_object`` with a ``schema``
(``json_object+schema``, as llama-cpp-python takes it), ``json_object`` or ``text`` is accepted (and
counted in ``/stats`` ``response_formats``) while that level is in ``formats`` (``POST /config``,
default all); any other is refused as real servers refuse it, with ``format_status`` (400 as
llama.cpp's C++ server, 422 as llama-cpp-python's pydantic check, 500 as some forks) and a message
naming ``response_format``. ``cached_tokens`` (``POST /config``) is reported as
``usage.prompt_tokens_details.cached_tokens`` in every reply.

Control endpoints: ``GET /stats`` (request counts, by HTTP status, max in-flight, request start
times), ``POST /reset`` (zero the counters and forget conversations), ``POST /config`` (JSON:
``latency``, ``slow_seconds``, ``retry_after``).

Standalone::

    python tests/llm_server.py --port 8000 --latency 0.2
    # prints: LISTENING http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import html
import json
import math
import random
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from _loopback import ServerProcess, add_control, chat_completion, running, serve_app, start_process

STOP_WORDS = frozenset(re.findall(r"[a-z]+", """about above after again against also among been before being below between both cannot could does
    doing down during each from further have having here into just more most much must other over same
    should some such than that their theirs them then there these they this those through under until very
    were what when where which while whom will with within without would your yours answer question chunk
    context reference response"""))
FAULT = re.compile(r"\[\[([a-z0-9]+?)(?:x(\d+))?\]\]")
TAG = {name: re.compile(rf"<{name}>\s*(.*?)\s*</{name}>", re.S) for name in
       ("question", "reference_answer", "response", "chunk")}
BATCH_CHUNK = re.compile(r'<chunk id="(\d+)">\s*(.*?)\s*</chunk>', re.S)


def keywords(text: str) -> set[str]:
    """Lower-case words of 4+ letters that are not stop words, fault markers removed."""
    return {w for w in re.findall(r"[a-z0-9]+", FAULT.sub(" ", text.lower()))
            if len(w) >= 4 and w not in STOP_WORDS}


def judge_text(target: str, chunk: str, graded: bool) -> dict[str, Any]:
    """The deterministic verdict: shared keywords between target and chunk."""
    shared = sorted(keywords(target) & keywords(chunk))
    reason = (f"the chunk mentions {', '.join(shared[:3])}" if shared
              else "the chunk shares no keyword with the target text")
    if graded:
        return {"grade": min(3, len(shared)), "reason": reason}
    return {"verdict": 1 if shared else 0, "reason": reason}


@dataclass
class ServerState:
    latency: float = 0.0
    slow_seconds: float = 5.0
    retry_after: str = "1"
    requests: int = 0
    by_status: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    inflight: int = 0
    max_inflight: int = 0
    started: list[float] = field(default_factory=list)
    seen: Counter = field(default_factory=Counter)
    repairs: int = 0
    batch_calls: int = 0

    fault_rate: float = 0.0
    fault_kinds: list[str] = field(default_factory=list)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    last_faulted: dict[str, bool] = field(default_factory=dict)
    random_faults: Counter = field(default_factory=Counter)
    authorization: str | None = None

    epoch: int = 0
    formats: tuple[str, ...] = ("json_schema", "json_object+schema", "json_object", "text")
    format_status: int = 400
    response_formats: Counter = field(default_factory=Counter)
    cached_tokens: int = 0
    flip_rate: float = 0.0
    flip_seed: int = 0
    flips: int = 0

    def reset(self) -> None:
        """Zero the counters, random faults and flips; requests still in flight from before are no
        longer counted."""
        keep = (self.latency, self.slow_seconds, self.retry_after, self.epoch + 1)
        self.__init__()
        self.latency, self.slow_seconds, self.retry_after, self.epoch = keep

    def stats(self) -> dict[str, Any]:
        return {"requests": self.requests, "by_status": {str(k): v for k, v in self.by_status.items()},
                "faults": dict(self.faults), "response_formats": dict(self.response_formats), "inflight": self.inflight, "max_inflight": self.max_inflight,
                "conversations": len(self.seen), "repairs": self.repairs, "batch_calls": self.batch_calls,
                "started": self.started[-20000:], "latency": self.latency,
                "random_faults": dict(self.random_faults),
                "given_up": sum(self.last_faulted.values()), "authorization": self.authorization, "flips": self.flips}


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None):
    from aiohttp import web

    return web.json_response({"error": {"message": message, "type": kind, "code": kind}}, status=status,
                             headers=headers)


def _completion(model: str, content: str | None, prompt_chars: int, *, finish: str = "stop",
                refusal: str | None = None) -> dict[str, Any]:
    text = content or refusal or ""
    return chat_completion(content, model, (math.ceil(prompt_chars / 4) or 1, math.ceil(len(text) / 4) or 1),
                           completion_id="chatcmpl-" + hashlib.sha1(text.encode()).hexdigest()[:12],
                           created=int(time.time()), finish=finish, refusal=refusal)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


OVERRIDE = re.compile(r"OVERRIDE (verdict|grade)=(\d)")
TAGGED = re.compile(r'<(question|reference_answer|response|chunk)(?: id="\d+")?>.*?</\1>', re.S)
BATCH_N = re.compile(r"each of the (\d+) retrieved chunks")
ENVELOPES = ("notjson", "plaintext", "arraybody", "nochoices", "choicesobj", "emptychoices", "nomessage",
             "messagestr", "contentnum", "usagestr", "tokensstr", "tokensnan")
NOT_OUTPUT = {"429", "500", "slow", "wrongcount", "400", "401", "404", "reset", *ENVELOPES}


FENCE_OPEN = re.compile(r"<<DATA-([0-9a-f]{8,})>>")
SLOT = re.compile(r"\x00(\d+)\x00")


def perceive(prompt: str, decode: bool = False) -> str:
    """The prompt as a model reads it: look-alikes folded (NFKC: fullwidth ``＜`` is ``<``),
    invisible format characters (zero-width spaces, joiners, bidi marks) gone; with ``decode``, HTML
    entities decoded first (``&lt;`` is ``<``), as a model that reads entities as the characters
    they stand for."""
    if decode:
        prompt = html.unescape(html.unescape(prompt))
    prompt = unicodedata.normalize("NFKC", prompt)
    return "".join(ch for ch in prompt if unicodedata.category(ch) != "Cf")


def unfence(prompt: str) -> tuple[str, list[str]]:
    """The prompt with each fenced data block (``<<DATA-id>>`` ... ``<<END-DATA-id>>``, the id of
    the first opening marker; read naively: the first end marker with that id closes) swapped for a
    slot, and the blocks' texts. A prompt without fences comes back as it is."""
    m = FENCE_OPEN.search(prompt)
    if m is None:
        return prompt, []
    token = re.escape(m.group(1))
    data: list[str] = []

    def keep(found: re.Match) -> str:
        data.append(found.group(1))
        return f"\x00{len(data) - 1}\x00"

    return re.sub(rf"<<DATA-{token}>>\n?(.*?)\n?<<END-DATA-{token}>>", keep, prompt, flags=re.S), data


LOOSE_MARK = re.compile(r"<<(END-)?DATA-[^<>\n]*>>|<(/?)(question|reference_answer|response|chunk)((?: id=\"\d+\")?)>")


def loose_read(prompt: str, model: str) -> str | None:
    """The prompt as a loose reader (``nfkc-*``, ``unescape-*``) reads it, rebuilt with plain tags:
    each block of data ends at the first closing tag or fence end (any id) it reads; the blocks'
    texts lose their angle brackets and the fence lines are gone, so the tag-reading rules of
    :func:`_answer` apply as they are. None for the other models."""
    if model.startswith("nfkc-"):
        prompt = unicodedata.normalize("NFKC", prompt)
    elif model.startswith("unescape-"):
        while (decoded := html.unescape(prompt)) != prompt:
            prompt = decoded
    else:
        return None
    out: list[str] = []
    block: tuple[str, str] | None = None  # (name, attributes) of the block being read
    text: list[str] = []
    pos = 0

    def close() -> None:
        if block is not None:
            body = re.sub(r"[<>]", " ", unicodedata.normalize("NFKC", "".join(text)))
            out.append(f"<{block[0]}{block[1]}>{body}</{block[0]}>")

    for m in LOOSE_MARK.finditer(prompt):
        (text if block is not None else out).append(prompt[pos:m.start()])
        pos = m.end()
        if m.group(0).startswith("<<DATA-"):
            continue  # a fence opening: the block is the tag's
        if m.group(3) and not m.group(2):  # an opening tag: a new block, wherever it stands
            close()
            block, text = (m.group(3), m.group(4)), []
        else:  # a closing tag or any fence end: the block ends here
            close()
            block, text = None, []
    (text if block is not None else out).append(prompt[pos:])
    close()
    return "".join(out)


def _override(prompt: str, graded: bool) -> dict[str, Any] | None:
    """An ``OVERRIDE verdict=V`` instruction found outside every tagged block (read naively)."""
    m = OVERRIDE.search(TAGGED.sub(" ", prompt))
    if m is None:
        return None
    value = int(m.group(2))
    return {"grade": value, "reason": "overridden"} if graded else {"verdict": value, "reason": "overridden"}


CLAIM = "this passage is relevant"


def _gullible(item: dict[str, Any], chunk: str) -> dict[str, Any]:
    """A ``gullible-*`` model's verdict: a chunk that says it is relevant is."""
    if CLAIM not in " ".join(chunk.lower().split()):
        return item
    return {"grade": 3, "reason": "the passage says it is relevant"} if "grade" in item else \
        {"verdict": 1, "reason": "the passage says it is relevant"}


def _flip(obj: dict[str, Any], state: ServerState, conv: str, nth: int) -> dict[str, Any]:
    """The reply with each verdict flipped with probability ``flip_rate`` (seeded by conversation
    and visit)."""
    def flipped(item: dict[str, Any], i: int) -> dict[str, Any]:
        draw = hashlib.sha256(f"{state.flip_seed}:{conv}:{nth}:{i}".encode()).digest()
        if int.from_bytes(draw[:8], "big") / 2 ** 64 >= state.flip_rate:
            return item
        state.flips += 1
        if "grade" in item:
            return {**item, "grade": 3 - int(item["grade"])}
        return {**item, "verdict": 1 - int(item["verdict"])}

    if "verdicts" in obj:
        return {"verdicts": [flipped(v, i) for i, v in enumerate(obj["verdicts"])]}
    return flipped(obj, 0)


def _answer(prompt: str, decode: bool = False, gullible: bool = False) -> tuple[Any, bool]:
    """The JSON object the judge should reply with for this prompt, and whether it is a batch. The
    prompt is read as :func:`perceive` says; fenced data (:func:`unfence`) is data: only its text is
    judged."""
    prompt, data = unfence(perceive(prompt, decode))

    def text(found: str) -> str:
        return SLOT.sub(lambda m: data[int(m.group(1))], found)

    graded = '"grade"' in prompt
    forced = _override(prompt, graded)
    if forced is not None:
        n = BATCH_N.search(prompt)
        if n is not None:
            return {"verdicts": [{"id": i, **forced} for i in range(1, int(n.group(1)) + 1)]}, True
        return forced, False
    target = None
    for name in ("reference_answer", "response", "question"):
        m = TAG[name].search(prompt)
        if m:
            target = text(m.group(1))
            break
    batch = BATCH_CHUNK.findall(prompt)
    if batch:
        items = []
        for idx, chunk_text in batch:
            item = judge_text(target or "", text(chunk_text), graded)
            item = _gullible(item, text(chunk_text)) if gullible else item
            items.append({"id": int(idx), **item})
        return {"verdicts": items}, True
    chunk = TAG["chunk"].search(prompt)
    if chunk is not None:
        item = judge_text(target or "", text(chunk.group(1)), graded)
        return (_gullible(item, text(chunk.group(1))) if gullible else item), False
    ragas = _ragas_input(text(prompt))
    if ragas is not None:
        context, answer = ragas
        out = judge_text(answer, context, False)
        return {"reason": out["reason"], "verdict": out["verdict"]}, False
    return {"verdict": 0, "reason": "no chunk found in the prompt"}, False


def _ragas_input(prompt: str) -> tuple[str, str] | None:
    """Ragas puts the case as a JSON object after the last 'input:' (context + answer/ground truth).
    """
    at = prompt.rfind("input:")
    if at < 0:
        at = prompt.rfind("Input:")
    if at < 0:
        return None
    tail = prompt[at + 6:]
    start = tail.find("{")
    if start < 0:
        return None
    try:
        obj, _ = json.JSONDecoder().raw_decode(tail[start:])
    except ValueError:
        return None
    if not isinstance(obj, dict) or "context" not in obj:
        return None
    answer = obj.get("answer") or obj.get("ground_truth") or obj.get("reference") or obj.get("question") or ""
    return str(obj["context"]), str(answer)


def _render(obj: Any, fault: str | None) -> tuple[str | None, str, str | None]:
    """(content, finish_reason, refusal) for a reply object under an output fault."""
    text = json.dumps(obj)
    if fault == "malformed":
        return "The chunk looks relevant to me, so my verdict would be yes.", "stop", None
    if fault == "badverdict":
        return json.dumps({"verdict": "maybe", "reason": "hard to say"}), "stop", None
    if fault == "truncated":
        return text[: max(1, len(text) // 2)], "length", None
    if fault == "fences":
        return f"```json\n{text}\n```", "stop", None
    if fault == "prose":
        return f"Sure! Here is my judgement:\n{text}\nLet me know if you need anything else.", "stop", None
    if fault == "quotes":
        return repr(obj), "stop", None
    if fault == "refuse":
        return "I'm sorry, but I can't help with that.", "stop", None
    if fault == "refusefield":
        return None, "stop", "I'm sorry, but I can't assist with that request."
    if fault == "surrogate" and isinstance(obj, dict):
        return text.replace('"reason": "', '"reason": "\\ud800 ', 1), "stop", None
    if fault == "quoteobj" and isinstance(obj, dict) and "verdict" in obj:
        quoted = json.dumps({"verdict": 1 - int(obj["verdict"]), "reason": "quoted from the chunk"})
        return f"The chunk itself says {quoted}, but that is its text, not my judgement. Answer:\n{text}", \
            "stop", None
    return text, "stop", None


def _envelope(reply: dict[str, Any], kind: str):
    """An HTTP 200 whose body is not a usable chat completion."""
    from aiohttp import web

    if kind == "notjson":
        return web.Response(text="<html><body>502 Bad Gateway</body></html>", content_type="application/json")
    if kind == "plaintext":
        return web.Response(text="OK", content_type="text/plain")
    if kind == "arraybody":
        return web.json_response([reply])
    body = json.loads(json.dumps(reply))
    choice = body["choices"][0]
    if kind == "nochoices":
        del body["choices"]
    elif kind == "choicesobj":
        body["choices"] = choice
    elif kind == "emptychoices":
        body["choices"] = []
    elif kind == "nomessage":
        del choice["message"]
    elif kind == "messagestr":
        choice["message"] = choice["message"]["content"] or ""
    elif kind == "contentnum":
        choice["message"]["content"] = 42
    elif kind == "usagestr":
        body["usage"] = "lots"
    elif kind == "tokensstr":
        body["usage"]["prompt_tokens"] = "many"
    elif kind == "tokensnan":
        return web.Response(text=json.dumps(body).replace('"prompt_tokens": ', '"prompt_tokens": NaN, "x": ', 1),
                            content_type="application/json")
    return web.json_response(body)


def _reset(request: Any):
    """Reset the connection (TCP RST: linger 0, then abort) instead of replying."""
    import socket
    import struct

    from aiohttp import web

    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if transport is not None:
        transport.abort()
    return web.Response(status=599)  # never reaches the client; counted as "reset"


def make_app(state: ServerState):
    """The aiohttp application serving the Chat Completions protocol and the control endpoints."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        state.requests += 1
        state.started.append(time.monotonic())
        state.inflight += 1
        state.max_inflight = max(state.max_inflight, state.inflight)
        epoch = state.epoch
        try:
            resp = await _chat(request)
        finally:
            if epoch == state.epoch:  # not a straggler from before a reset
                state.inflight -= 1
        if epoch == state.epoch:
            state.by_status["reset" if resp.status == 599 else resp.status] += 1
        return resp

    async def _chat(request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        messages = body.get("messages") or []
        if not messages or not body.get("model"):
            return _error(400, "model and messages are required", "invalid_request_error")
        state.authorization = request.headers.get("Authorization")
        users = [_text_of(m) for m in messages if m.get("role") == "user"]
        first_user = users[0] if users else ""
        prompt = first_user  # the case is in the user message (a system prompt may name the tags)
        conv = hashlib.sha256(first_user.encode()).hexdigest()
        state.seen[conv] += 1
        nth = state.seen[conv]
        if len(users) > 1:
            state.repairs += 1
        faults = [name for name, k in FAULT.findall(first_user) if not k or nth <= int(k)]
        if state.fault_rate and state.rng.random() < state.fault_rate:
            kind = state.rng.choice(state.fault_kinds)
            state.random_faults[kind] += 1
            faults.insert(0, kind)
        state.last_faulted[conv] = bool(set(faults) & (set(ENVELOPES) | {"reset"}))
        if state.latency:
            await asyncio.sleep(state.latency)
        if "reset" in faults:
            state.faults["reset"] += 1
            return _reset(request)
        model = str(body["model"])
        if model == "no-such-model" or "404" in faults:
            return _error(404, f"The model '{model}' does not exist", "model_not_found")
        if "401" in faults or request.headers.get("Authorization") == "Bearer bad-key":
            return _error(401, "Incorrect API key provided", "invalid_api_key")
        fmt = body.get("response_format")
        if fmt is not None:
            kind = fmt.get("type") if isinstance(fmt, dict) else None
            if kind == "json_object" and "schema" in fmt:
                kind = "json_object+schema"
            state.response_formats[str(kind)] += 1
            if kind not in state.formats:
                if state.format_status == 422:  # FastAPI's validation error body: no "error" object
                    return web.json_response({"detail": [{"type": "literal_error", "loc": ["body", "response_format",
                                                          "type"], "msg": "Input should be 'text' or 'json_object'"}]},
                                             status=422)
                return _error(state.format_status, f"response_format type must be one of {' or '.join(state.formats)}"
                              f", but got: {kind}", "invalid_request_error")
        if "400" in faults:
            return _error(400, "This model's maximum context length is 8192 tokens (injected)",
                          "context_length_exceeded")
        if model.startswith("strict-") and "max_tokens" in body:
            return _error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                               "'max_completion_tokens' instead.", "unsupported_parameter")
        if model.startswith("strict-") and body.get("temperature") not in (None, 1):
            return _error(400, "Unsupported value: 'temperature' does not support 0 with this model.",
                          "unsupported_value")
        if "429" in faults:
            state.faults["429"] += 1
            return _error(429, "rate limited (injected)", "rate_limit_exceeded",
                          headers={"Retry-After": state.retry_after})
        if "500" in faults:
            state.faults["500"] += 1
            return _error(500, "internal error (injected)", "server_error")
        if "slow" in faults:
            state.faults["slow"] += 1
            await asyncio.sleep(state.slow_seconds)
        loose = loose_read(prompt, model)
        obj, batch = _answer(loose if loose is not None else prompt, decode=model.startswith("decoding-"),
                             gullible=model.startswith("gullible-"))
        if state.flip_rate:
            obj = _flip(obj, state, conv, nth)
        if batch:
            state.batch_calls += 1
            if "wrongcount" in faults:
                state.faults["wrongcount"] += 1
                obj = {"verdicts": obj["verdicts"][:-1]}
        output = next((f for f in faults if f not in NOT_OUTPUT), None)
        if output:
            state.faults[output] += 1
        content, finish, refusal = _render(obj, output)
        reply = _completion(body["model"], content, sum(len(_text_of(m)) for m in messages), finish=finish,
                            refusal=refusal)
        if state.cached_tokens:
            reply["usage"]["prompt_tokens_details"] = {"cached_tokens": state.cached_tokens}
        envelope = next((f for f in faults if f in ENVELOPES), None)
        if envelope:
            state.faults[envelope] += 1
            return _envelope(reply, envelope)
        return web.json_response(reply)

    def config(body: dict[str, Any]) -> dict[str, Any]:
        for key in ("latency", "slow_seconds"):
            if key in body:
                setattr(state, key, float(body[key]))
        if "formats" in body:
            state.formats = tuple(body["formats"])
        for key in ("format_status", "cached_tokens"):
            if key in body:
                setattr(state, key, int(body[key]))
        if "retry_after" in body:
            state.retry_after = str(body["retry_after"])
        if "flip_rate" in body:
            state.flip_rate = float(body["flip_rate"])
            state.flip_seed = int(body.get("flip_seed", 0))
        if "fault_rate" in body:
            state.fault_rate = float(body["fault_rate"])
            state.fault_kinds = list(body.get("fault_kinds") or ENVELOPES)
            state.rng = random.Random(body.get("seed", 0))
        return {"ok": True}

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "judge-test", "object": "model"}]})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    add_control(app, stats=state.stats, reset=state.reset, config=config)
    return app


def serve(port: int = 0, latency: float = 0.0, host: str = "127.0.0.1") -> None:
    """Run the server until killed; print ``LISTENING <base url>`` once it accepts connections."""
    serve_app(make_app(ServerState(latency=latency)), port, host, backlog=4096)


# ---- client side helpers (tests and benchmark)
# -------------------------------------------------------

def start_server(latency: float = 0.0, python: str | None = None) -> ServerProcess:
    """Start this module as a subprocess on a free loopback port and wait until it listens."""
    return start_process(__file__, "--latency", str(latency), python=python)


@contextlib.contextmanager
def running_server(latency: float = 0.0) -> Iterator[ServerProcess]:
    """``with running_server() as srv: ... srv.base_url ... srv.stats()``; stops the process after.
    """
    with running(start_server(latency)) as handle:
        yield handle


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each reply")
    args = parser.parse_args()
    serve(args.port, args.latency, args.host)
