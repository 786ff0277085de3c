"""A real Chat Completions server on loopback that answers test-set *generation* prompts (rankwise
synth) from the passage it is sent, and the critic's and the judge's prompts too.

Each sample's behaviour is decided by a hash of its first passage, so a run's outcome is known in
advance and the server can say what it did (``GET /stats`` -> ``behaviours``):

    correct     a question about one sentence, that sentence as the quote (exact) reflowed    the
    same, but the quote has its spaces doubled and straight quotes curled: found normalised wrong
    a quote that is not in the passage                       -> rejected, quote not found
    paraphrased the quote's words in reverse order                       -> rejected, quote not
    found refusal     ``{"question": null, "answer": "not in the passage"}``   -> rejected, not
    answerable duplicate   always the same question                                 -> all but the
    first rejected giveaway    the question holds the answer verbatim                   -> rejected,
    answer in question onepassage  (multi, multi-hop prompts) both quotes from passage 1    ->
    rejected, one passage english     (non-English passages, and one in three of them) the question
    in English -> wrong language

Faults on the first request of some conversations (again by hash): HTTP 429 (``Retry-After: 0``) or
    500;
the retry succeeds (``faults: false`` turns these off). ``bad_first`` (``POST /config``: a share, by
hash) gives that share of conversations a reply that is no answer the first time they are asked, and
a good one
after: one of :data:`BAD_KINDS` (prose without JSON, JSON cut by the token limit, a refusal in the
text or in the ``refusal`` field, a JSON array, quotes that are a number, an answer that is not
text, a critic reply without a score); ``GET /stats`` counts them (``bad``) and the conversations
asked again (``repeated``). ``POST /config`` takes ``latency`` (seconds per reply) and
``fail_share`` (that share of conversations, by hash, gets HTTP 500 every time). Judge prompts
(``<chunk>``) are answered by shared keywords, as tests/llm_server.py does.

Standalone::

    python tests/synth_server.py --port 8001
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from _loopback import ServerProcess, add_control, chat_completion, running, serve_app, start_process
from llm_server import judge_text, unfence

FENCED = re.compile(r"<<DATA-([0-9a-f]{8,})>>\n(.*?)\n<<END-DATA-\1>>", re.S)
PASSAGE = re.compile(r'<passage(?: id="(\d)")?(?: title="[^"]*")?>\n(.*?)\n</passage>', re.S)
LANG = re.compile(r"in (\w+), the language of the passage")
STOP = frozenset(re.findall(r"\S+", """the a an of and to in is are be by for on with that this it as at or from which when each was
    can will not its into their more all if these does what how must only used der die das und ist von mit
    den des zu im ein eine auf für nicht als auch wird werden"""))
TWO = ("multi", "multi-hop")  # the styles sent two passages
BAD_KINDS = ("prose", "truncated", "refusal", "refusalfield", "array", "quotesnum", "answernum")
BEHAVIOURS = ("correct", "correct", "correct", "correct", "correct", "reflowed", "wrong", "paraphrased",
              "refusal", "duplicate", "giveaway", "onepassage", "english")


def plain(text: str) -> str:
    """The prompt with each fenced data block (``<<DATA-id>>`` ... ``<<END-DATA-id>>``, as rankwise
    sends passages, titles, questions and quotes) replaced by its text."""
    return FENCED.sub(lambda m: m.group(2), text)


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def sentences(passage: str) -> list[str]:
    """Sentences of 6+ words and no table or code markup, in order."""
    out = []
    for line in passage.split("\n"):
        for s in re.split(r"(?<=[.!?])\s+", line.strip()):
            s = s.strip().lstrip("-*# ").strip()
            if len(s.split()) >= 6 and "|" not in s and "`" not in s and s.endswith((".", "!", "?", ":")):
                out.append(s)
    return out


def keywords(sentence: str, n: int = 3) -> list[str]:
    words = [w for w in re.findall(r"[^\W\d_]{4,}", sentence) if w.lower() not in STOP]
    return list(dict.fromkeys(words))[:n]


def behaviour(passage: str, style: str, language: str) -> str:
    kind = BEHAVIOURS[_h(passage) % len(BEHAVIOURS)]
    if language != "English" and _h(passage) % 3 == 0:
        kind = "english"
    if kind == "onepassage" and style not in TWO:
        return "correct"
    if kind == "english" and language == "English":
        return "correct"
    return kind


def generate(prompt: str) -> tuple[dict[str, Any] | None, str]:
    """The reply object for a generation prompt, and the behaviour used (None reply: not a
    generation)."""
    passages = [p.replace("\u2039", "<") for _, p in PASSAGE.findall(prompt)]
    if not passages:
        return None, ""
    style = ("multi-hop" if "two-hop question" in prompt else
             "multi" if "combining the two passages" in prompt else
             "conversational" if "short conversation" in prompt else
             "paraphrase" if "reuse as few of the passage" in prompt else "factual")
    m = LANG.search(prompt)
    language = m.group(1) if m else "English"
    kind = behaviour(passages[0], style, language)
    found = [sentences(p) for p in passages]
    if not found[0] or (style in TWO and not found[-1]):
        return {"question": None, "answer": "not in the passage", "quotes": []}, "nosentence"
    pick = [s[_h(s[0]) % len(s)] for s in found]
    first = pick[0]
    words = first.split()
    half = max(3, len(words) // 2)
    answer = " ".join(words[half:])
    topic = " ".join(keywords(" ".join(words[:half])) or keywords(first))
    german = language == "German" and kind != "english"
    if style == "paraphrase":
        question = (f"Worum geht es bei {topic.split()[0]}?" if german else
                    f"Explain, in plain terms, {topic.split()[0]} please?")
    elif german:
        question = f"Was sagt die Dokumentation über {topic}?"
    else:
        question = f"What does the documentation say about {topic}?"
    quotes: list[Any] = [first]
    if kind == "reflowed":
        quotes = [first.replace(" ", "  ").replace('"', "\u201c")]
    elif kind == "wrong":
        quotes = ["The moon is made of green cheese, and always has been."]
    elif kind == "paraphrased":
        quotes = [" ".join(reversed(words))]
    elif kind == "refusal":
        return {"question": None, "answer": "not in the passage", "quotes": []}, kind
    if style in TWO:
        second = pick[1]
        quotes = [{"passage": 1, "text": quotes[0]},
                  {"passage": 1 if kind == "onepassage" else 2, "text": first if kind == "onepassage" else second}]
        answer = answer + " " + " ".join(second.split()[-3:])
    obj: dict[str, Any] = {"question": question, "answer": answer, "quotes": quotes}
    if style == "conversational":
        obj["history"] = [{"question": "What is this part of the documentation about?", "answer": topic}]
        obj["question"] = "And what about " + (topic.split()[-1] if topic else "it") + ", in that case?"
    if kind == "duplicate":
        obj["question"] = ("Wie ist das ganze System für die kommerzielle Nutzung lizenziert?" if german else
                           "How is the whole system licensed for commercial use?")
    elif kind == "giveaway":
        obj["question"] = f"Is it true that {obj['answer'].rstrip('.')}?"
    return obj, kind


def critic(prompt: str) -> dict[str, Any] | None:
    if "Rate whether the question below is answerable" not in prompt:
        return None
    q = re.search(r"<question>\n(.*?)\n</question>", prompt, re.S)
    score = 2 if q and _h(q.group(1)) % 7 == 0 else 5
    return {"score": score, "reason": "the quotes answer it" if score > 3 else "too vague"}


def _bad_reply(kind: str, model: str, obj: dict[str, Any] | None, messages: list[dict]):
    """An HTTP 200 chat completion whose content is no answer, of one of :data:`BAD_KINDS` (or
    ``noscore``: a critic reply without its score)."""
    from aiohttp import web

    good = json.dumps(obj or {"question": "Q?", "answer": "A", "quotes": ["q"]})
    finish, refusal, content = "stop", None, {
        "prose": "This passage is about the storage engine; a good question would ask how it works.",
        "truncated": good[: len(good) // 2],
        "refusal": "I'm sorry, but I can't help with that.",
        "refusalfield": None,
        "array": json.dumps([obj]),
        "quotesnum": json.dumps({**(obj or {}), "question": "What is it?", "answer": "It.", "quotes": 7}),
        "answernum": json.dumps({**(obj or {}), "question": "What is it?", "answer": 42}),
        "noscore": json.dumps({"reason": "looks fine"}),
    }[kind]
    if kind == "truncated":
        finish = "length"
    if kind == "refusalfield":
        refusal = "I'm sorry, but I can't assist with that request."
    usage = (math.ceil(sum(len(m.get("content") or "") for m in messages) / 4), 20)
    return web.json_response(chat_completion(content, model, usage, completion_id="chatcmpl-bad", created=int(time.time()),
                                             finish=finish, refusal=refusal))


def make_app(state: dict[str, Any]):
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        messages = body["messages"]
        raw = "".join(m.get("content") or "" for m in messages if m.get("role") == "user")
        user = plain(raw)
        conv = hashlib.sha256(user.encode()).hexdigest()
        state["requests"] += 1
        state["seen"][conv] += 1
        if state["latency"]:
            await asyncio.sleep(state["latency"])
        h = _h(user)
        if h % 100 < 100 * state["fail_share"]:  # fails every time: the client's retries run out
            state["faults"]["failing"] += 1
            return web.json_response({"error": {"message": "internal", "type": "server_error"}}, status=500)
        if state["faults_on"] and state["seen"][conv] == 1 and h % 25 == 23:
            state["faults"]["429"] += 1
            return web.json_response({"error": {"message": "rate limited", "type": "rate_limit"}}, status=429,
                                     headers={"Retry-After": "0"})
        if state["faults_on"] and state["seen"][conv] == 1 and h % 25 == 24:
            state["faults"]["500"] += 1
            return web.json_response({"error": {"message": "internal", "type": "server_error"}}, status=500)
        obj, kind = generate(user)
        bad = (BAD_KINDS[h % len(BAD_KINDS)] if obj is not None else "noscore") if (
            state["seen"][conv] == 1 and (h >> 8) % 100 < 100 * state["bad_first"]) else None
        if bad is not None:
            state["bad"][bad] += 1
            state["answered"][conv] += 1
            return _bad_reply(bad, body["model"], obj, messages)
        if obj is not None:
            state["behaviours"][kind] += 1
            state["generations"] += 1
        else:
            obj = critic(user)
            if obj is not None:
                state["critic"] += 1
            else:
                skeleton, data = unfence(raw)  # judge prompts fence their data

                def field(name: str) -> str:
                    m = re.search(rf"<{name}>\s*(.*?)\s*</{name}>", skeleton, re.S)
                    return re.sub(r"\x00(\d+)\x00", lambda d: data[int(d.group(1))], m.group(1)) if m else ""

                obj = judge_text(field("question"), field("chunk"), False)
                state["judged"] += 1
        state["answered"][conv] += 1
        content = json.dumps(obj, ensure_ascii=False)
        usage = (math.ceil(sum(len(m.get("content") or "") for m in messages) / 4), math.ceil(len(content) / 4))
        return web.json_response(chat_completion(content, body["model"], usage, completion_id="chatcmpl-" + conv[:12],
                                                 created=int(time.time())))

    def stats() -> dict[str, Any]:
        return {"bad": dict(state["bad"]),
            "requests": state["requests"], "generations": state["generations"], "critic": state["critic"],
            "judged": state["judged"], "behaviours": dict(state["behaviours"]), "faults": dict(state["faults"]),
            "conversations": len(state["seen"]), "max_answered": max(state["answered"].values(), default=0),
            "repeated": sum(1 for n in state["answered"].values() if n > 1)}

    def reset() -> None:
        state.update(_fresh(state["latency"]))

    def config(body: dict[str, Any]) -> dict[str, Any]:
        if "latency" in body:
            state["latency"] = float(body["latency"])
        if "fail_share" in body:
            state["fail_share"] = float(body["fail_share"])
        if "faults" in body:
            state["faults_on"] = bool(body["faults"])
        if "bad_first" in body:
            state["bad_first"] = float(body["bad_first"])
        return {"ok": True}

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    add_control(app, stats=stats, reset=reset, config=config)
    return app


def _fresh(latency: float = 0.0) -> dict[str, Any]:
    return {"latency": latency, "fail_share": 0.0, "bad_first": 0.0, "bad": Counter(), "faults_on": True, "requests": 0, "generations": 0, "critic": 0, "judged": 0,
            "behaviours": Counter(), "faults": Counter(), "seen": Counter(), "answered": Counter()}


def serve(port: int = 0, host: str = "127.0.0.1") -> None:
    serve_app(make_app(_fresh()), port, host)


@contextlib.contextmanager
def running_server() -> Iterator[ServerProcess]:
    """``with running_server() as srv: ... srv.base_url ... srv.stats()``; stops the process after.
    """
    with running(start_process(__file__)) as handle:
        yield handle


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    serve(args.port, args.host)
