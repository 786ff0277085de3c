"""One resolution of the LLM settings of every task (judge, synth, pool, answers, rerank), for the
CLI and API.

Every setting is taken from, first found wins:

1. the argument given (a command-line flag, or a keyword of :func:`resolve_llm_config` /
   :func:`~rankwise.relevance.llm_judge.judge_records`);
2. the environment: ``RANKWISE_JUDGE_MODEL``, ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (or the
   variable named by ``api_key_env``), ``RANKWISE_CACHE``;
3. the ``[llm]`` table of the config file: the one given, else ``./rankwise.toml``, else
   ``~/.config/rankwise/config.toml``; relative paths in it (``cache``, ``prompt``) are read from
   the file's folder;
4. the defaults of :class:`PromptSettings` and
   :class:`~rankwise.llm.client.CallPolicy`.

Example::

    # rankwise.toml
    [llm]
    model = "qwen2.5:7b"
    base_url = "http://localhost:11434/v1"
    mode = "question"
    concurrency = 8
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import InputError
from rankwise.llm.cache import default_cache_path
from rankwise.llm.client import CallPolicy, Endpoint, load_config, resolve_endpoint
from rankwise.llm.cost import Prices
from rankwise.llm.endpoint import CONFIG_TYPES, ENDPOINT_KEYS

__all__ = ["PromptSettings", "LLMConfig", "resolve_llm_config", "as_llm_config"]

# [llm] key -> the type its value must have: the one table (llm/endpoint.py), less the endpoint's
# own keys
_TYPES = {key: types for key, types in CONFIG_TYPES.items() if key not in ENDPOINT_KEYS}
_TYPE_NAMES = {(str,): "a string", (bool,): "true or false", (int,): "an integer", (int, float): "a number"}


@dataclass(frozen=True)
class PromptSettings:
    """How a task asks the model: the prompt mode and the user's prompt file, binary or graded
    replies, batching.

    Any task reads the keys it uses (the judge all of them; synth and pool the prompt file).
    ``mode`` is ``reference``, ``response`` or ``question``; graded replies (0-3) count as relevant
    from ``relevant_from``.

    Example:
        >>> PromptSettings(mode="question", graded=True).relevant_from
        2
    """

    mode: str = "reference"
    graded: bool = False
    batch: bool = False
    batch_size: int = 20
    relevant_from: int = 2
    prompt_file: str | PathLike | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise InputError(f"batch size must be >= 1, got {self.batch_size}", field="batch_size")
        if not 0 <= self.relevant_from <= 3:
            raise InputError(f"relevant_from must be 0..3, got {self.relevant_from}", field="relevant_from")


@dataclass(frozen=True)
class LLMConfig:
    """Everything a task calling a model needs, resolved: endpoint, how it asks, how calls are made,
    prices, the response cache file, and the config file read (None when there was none)."""

    endpoint: Endpoint
    settings: PromptSettings
    policy: CallPolicy
    prices: Prices
    cache: Path
    source: str | None


def _check(key: str, value: Any, source: str | None) -> Any:
    types = _TYPES[key]
    ok = isinstance(value, types) and not (bool not in types and isinstance(value, bool))
    if ok and isinstance(value, float) and not math.isfinite(value):
        ok = False
    if not ok:
        raise InputError(f"{key} must be {_TYPE_NAMES[types]}, got {value!r}", source=source, field=key)
    return value


def resolve_llm_config(*, config: str | PathLike | None = None, env: Mapping[str, str] | None = None,
                       model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                       mode: str | None = None, graded: bool | None = None, batch: bool | None = None,
                       batch_size: int | None = None, relevant_from: int | None = None,
                       prompt: str | PathLike | None = None, concurrency: int | None = None,
                       rpm: float | None = None, timeout: float | None = None, max_retries: int | None = None,
                       temperature: float | None = None, max_calls: int | None = None,
                       price_in: float | None = None, price_out: float | None = None,
                       cache: str | PathLike | None = None, endpoint: Endpoint | None = None) -> LLMConfig:
    """The LLM settings: arguments, then the environment, then the config file's ``[llm]`` table,
    then the defaults. ``None`` means "not given"; an ``endpoint`` given is used as it is. Errors
    name the config file and the key.

    Example:
        >>> c = resolve_llm_config(
        ...     model="m",
        ...     base_url="http://127.0.0.1:8000/v1",
        ...     concurrency=4,
        ...     env={},
        ...     config=None,
        ...     cache="judge.sqlite",
        ... )
        >>> (
        ...     c.endpoint.model,
        ...     c.settings.mode,
        ...     c.policy.concurrency,
        ...     c.policy.max_retries,
        ...     str(c.cache),
        ... )
        ('m', 'reference', 4, 4, 'judge.sqlite')
    """
    env = os.environ if env is None else env
    table, source = load_config(config)
    folder = Path(source).parent if source else Path(".")

    def pick(key: str, given: Any, default: Any = None) -> Any:
        if given is not None:
            return given
        if key in table:
            return _check(key, table[key], source)
        return default

    def path(value: Any, from_table: bool) -> Path | None:
        if value is None:
            return None
        p = Path(os.path.expanduser(str(value)))
        return folder / p if from_table and not p.is_absolute() else p

    from rankwise.llm.prompts import MODES

    chosen_mode = pick("mode", mode)
    if chosen_mode is not None and chosen_mode not in MODES:
        raise InputError(f"unknown judge mode {chosen_mode!r}; choose one of {', '.join(MODES)}",
                         source=None if mode is not None else source, field="mode")
    if endpoint is None:
        endpoint = resolve_endpoint(model=model, base_url=base_url, api_key=api_key, config=table,
                                    config_source=source, env=dict(env))
    defaults = PromptSettings()
    settings = PromptSettings(
        mode=pick("mode", mode, defaults.mode), graded=pick("graded", graded, defaults.graded),
        batch=pick("batch", batch, defaults.batch), batch_size=pick("batch_size", batch_size, defaults.batch_size),
        relevant_from=pick("relevant_from", relevant_from, defaults.relevant_from),
        prompt_file=path(pick("prompt", prompt), prompt is None))
    base = CallPolicy()
    temp = pick("temperature", temperature, base.temperature)
    policy = CallPolicy(concurrency=pick("concurrency", concurrency, base.concurrency),
                        rpm=pick("rpm", rpm, base.rpm), timeout=float(pick("timeout", timeout, base.timeout)),
                        max_retries=pick("max_retries", max_retries, base.max_retries),
                        temperature=None if temp is None else float(temp),
                        max_calls=pick("max_calls", max_calls, base.max_calls),
                        breaker_failures=pick("breaker_failures", None, base.breaker_failures),
                        breaker_seconds=float(pick("breaker_seconds", None, base.breaker_seconds)),
                        backoff_base=base.backoff_base, backoff_max=base.backoff_max)
    prices = Prices(pick("price_in", price_in), pick("price_out", price_out))
    if cache is not None:
        cache_path = Path(cache)
    elif env.get("RANKWISE_CACHE"):
        cache_path = Path(env["RANKWISE_CACHE"])
    elif "cache" in table:
        cache_path = path(_check("cache", table["cache"], source), True)  # type: ignore[assignment]
    else:
        cache_path = default_cache_path()
    return LLMConfig(endpoint, settings, policy, prices, cache_path, source)


def as_llm_config(config: LLMConfig | str | PathLike | None = None, **given: Any) -> LLMConfig:
    """The one :class:`LLMConfig` a library entry point (synth, pool, the judge, a generator) runs
    with: ``config`` itself when it is one (passed whole, as the CLI does; no keyword may be given
    beside it), else :func:`resolve_llm_config` of the config file ``config`` and the keywords
    (``model``, ``base_url``, ``concurrency``, ``price_in``, ...): a convenience for Python callers.

    Example:
        >>> c = as_llm_config(
        ...     model="m", base_url="http://127.0.0.1:8000/v1", env={}, cache="j.sqlite"
        ... )
        >>> as_llm_config(c) is c, c.endpoint.model
        (True, 'm')
    """
    if isinstance(config, LLMConfig):
        extra = sorted(k for k, v in given.items() if v is not None)
        if extra:
            raise TypeError(f"give the LLM settings either as one LLMConfig or as keywords, not both: {extra}")
        return config
    return resolve_llm_config(config=config, **given)
