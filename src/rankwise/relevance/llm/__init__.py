"""LLM relevance judge over any OpenAI-compatible Chat Completions endpoint (docs/llm-judge.md; docs/metrics.md §4).

Modules: ``prompts`` (versioned templates), ``client`` (async calls: concurrency, rate limit, timeout,
retries), ``parse`` (tolerant JSON, refusals), ``cache`` (SQLite verdict store), ``cost`` (tokens and
prices), ``runner`` (the one run loop every LLM task shares: workers, repair, cost cap, cache writes,
stop and Ctrl-C, counts), ``judge`` (verdicts: cache lookups, per-chunk or batch calls, verdicts into
records), ``generate`` (answers, correctness checks, rerank grades).

Example::

    from rankwise.relevance.llm import judge_records
    summary = judge_records(records, model="qwen2.5:7b", base_url="http://localhost:11434/v1")
"""

from __future__ import annotations

from typing import Any

__all__ = ["judge_records", "Judge", "JudgeCase", "JudgeSettings", "CallPolicy", "Endpoint", "VerdictCache",
           "Prices", "load_prompt", "resolve_endpoint", "resolve_llm_config", "LLMConfig", "JudgeStopped",
           "JudgeInterrupted"]

_LAZY = {
    "judge_records": "judge", "Judge": "judge", "JudgeCase": "judge", "JudgeSettings": "judge",
    "CallPolicy": "client", "Endpoint": "client", "resolve_endpoint": "client", "VerdictCache": "cache",
    "Prices": "cost", "load_prompt": "prompts", "resolve_llm_config": "config", "LLMConfig": "config",
    "JudgeStopped": "judge", "JudgeInterrupted": "judge",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"rankwise.relevance.llm.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'rankwise.relevance.llm' has no attribute {name!r}")
