"""The LLM service under everything that calls a model (docs/llm-judge.md): any OpenAI-compatible
Chat Completions endpoint.

Modules: ``config`` (one :class:`LLMConfig`: endpoint, call policy, prices, cache), ``client``
    (async calls:
concurrency, rate limit, timeout, retries), ``runner`` (the one run loop every LLM task shares:
workers, repair, cost cap, cache writes, stop, Ctrl-C and SIGTERM, counts), ``cache`` (SQLite
store), ``cost`` (tokens and prices), ``parse`` (tolerant JSON, refusals), ``prompts`` (versioned
templates, one loader and filler), ``generate`` (answers, correctness checks, rerank grades),
``batch_api`` and ``shard``, ``local`` (llama.cpp's server with a packaged small model, on loopback:
an endpoint with no key). The judge that turns replies into verdicts lives in
:mod:`rankwise.relevance.llm_judge`; the LLM reranker in :mod:`rankwise.retrieval.llm_rerank`;
question synthesis in :mod:`rankwise.testsets.synth_run`.

Example:
    >>> from rankwise.llm import Endpoint, CallPolicy
    >>> Endpoint(model="m", base_url="http://127.0.0.1:8000/v1").model, CallPolicy().max_retries
    ('m', 4)
"""

from __future__ import annotations

from rankwise._lazy import lazy_exports

__all__ = ["CallPolicy", "Endpoint", "LLMConfig", "Prices", "Runner", "ResponseCache", "load_prompt",
           "resolve_endpoint", "resolve_llm_config", "as_llm_config", "local_server"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "CallPolicy": ".client", "Endpoint": ".client", "resolve_endpoint": ".client", "ResponseCache": ".cache",
    "Prices": ".cost", "load_prompt": ".prompts", "resolve_llm_config": ".config", "LLMConfig": ".config",
    "as_llm_config": ".config", "Runner": ".runner", "local_server": ".local",
}, globals())
