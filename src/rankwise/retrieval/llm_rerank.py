"""An LLM reranker: a chat model scores each (query, passage) pair 0-3 (pointwise, JSON), cached.

:class:`LLMReranker` is a pair scorer (``score_pairs``) that plugs in wherever a cross-encoder does:
:func:`rankwise.retrieval.reranking.rerank`, ``RerankRetriever``, ``RetrieverSpec(rerank=...)`` and
:func:`rankwise.adapters.rerank_records`. Calls go through the judge's client and SQLite cache by
way of :class:`~rankwise.llm.generate.Generator` (concurrency, retries, rate limit, request cap,
circuit breaker; each reply on disk as it arrives), so a rerun of the same work makes no call.

Scores. The pairs of one query (consecutive pairs with the same query text, in their original order)
are ordered by grade, ties kept in the original order. A pair whose call failed (HTTP error after
the retries, an unreadable reply after one repair, the request cap, a lost endpoint) is counted in
:attr:`LLMReranker.failures` and its chunk keeps its original slot; the others fill the remaining
slots. The score returned is ``grade - position * eps`` (failed: just under the chunk above it), so
sorting by score gives exactly that order and a score rounds to its grade.

Example::

    from rankwise.retrieval.llm_rerank import LLMReranker
    reranker = LLMReranker("qwen2.5:7b", base_url="http://localhost:11434/v1", cache="rerank.sqlite")
    reranker.score_pairs([("capital of France?", "Paris is the capital."), ("capital of France?", "Bananas.")])
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from os import PathLike
from typing import Any

from rankwise.errors import InputError
from rankwise.llm.client import CallPolicy
from rankwise.llm.config import LLMConfig
from rankwise.llm.generate import (
    GenerationStopped,
    Generator,
    GenPrompt,
    GenReply,
    GenRequest,
)
from rankwise.llm.prompts import data_boundary, fence, fill, load_toml, shipped_toml

__all__ = ["LLMReranker", "load_rerank_prompt", "order_with_failures", "resolve_reranker", "MAX_GRADE"]

MAX_GRADE = 3


def load_rerank_prompt(path: str | PathLike | None = None) -> GenPrompt:
    """The shipped pointwise rerank prompt (``prompts/rerank.toml``), or a user TOML laid out like
    it (a ``[graded]`` table with ``system`` and ``user`` holding ``{question}`` and ``{chunk}``).

    Example:
        >>> p = load_rerank_prompt()
        >>> p.prompt_version.startswith("rerank-graded-v3+"), p.graded
        (True, True)
    """
    data, source = shipped_toml("rankwise.llm", "rerank.toml")
    version, repair = str(data.get("version", "1")), data.get("repair", "")
    parts = dict(data.get("graded") or {})
    if path is not None:
        from pathlib import Path

        user = load_toml(Path(path))
        source, version = str(path), str(user.get("version", "custom"))
        repair = user.get("repair", repair)
        section = user.get("graded") or {}
        if not isinstance(section, dict):
            raise InputError("[graded] must be a table", source=path, field="graded")
        parts.update(section)
    for key, tokens in (("system", []), ("user", ["{question}", "{chunk}"])):
        if not isinstance(parts.get(key), str) or not parts[key].strip():
            raise InputError(f"missing prompt text '{key}'", source=source, field=f"graded.{key}")
        for token in tokens:
            if token not in parts[key]:
                raise InputError(f"prompt text '{key}' must hold {token}", source=source, field=f"graded.{key}")
    if not isinstance(repair, str) or "{error}" not in repair:
        raise InputError("'repair' must be a string holding {error}", source=source, field="repair")
    return GenPrompt("rerank", "graded", version, parts["system"], parts["user"], "", repair, source)


def order_with_failures(grades: Sequence[int | None]) -> list[float]:
    """Scores for one query's pairs (original order): higher grade first, ties in the original
    order; a ``None`` (failed) keeps its slot. Each score is ``grade - position * eps``.

    Example:
        >>> [
        ...     round(s, 2) for s in order_with_failures([1, None, 3, 3])
        ... ]  # order: 3rd, 2nd (failed: kept), 4th, 1st
        [0.7, 2.95, 3.0, 2.8]
    """
    m = len(grades)
    eps = 0.5 / (m + 1)
    ok = sorted((i for i, g in enumerate(grades) if g is not None), key=lambda i: (-grades[i], i))  # type: ignore[operator]
    slots = iter(ok)
    order = [i if grades[i] is None else next(slots) for i in range(m)]
    scores = [0.0] * m
    prev = MAX_GRADE + 1.0
    for pos, i in enumerate(order):
        g = grades[i]
        prev = prev - eps / 2 if g is None else g - pos * eps
        scores[i] = prev
    return scores


class LLMReranker:
    """Pointwise LLM reranker over an OpenAI-compatible endpoint, cached in the judge's SQLite file.

    ``config``: the one :class:`~rankwise.llm.config.LLMConfig`, passed whole; or a config file,
    with ``model`` and keywords (``base_url``, ``api_key``, ``endpoint``, ``cache``,
    ``concurrency``, ``max_calls``, ...) resolved like the judge's (arguments, then
    ``RANKWISE_JUDGE_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, then the ``[llm]`` table of
    ``rankwise.toml``). ``policy`` replaces the config's call policy. After each
    :meth:`score_pairs`: :attr:`calls`, :attr:`cached`, :attr:`failed` and :attr:`failures` (kind ->
    count) add up over the reranker's life.
    """

    pairs_per_call = 1 << 30  # rerank() hands over every pair of a run at once: one concurrent batch

    def __init__(self, model: str | None = None, *, config: LLMConfig | str | PathLike | None = None,
                 policy: CallPolicy | None = None, prompt: str | PathLike | None = None, quiet: bool = False,
                 **llm: Any) -> None:
        from dataclasses import replace

        from rankwise.llm.config import as_llm_config

        cfg = as_llm_config(config, model=model, **llm)
        if policy is not None:
            cfg = replace(cfg, policy=policy)
        self.endpoint = cfg.endpoint
        self.name = f"llm:{self.endpoint.model}"
        self.prompt = load_rerank_prompt(prompt)
        self.generator = Generator.from_config(cfg, self.prompt)
        self.cache_path = cfg.cache
        self.quiet = quiet
        self.pairs = self.calls = self.cached = self.failed = 0
        self.failures: Counter = Counter()
        self.stopped: str | None = None

    def close(self) -> None:
        self.generator.close()

    def __enter__(self) -> LLMReranker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def messages(self, query: str, text: str) -> list[dict]:
        """The messages asking for one pair's grade (query and passage each between the fence lines
        of one boundary that occurs in neither: :func:`~rankwise.llm.prompts.fence`)."""
        boundary = data_boundary(text, shared=[query])
        values = {"question": fence(query, boundary), "chunk": fence(text, boundary)}
        return [{"role": "system", "content": fill(self.prompt.system, values)},
                {"role": "user", "content": fill(self.prompt.user, values)}]

    def grades(self, pairs: Sequence[tuple[str, str]]) -> list[int | None]:
        """One grade 0-3 per pair, ``None`` where the call failed (counted)."""
        requests = [GenRequest(str(i), self.messages(q, t)) for i, (q, t) in enumerate(pairs)]
        try:
            result = self.generator.run(requests)
        except GenerationStopped as exc:
            result = exc.result
            self.stopped = str(exc)
        s = result.summary
        self.pairs += len(pairs)
        self.calls += s.requests
        self.cached += s.cached
        self.failed += s.failed + s.missing
        self.failures.update(s.failures)
        if (s.failed or s.missing) and not self.quiet:
            why = ", ".join(f"{k} {v}" for k, v in sorted(s.failures.items())) or "no reply"
            print(f"LLM rerank ({self.endpoint.model}): {s.failed + s.missing} of {len(pairs)} pairs failed "
                  f"({why}); their chunks keep their original places", file=sys.stderr)
        out: list[int | None] = []
        for r in requests:
            reply: GenReply = result.replies[r.id]
            out.append(reply.grade if reply.ok and reply.grade is not None else None)
        return out

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Scores in the order of the pairs; see the module docstring for how failures keep their
        slot."""
        pairs = [(str(q), str(t)) for q, t in pairs]
        grades = self.grades(pairs)
        scores: list[float] = []
        start = 0
        for end in range(1, len(pairs) + 1):
            if end == len(pairs) or pairs[end][0] != pairs[start][0]:
                scores.extend(order_with_failures(grades[start:end]))
                start = end
        return scores

    def __call__(self, query: str, text: str) -> float:
        return self.score_pairs([(query, text)])[0]

    def summary(self) -> dict[str, Any]:
        """Counts so far: pairs, HTTP calls, cache hits, failed pairs and why."""
        return {"model": self.endpoint.model, "prompt_version": self.prompt.prompt_version, "pairs": self.pairs,
                "calls": self.calls, "cached": self.cached, "failed": self.failed,
                "failures": dict(self.failures), "stopped": self.stopped}


def resolve_reranker(rerank: Any, *, base_url: str | None = None, config: str | PathLike | None = None,
                     cache: str | PathLike | None = None, quiet: bool = False) -> Any:
    """A reranker from its name: ``"llm:MODEL"`` gives an :class:`LLMReranker` (``"llm:"`` alone
    takes the model of ``config``'s ``[llm]`` table or the environment); anything else (a
    cross-encoder folder or cached name, a pair scorer, a callable) is returned as given, for the
    retrieval pipeline to load.

    Example:
        >>> resolve_reranker("cross-encoder/ms-marco-MiniLM-L-6-v2")
        'cross-encoder/ms-marco-MiniLM-L-6-v2'
        >>> r = resolve_reranker(
        ...     "llm:qwen2.5:7b", base_url="http://localhost:11434/v1"
        ... )  # doctest: +SKIP
        >>> r.name  # doctest: +SKIP
        'llm:qwen2.5:7b'
    """
    if isinstance(rerank, str) and rerank.startswith("llm:"):
        return LLMReranker(rerank[4:] or None, base_url=base_url, config=config, cache=cache, quiet=quiet)
    return rerank
