"""A simulated generator on loopback: a real Chat Completions server whose answers depend on where
the supporting chunk sits in the context, following a planted curve (tests and
benchmarks/calibrate_kestrel.py).

The server is told the answer key (``POST /config`` with ``key``: a list of ``{"question",
"reference", "support": [passage texts]}``) and a curve. For an *answer* prompt (``<question>`` and
numbered ``<context id="N">`` blocks, as ``prompts/answer.toml`` sends) it finds the question in the
key and marks each context "supporting" when, lower-cased with whitespace collapsed, it contains a
support passage (or is contained in one and is at least 40 characters long). Then, with K contexts
and w the planted weights:

- ``mode = "sample"``: P(correct) = alpha + beta * w(i) for the first supporting position i (0 when none);
  the answer is the reference when u < P, else "I don't know.", where u in [0, 1) is a SHA-256 of
  (seed, question, the set of contexts): the same prompt always gets the same answer, and a case's u (its
  "difficulty") is the same at every position of the same chunks, as with a real generator; a different
  filler draw gets a fresh u. With ``draw = "stratified"`` (the default) the questions' u are spread
  evenly: question s of n (in a seeded order) draws u in [s/n, (s+1)/n), so accuracy by position is the
  planted curve to within about 1/n, and the tests check the pipeline (planting, positions, scoring,
  fitting) rather than sampling noise; ``draw = "iid"`` draws u uniformly.
``latency`` (seconds) delays every reply; ``apologies`` (a share) answers that share of answer prompts (by hash)
with "I'm sorry, but I can't help with that request." the first time each is seen.
- ``mode = "partial"``: the answer is the first round(q * n) of the reference's n words, q = sum of
  w(i) over supporting positions / sum of w(1..K) (the planted metric ``wcp(decay=...)@K``), so
  token F1 is a monotone function of the planted metric, with no sampling noise.

Curves (``curve``): ``{"kind": "rbp", "p": 0.7}`` (p^(i-1)), ``{"kind": "u_shape", "p", "q", "b"}``
(p^(i-1) + b q^(K-i)), ``{"kind": "power", "a"}`` (i^-a), ``{"kind": "cliff", "n"}`` (1 to position
n, then 0), ``{"kind": "table", "w": [...]}`` (any weights), ``{"kind": "log"}``, ``{"kind":
"flat"}``; ``alpha``/``beta`` default 0.1/0.8.

For a *correctness* prompt (``<reference_answer>`` and ``<response>``) it replies ``{"verdict": 1}``
when the response's token F1 against the reference is 0.5 or more (graded: ``round(3 * F1)``).

``GET /stats`` gives ``requests`` (and ``by_kind``), ``POST /reset`` zeroes them. Standalone::

    python tests/generator_server.py --port 8001   # prints LISTENING http://127.0.0.1:8001/v1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import re
import string
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from _loopback import ServerProcess, add_control, chat_completion, running, serve_app, start_process

APOLOGY = "I'm sorry, but I can't help with that request."
QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.S)
CONTEXT = re.compile(r'<context id="(\d+)">\s*(.*?)\s*</context>', re.S)
REFERENCE = re.compile(r"<reference_answer>\s*(.*?)\s*</reference_answer>", re.S)
RESPONSE = re.compile(r"<response>\s*(.*?)\s*</response>", re.S)
FENCED = re.compile(r"<<DATA-([0-9a-f]{8,})>>\n(.*?)\n<<END-DATA-\1>>", re.S)


def unfence(text: str) -> str:
    """The prompt with each fenced data block (``<<DATA-id>>`` ... ``<<END-DATA-id>>``) replaced by
    its text."""
    return FENCED.sub(lambda m: m.group(2), text)


def norm(text: str) -> str:
    return " ".join(text.replace("\u2039", "<").lower().split())


def tokens(text: str) -> list[str]:
    t = re.sub(r"\b(a|an|the)\b", " ", text.lower().translate(str.maketrans("", "", string.punctuation)))
    return t.split()


def f1(pred: str, ref: str) -> float:
    p, g = tokens(pred), tokens(ref)
    common = sum((Counter(p) & Counter(g)).values())
    if not p or not g or not common:
        return float(p == g)
    prec, rec = common / len(p), common / len(g)
    return 2 * prec * rec / (prec + rec)


def weights(curve: dict[str, Any], k: int) -> list[float]:
    kind = curve.get("kind", "rbp")
    out = []
    for i in range(1, k + 1):
        if kind == "rbp":
            out.append(curve.get("p", 0.7) ** (i - 1))
        elif kind == "u_shape":
            out.append(curve.get("p", 0.5) ** (i - 1) + curve.get("b", 1.0) * curve.get("q", 0.5) ** (k - i))
        elif kind == "log":
            import math

            out.append(1 / math.log2(i + 1))
        elif kind == "flat":
            out.append(1.0)
        elif kind == "power":
            out.append(i ** -curve.get("a", 1.0))
        elif kind == "cliff":
            out.append(1.0 if i <= curve.get("n", 3) else 0.0)
        elif kind == "table":
            out.append(curve["w"][i - 1])
        else:
            raise ValueError(f"unknown curve {kind!r}")
    return out


@dataclass
class State:
    key: dict[str, dict[str, Any]] = field(default_factory=dict)
    curve: dict[str, Any] = field(default_factory=lambda: {"kind": "rbp", "p": 0.7})
    mode: str = "sample"
    draw: str = "stratified"
    latency: float = 0.0
    seed: int = 0
    alpha: float = 0.1
    beta: float = 0.8
    requests: int = 0
    by_kind: Counter = field(default_factory=Counter)
    prompts: Counter = field(default_factory=Counter)  # how often each exact prompt was seen
    max_tokens: Counter = field(default_factory=Counter)  # the output caps the requests asked for
    apologies: float = 0.0  # this share of answer prompts (by hash) gets an apology the first time it is seen

    def configure(self, cfg: dict[str, Any]) -> None:
        if "key" in cfg:
            self.key = {norm(e["question"]): {"reference": e["reference"],
                                              "support": [norm(s) for s in e.get("support", []) if s]}
                        for e in cfg["key"]}
            order = sorted(self.key, key=lambda q: hashlib.sha256(f"{cfg.get('seed', self.seed)}|{q}".encode()).digest())
            for stratum, q in enumerate(order):
                self.key[q]["stratum"] = stratum
        for name in ("curve", "mode", "seed", "alpha", "beta", "draw", "latency", "apologies"):
            if name in cfg:
                setattr(self, name, cfg[name])

    def supporting(self, entry: dict[str, Any], chunk: str) -> bool:
        c = norm(chunk)
        return any(s and (s in c or (len(c) >= 40 and c in s)) for s in entry["support"])

    def answer(self, prompt: str) -> str:
        q = QUESTION.search(prompt)
        entry = self.key.get(norm(q.group(1))) if q else None
        contexts = [text for _, text in sorted(((int(i), t) for i, t in CONTEXT.findall(prompt)))]
        if entry is None or not contexts:
            return "I don't know."
        k = len(contexts)
        w = weights(self.curve, k)
        hits = [i for i, c in enumerate(contexts) if self.supporting(entry, c)]
        ref = entry["reference"]
        if self.mode == "partial":
            share = sum(w[i] for i in hits) / sum(w)
            words = ref.split()
            n = round(share * len(words))
            return " ".join(words[:n]) if n else "I don't know."
        prob = self.alpha + self.beta * w[hits[0]] if hits else 0.0
        # the draw depends on the question and the *set* of chunks, not their order: a case's
        # "difficulty" is the same at every position (as with a real generator), so accuracy by
        # position moves with the curve alone; a different filler draw (--repeats) is a fresh
        # difficulty
        digest = hashlib.sha256(json.dumps([self.seed, norm(q.group(1)), sorted(contexts)]).encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2 ** 64
        if self.draw == "stratified":  # u in the question's own stratum [s/n, (s+1)/n): low-discrepancy
            u = (entry["stratum"] + u) / len(self.key)
        return ref if u < prob else "I don't know."

    def check(self, prompt: str, graded: bool) -> str:
        ref, resp = REFERENCE.search(prompt), RESPONSE.search(prompt)
        score = f1(resp.group(1) if resp else "", ref.group(1) if ref else "")
        if graded:
            return json.dumps({"grade": round(3 * score), "reason": f"token F1 {score:.2f}"})
        return json.dumps({"verdict": int(score >= 0.5), "reason": f"token F1 {score:.2f}"})


def make_app(state: State):
    from aiohttp import web

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        users = [m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "user"]
        text = unfence(users[-1] if users else "")  # the system prompt names the tags: read the user message only
        state.requests += 1
        state.max_tokens[body.get("max_tokens", body.get("max_completion_tokens"))] += 1
        if state.latency:
            await asyncio.sleep(state.latency)
        digest = hashlib.sha256(text.encode()).hexdigest()
        state.prompts[digest] += 1
        if "<reference_answer>" in text:
            state.by_kind["correctness"] += 1
            content = state.check(text, graded='"grade"' in text)
        else:
            state.by_kind["answer"] += 1
            content = state.answer(text)
            if state.prompts[digest] == 1 and int(digest[:8], 16) / 16 ** 8 < state.apologies:
                state.by_kind["apology"] += 1
                content = APOLOGY
        return web.json_response(chat_completion(content, body.get("model", "sim"),
                                                 (len(text) // 4 + 1, len(content) // 4 + 1),
                                                 completion_id="chatcmpl-sim"))

    def stats() -> dict[str, Any]:
        return {"requests": state.requests, "by_kind": dict(state.by_kind),
                "repeated_prompts": sum(1 for n in state.prompts.values() if n > 1),
                "max_tokens": {str(k): n for k, n in state.max_tokens.items()}}

    def reset() -> None:
        state.requests = 0
        state.by_kind.clear()
        state.prompts.clear()
        state.max_tokens.clear()

    def config(body: dict[str, Any]) -> dict[str, Any]:
        state.configure(body)
        return {"ok": True, "questions": len(state.key)}

    app = web.Application(client_max_size=256 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    add_control(app, stats=stats, reset=reset, config=config)
    return app


def serve(port: int = 0, host: str = "127.0.0.1") -> None:
    serve_app(make_app(State()), port, host, backlog=4096)


@contextlib.contextmanager
def running_generator(python: str | None = None) -> Iterator[ServerProcess]:
    """``with running_generator() as gen: gen.configure(key=..., curve=...)``; stops the process
    after."""
    with running(start_process(__file__, python=python, timeout=30)) as handle:
        yield handle


WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango"]


def synthetic_cases(n: int, *, k: int = 5, seed: int = 1, golds: tuple[int, ...] = (0, 1, 1, 2)) -> list[dict]:
    """``n`` test-set rows: a question, a 13-word reference, one reference passage holding it, and
    ``k`` retrieved chunks of which a number drawn from ``golds`` are the passage (at random ranks),
    the rest filler that shares no sentence with any passage."""
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ref = " ".join(rng.choice(WORDS) for _ in range(12)) + f" item{i}"
        gold = f"Fact number {i}: the answer to question {i} is {ref}."
        chunks = [f"Unrelated filler {i}-{j} about {' '.join(rng.choice(WORDS) for _ in range(8))}."
                  for j in range(k)]
        for rank in rng.sample(range(k), rng.choice(golds)):
            chunks[rank] = gold
        rows.append({"id": f"q{i}", "question": f"What is the answer to question {i}?", "reference": ref,
                     "reference_contexts": [gold], "retrieved_contexts": chunks})
    return rows


def write_cases(rows: list[dict], path: Any) -> Any:
    """Write test-set rows as JSONL; returns the path."""
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path


def key_of(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answer key of test-set rows (``question``, ``reference``, ``reference_contexts``)."""
    out = []
    for c in cases:
        support = [p["text"] if isinstance(p, dict) else p for p in c.get("reference_contexts", [])]
        out.append({"question": c["question"], "reference": c["reference"], "support": support})
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    serve(args.port, args.host)
