"""Calls to any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM).

Uses the official ``openai`` SDK's ``AsyncOpenAI`` over its aiohttp transport (``openai[aiohttp]``): on
loopback httpx, the SDK's default, tops out near 330 requests/s, aiohttp near 7,000. The SDK's own
retries are switched off (``max_retries=0``) and done here instead, so every attempt is counted:

- concurrency: at most ``concurrency`` requests in flight; the limit halves when the endpoint signals
  overload (429, 503, timeouts) and grows back one by one (AIMD), so a high default is safe;
- rate: at most ``rpm`` requests per minute, evenly spaced; a 429 pauses every worker until its
  ``Retry-After`` has passed;
- timeout: ``timeout`` seconds per request, whatever the transport does;
- retries: 429, 5xx, timeouts and dropped connections are retried up to ``max_retries`` times with
  exponential backoff and jitter, or after ``Retry-After`` when the server sends one;
- replies: every reply is checked at this boundary; a 200 whose body is not a chat completion (not
  JSON, ``choices`` not a list, ``usage`` not an object, token counts that are not counts, ``content``
  not text ...) raises :class:`ReplyError`, retried like a 5xx and then a failure of that one call;
- connections: a reset or refused connection is retried, then fails that one call; only when the
  endpoint is gone (``breaker_failures`` connection failures in a row, across all calls, and no reply
  at all for ``breaker_seconds``) does the run stop with :class:`EndpointError`;
- fatal: 401/403 (key), 404 (model or URL), and an endpoint never reached at all stop the run with
  :class:`EndpointError` (a one-line message); other 4xx fail the one call;
- structured output: a call that expects JSON (``schema``) asks for it with ``response_format``:
  ``json_schema`` (the reply's JSON schema: OpenAI, vLLM, llama.cpp), else ``json_object``, else plain
  text read with repair. The first error naming ``response_format`` (400/422/500) steps the endpoint
  down one level and resends; the level reached is kept per client and in a small JSON file beside the
  LLM cache (:class:`FormatMemory`), per endpoint and model, so the next run does not probe again;
- a context-length overflow (the server's error says the prompt does not fit) fails that one call at
  once, as :class:`ContextOverflow` (``context length exceeded: ...``), never retried;
- cached prompt tokens, where the server reports them (``usage.prompt_tokens_details.cached_tokens``;
  llama.cpp's ``timings.cache_n``), are counted (``stats.usage.cached_prompt_tokens``);
- credentials in the base URL (``http://user:password@host/v1``) are taken out of the URL and sent as
  ``Authorization: Basic`` (in place of the API key); messages show the URL with the password masked.

Endpoint settings are resolved by :func:`rankwise.llm.config.resolve_llm_config`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import json
import math
import os
import random
import re
import sys
import time
import urllib.parse
from collections import Counter, deque
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import (
    BudgetExhausted,
    CallError,
    ContextOverflow,
    EndpointError,
    InputError,
    RankwiseError,
    ReplyError,
)
from rankwise.llm.cost import Usage

__all__ = ["Endpoint", "CallPolicy", "ChatReply", "ChatClient", "CallError", "ReplyError", "BudgetExhausted",
           "EndpointError", "CallBudget", "RateLimiter", "AdaptiveLimit", "resolve_endpoint", "load_config",
           "config_paths", "retry_after_seconds", "backoff_delay", "split_credentials", "reply_of", "utf8_safe",
           "mask_url", "check_base_url", "ContextOverflow", "FormatMemory", "RESPONSE_FORMATS",
           "response_format_body", "CallStats"]

OPENAI_URL = "https://api.openai.com/v1"
CONFIG_KEYS = {"model", "base_url", "api_key", "api_key_env", "mode", "graded", "concurrency", "rpm",
               "timeout", "max_retries", "temperature", "price_in", "price_out", "cache", "prompt",
               "batch", "batch_size", "relevant_from", "max_calls", "breaker_failures", "breaker_seconds",
               "batch_poll", "batch_discount", "batch_max_requests", "batch_max_bytes"}


# ---------------------------------------------------------------------------------------------- settings


def config_paths() -> list[Path]:
    """Where a config file is looked for when ``--config`` is not given, first found wins."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return [Path("rankwise.toml"), Path(base) / "rankwise" / "config.toml"]


def load_config(path: str | PathLike | None = None) -> tuple[dict[str, Any], str | None]:
    """The ``[llm]`` table of the config file and the file's path (``({}, None)`` when there is none).

    Example::

        # rankwise.toml
        [llm]
        model = "qwen2.5:7b"
        base_url = "http://localhost:11434/v1"
        concurrency = 8
    """
    from rankwise.llm.prompts import load_toml

    if path is not None:
        candidates, explicit = [Path(path)], True
    else:
        candidates, explicit = config_paths(), False
    for p in candidates:
        if not p.is_file():
            if explicit:
                raise InputError("config file not found", source=p)
            continue
        data = load_toml(p)
        table = data.get("llm", {})
        if not isinstance(table, dict):
            raise InputError("[llm] must be a table", source=p, field="llm")
        unknown = set(table) - CONFIG_KEYS
        if unknown:
            # a key that is no setting name may be a pasted secret (sk-...): named only when it looks like one
            names = sorted(k for k in unknown if re.fullmatch(r"[a-z_]{1,30}", k))
            other = len(unknown) - len(names)
            shown = ", ".join([*names, *([f"{other} more not shown (not a setting name; it may be a secret)"]
                                         if other else [])])
            raise InputError(f"unknown key(s): {shown}; [llm] takes {sorted(CONFIG_KEYS)}", source=p, field="llm")
        return dict(table), str(p)
    return {}, None


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests: model name, base URL (None = OpenAI's) and API key."""

    model: str
    base_url: str | None = None
    api_key: str | None = None

    @property
    def url(self) -> str:
        """The base URL as shown in messages: a password in it is masked (``user:***@host``)."""
        return mask_url((self.base_url or OPENAI_URL).rstrip("/"))


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def mask_url(url: str) -> str:
    """``url`` fit to show: a password in it written ``***``, whatever else is wrong with the URL (no
    scheme, a bad port, a broken IPv6 host); never raises.

    Example:
        >>> mask_url("http://ann:s3cret@127.0.0.1:8000/v1")
        'http://ann:***@127.0.0.1:8000/v1'
        >>> mask_url("ann:s3cret@host:abc/v1"), mask_url("http://[::1/v1")
        ('ann:***@host:abc/v1', 'http://[::1/v1')
    """
    m = _SCHEME.match(url)
    scheme, rest = (url[:m.end()], url[m.end():]) if m else ("", url)
    at = rest.rfind("@")
    if at < 0:
        return url
    userinfo, host = rest[:at], rest[at + 1:]
    if ":" not in userinfo:  # a user name alone: no secret in it
        return url
    return f"{scheme}{userinfo.split(':', 1)[0]}:***@{host}"


def check_base_url(base_url: str, *, source: str | None = None) -> None:
    """Refuse, before any call, a base URL that cannot be an endpoint: not http(s), no host, a bad port,
    a broken IPv6 host. The message shows the URL with its password masked.

    Example:
        >>> check_base_url("http://u:pw@/v1")
        Traceback (most recent call last):
        rankwise.errors.InputError: <input>: field 'base_url': base URL 'http://u:***@/v1' has no host (e.g. http://localhost:11434/v1)
    """
    shown = mask_url(base_url)
    try:
        parts = urllib.parse.urlsplit(base_url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        why = "has a bad port" if "port" in str(exc).lower() else "is not a valid URL"
        raise InputError(f"base URL {shown!r} {why}", source=source, field="base_url") from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InputError(f"base URL {shown!r} is not an http(s) URL (e.g. http://localhost:11434/v1)",
                         source=source, field="base_url")
    if not parts.hostname:
        raise InputError(f"base URL {shown!r} has no host (e.g. http://localhost:11434/v1)", source=source,
                         field="base_url")


def split_credentials(url: str | None) -> tuple[str | None, str | None]:
    """The URL without ``user:password@`` and the ``Authorization: Basic`` value they stand for.

    Example:
        >>> split_credentials("http://ann:s3cret@127.0.0.1:8000/v1")
        ('http://127.0.0.1:8000/v1', 'Basic YW5uOnMzY3JldA==')
        >>> split_credentials("http://127.0.0.1:8000/v1")
        ('http://127.0.0.1:8000/v1', None)
    """
    if not url:
        return url, None
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.netloc.rpartition("@")[2]  # host[:port] as written (an IPv6 host keeps its brackets)
    user = urllib.parse.unquote(parts.username or "")
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), f"Basic {token}"


def resolve_endpoint(*, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                     config: dict[str, Any] | None = None, config_source: str | None = None,
                     env: dict[str, str] | None = None) -> Endpoint:
    """Arguments win over the environment, which wins over the config file's ``[llm]`` table.

    Example:
        >>> resolve_endpoint(model="m", base_url="http://127.0.0.1:8000/v1", env={}).api_key
        'unused'
    """
    env = os.environ if env is None else env
    config = config or {}
    model = model or env.get("RANKWISE_JUDGE_MODEL") or config.get("model")
    if not model:
        raise InputError("no model given: give one (the model setting), set RANKWISE_JUDGE_MODEL, or put "
                         "model = \"...\" in the [llm] table of rankwise.toml", source=config_source, field="model")
    for key, value in (("model", model), ("base_url", base_url or config.get("base_url")),
                       ("api_key", api_key or config.get("api_key")), ("api_key_env", config.get("api_key_env"))):
        if value is not None and not isinstance(value, str):
            # a secret may be in it (a key, a URL's password): its type is named, never its value
            shown = repr(value) if key == "model" else f"{_shape(value)} (not shown: it may hold a secret)"
            raise InputError(f"{key} must be a string, got {shown}", source=config_source, field=key)
    from_file = not (base_url or env.get("OPENAI_BASE_URL"))
    base_url = base_url or env.get("OPENAI_BASE_URL") or config.get("base_url") or None
    if base_url is not None:
        check_base_url(base_url, source=config_source if from_file else None)
    has_credentials = split_credentials(base_url)[1] is not None
    if has_credentials and (api_key or config.get("api_key")):
        raise InputError(f"the base URL {Endpoint(str(model), base_url).url} holds credentials (user:password@) "
                         "and an API key is given too; an endpoint takes one Authorization header: drop one",
                         field="api_key")
    key_env = config.get("api_key_env")
    api_key = (api_key or env.get("OPENAI_API_KEY") or (env.get(key_env) if key_env else None)
               or config.get("api_key") or None)
    if has_credentials:
        api_key = "unused"  # the URL's credentials go in the Authorization header instead
    if api_key is None:
        if base_url is None or base_url.rstrip("/") == OPENAI_URL:
            raise InputError("no API key for api.openai.com: give one (the api_key setting), set OPENAI_API_KEY, "
                             "or use the base URL of a local server (vLLM, Ollama, llama.cpp ...)",
                             source=config_source, field="api_key")
        api_key = "unused"  # local servers ignore it; the SDK insists on one
    return Endpoint(str(model), base_url, api_key)


@dataclass(frozen=True)
class CallPolicy:
    """How calls are made: concurrency, rate, timeout, retries, sampling, the cap on requests, and when a
    run gives the endpoint up (``breaker_failures`` connection failures in a row and no reply for
    ``breaker_seconds``).

    Example:
        >>> CallPolicy(concurrency=8, rpm=600).rpm
        600
    """

    concurrency: int = 128
    rpm: float | None = None
    timeout: float = 60.0
    max_retries: int = 4
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 120.0
    temperature: float | None = 0.0
    max_calls: int | None = None
    breaker_failures: int = 8
    breaker_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise InputError(f"concurrency must be >= 1, got {self.concurrency}", field="concurrency")
        if self.rpm is not None and self.rpm <= 0:
            raise InputError(f"rpm must be > 0, got {self.rpm}", field="rpm")
        if self.timeout <= 0:
            raise InputError(f"timeout must be > 0 seconds, got {self.timeout}", field="timeout")
        if self.max_retries < 0:
            raise InputError(f"max_retries must be >= 0, got {self.max_retries}", field="max_retries")
        if self.max_calls is not None and self.max_calls < 0:
            raise InputError(f"max_calls must be >= 0, got {self.max_calls}", field="max_calls")
        if self.breaker_failures < 1 or self.breaker_seconds < 0:
            raise InputError("breaker_failures must be >= 1 and breaker_seconds >= 0", field="breaker_failures")


# ------------------------------------------------------------------------------------------ rate limits


class RateLimiter:
    """At most ``rpm`` starts per minute, evenly spaced; :meth:`pause_until` holds everyone (429)."""

    def __init__(self, rpm: float | None) -> None:
        self.interval = 60.0 / rpm if rpm else 0.0
        self._next = 0.0
        self._paused_until = 0.0

    async def wait(self) -> None:
        now = time.monotonic()
        start = max(now, self._next, self._paused_until)
        if self.interval:
            self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)
        # a pause may have been set while we slept
        while self._paused_until > time.monotonic():
            await asyncio.sleep(self._paused_until - time.monotonic())

    def pause_until(self, when: float) -> None:
        self._paused_until = max(self._paused_until, when)


class AdaptiveLimit:
    """At most ``limit`` requests in flight, adapted AIMD-style: the limit halves when the endpoint says
    it is overloaded (429, 503, 529, a timeout; at most one cut per ``cooldown`` seconds) and grows back
    by one per ``limit`` successes, up to ``maximum``.

    Example:
        >>> g = AdaptiveLimit(64); g.overload(); g.limit
        32.0
    """

    def __init__(self, maximum: int, cooldown: float = 1.0) -> None:
        self.maximum = maximum
        self.limit = float(maximum)
        self.lowest = float(maximum)
        self.cuts = 0
        self.inflight = 0
        self.cooldown = cooldown
        self._last_cut = -math.inf
        self._waiters: deque[asyncio.Future] = deque()

    async def acquire(self) -> None:
        while self.inflight >= int(self.limit):
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake()  # pass the wake-up on
                elif fut in self._waiters:
                    self._waiters.remove(fut)
                raise
        self.inflight += 1

    def release(self) -> None:
        self.inflight -= 1
        self._wake()

    def _wake(self) -> None:
        free = int(self.limit) - self.inflight
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    def success(self) -> None:
        before = int(self.limit)
        self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
        if int(self.limit) > before:
            self._wake()

    def overload(self) -> None:
        now = time.monotonic()
        if now - self._last_cut < self.cooldown:
            return
        self._last_cut = now
        self.limit = max(1.0, self.limit / 2)
        self.lowest = min(self.lowest, self.limit)
        self.cuts += 1


class CallBudget:
    """A cap on requests sent (``None`` = no cap)."""

    def __init__(self, max_calls: int | None) -> None:
        self.max_calls = max_calls
        self.used = 0

    def take(self) -> bool:
        if self.max_calls is not None and self.used >= self.max_calls:
            return False
        self.used += 1
        return True

    @property
    def exhausted(self) -> bool:
        return self.max_calls is not None and self.used >= self.max_calls


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), else None.

    Example:
        >>> retry_after_seconds({"retry-after": "2"})
        2.0
    """
    if headers is None:
        return None
    get = headers.get
    ms = get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    """Exponential backoff with jitter: uniform in [d/2, d], d = min(cap, base * 2**(attempt-1)).

    Example:
        >>> 0.25 <= backoff_delay(1, 0.5, 30) <= 0.5
        True
    """
    d = min(cap, base * 2 ** (attempt - 1))
    return random.uniform(d / 2, d)


# ------------------------------------------------------------------------------------ structured output

# tried in this order, each endpoint stepped down: OpenAI's json_schema (OpenAI, vLLM, Ollama, llama.cpp's C++
# server); json_object carrying the schema (llama-cpp-python's server, which refuses json_schema but turns
# that schema into a grammar); plain json_object; no response_format (text, read with repair)
RESPONSE_FORMATS = ("json_schema", "json_object+schema", "json_object", "text")
_FORMAT_ERROR = re.compile(r"response_format|json_schema|json_object|\bgrammar\b", re.I)
_OVERFLOW = re.compile(r"context[ _-]?(?:length|window|size)|maximum context|exceeds? (?:the )?(?:available )?"
                       r"context|too many tokens|prompt is too long", re.I)
FORMAT_MEMORY_DAYS = 7.0  # a remembered step-down is probed again after this long (a server upgrade)


def response_format_body(level: str, schema: dict[str, Any], name: str = "rankwise_reply") -> dict[str, Any] | None:
    """The ``response_format`` request field of ``level`` for a reply of JSON ``schema`` (None: plain text).

    Example:
        >>> response_format_body("json_object", {"type": "object"})
        {'type': 'json_object'}
        >>> response_format_body("json_object+schema", {"type": "object"})
        {'type': 'json_object', 'schema': {'type': 'object'}}
        >>> response_format_body("json_schema", {"type": "object"})["json_schema"]["name"]
        'rankwise_reply'
        >>> response_format_body("json_schema", {"type": "string", "maxLength": 80})["json_schema"]["schema"]
        {'type': 'string'}

    A string's ``minLength``/``maxLength`` bound a grammar-constrained reply (llama.cpp turns the schema into a
    grammar, so a small model cannot ramble); OpenAI's strict ``json_schema`` mode refuses those keywords, so at
    that level they are left out.
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


def _level_of(fmt: Any) -> str | None:
    """The level a ``response_format`` body stands for (None: not one of ours)."""
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object"):
        return None
    return "json_object+schema" if fmt["type"] == "json_object" and "schema" in fmt else fmt["type"]


class FormatMemory:
    """Which ``response_format`` level each endpoint and model took, kept in a JSON file (``path``; None:
    in memory only), so a later run starts where the last one ended instead of probing again. A row
    older than :data:`FORMAT_MEMORY_DAYS` is forgotten; a file that cannot be read or written is ignored
    (the endpoint is probed again), never an error.

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


# ----------------------------------------------------------------------------------------------- client


@dataclass
class ChatReply:
    """One completion: its text (or refusal), why it stopped, and its token counts."""

    content: str | None
    refusal: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens the server took from its cache, where it says


@dataclass
class CallStats:
    """Requests sent, retries, errors by kind, tokens: what the run's summary prints."""

    requests: int = 0
    retries: int = 0
    errors: Counter = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)
    format_steps: list[str] = field(default_factory=list)  # "json_schema -> json_object: <server's words>"


class ChatClient:
    """An ``AsyncOpenAI`` client with our retries, rate limit, request cap, reply checks and breaker.

    Example::

        async with ChatClient(Endpoint("qwen2.5:7b", "http://localhost:11434/v1", "unused")) as client:
            reply = await client.chat([{"role": "user", "content": "Say hi"}], max_tokens=20)
    """

    def __init__(self, endpoint: Endpoint, policy: CallPolicy | None = None, *,
                 formats: FormatMemory | None = None) -> None:
        self.endpoint = endpoint
        self.policy = policy or CallPolicy()
        self.limiter = RateLimiter(self.policy.rpm)
        self.gate = AdaptiveLimit(self.policy.concurrency)
        self.budget = CallBudget(self.policy.max_calls)
        self.stats = CallStats()
        self.transport = "aiohttp"
        self._client: Any = None
        self._succeeded = False  # any HTTP reply at all from the endpoint
        self._conn_failures = 0  # connection failures in a row, across all calls
        self._last_contact = time.monotonic()
        self._token_param = "max_tokens"
        self._send_temperature = self.policy.temperature is not None
        self.formats = formats or FormatMemory(None)
        remembered = self.formats.get(self.endpoint.url, self.endpoint.model)
        self._format_known = remembered is not None
        self.response_format = remembered or RESPONSE_FORMATS[0]  # the level JSON replies are asked with

    async def __aenter__(self) -> ChatClient:
        try:
            import openai
        except ModuleNotFoundError:
            raise RankwiseError("the LLM judge needs the openai SDK: pip install 'rankwise[llm]'") from None
        base_url, basic = split_credentials(self.endpoint.base_url)
        try:
            http_client = openai.DefaultAioHttpClient()
        except (RuntimeError, AttributeError):
            http_client = openai.DefaultAsyncHttpxClient()
            self.transport = "httpx (install 'openai[aiohttp]' for the faster aiohttp transport)"
        self._client = openai.AsyncOpenAI(api_key=self.endpoint.api_key or "unused", base_url=base_url,
                                          max_retries=0, timeout=self.policy.timeout + 5.0,
                                          http_client=http_client,
                                          default_headers={"Authorization": basic} if basic else None)
        self._last_contact = time.monotonic()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            # a close that hangs (a half-dead endpoint) must not hold the run; closing is best effort
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(client.close()), 5.0)

    def _request(self, messages: list[dict], max_tokens: int, schema: dict[str, Any] | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.endpoint.model, "messages": messages,
                                  self._token_param: max_tokens}
        if self._send_temperature:
            kwargs["temperature"] = self.policy.temperature
        fmt = response_format_body(self.response_format, schema) if schema is not None else None
        if fmt is not None:
            kwargs["response_format"] = fmt
        return kwargs

    def _step_down(self, sent: dict[str, Any], message: str) -> bool:
        """The endpoint refused the ``response_format`` sent: use the next level (for every later call,
        and remembered for the endpoint); False when there is nothing to step down from."""
        level = _level_of(sent.get("response_format"))
        if level is None or not _FORMAT_ERROR.search(message):
            return False
        lower = RESPONSE_FORMATS[RESPONSE_FORMATS.index(level) + 1]
        if RESPONSE_FORMATS.index(lower) > RESPONSE_FORMATS.index(self.response_format):
            self.stats.format_steps.append(f"{self.response_format} -> {lower}: {message[:120]}")
            self.response_format = lower
            self.formats.put(self.endpoint.url, self.endpoint.model, lower)
            self._format_known = True
        return True

    async def _send_gated(self, kwargs: dict[str, Any]) -> Any:
        """:meth:`_send` inside the adaptive concurrency limit, telling it about overload signals."""
        import openai

        await self.gate.acquire()
        try:
            resp = await self._send(kwargs)
        except (asyncio.TimeoutError, openai.APITimeoutError) as exc:
            if _connect_failure(exc) is None:
                self.gate.overload()
            raise
        except openai.APIStatusError as exc:
            if exc.status_code in (429, 503, 529):
                self.gate.overload()
            raise
        finally:
            self.gate.release()
        self.gate.success()
        return resp

    async def _send(self, kwargs: dict[str, Any]) -> Any:
        # AsyncOpenAI.post (the SDK's documented call for any endpoint) with a plain dict reply: the same
        # auth, URL and error mapping as chat.completions.create, without its pydantic round trips, which
        # cost more CPU than the request itself against a fast local server.
        import openai

        post = self._client.post("/chat/completions", body=kwargs, cast_to=dict[str, Any])
        try:
            if sys.version_info >= (3, 11):
                # asyncio.timeout, not wait_for: wait_for of Python <= 3.11 can swallow a cancellation that
                # arrives as the reply does, and a worker that ignores its cancellation hangs the run.
                async with asyncio.timeout(self.policy.timeout):
                    return await post
            return await asyncio.wait_for(post, self.policy.timeout)
        except (openai.APIStatusError, openai.APIConnectionError, asyncio.TimeoutError, asyncio.CancelledError):
            raise
        except openai.APIError as exc:  # e.g. a response the SDK could not validate
            raise ReplyError(f"bad reply: {_one_line(exc)}") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            # a 200 whose body says application/json but is not JSON (an HTML error page, a cut body)
            raise ReplyError(f"bad reply: the body is not JSON ({type(exc).__name__}: {_one_line(exc)})") from None

    def _unreachable(self, why: str) -> EndpointError:
        return EndpointError(f"cannot reach the LLM endpoint {self.endpoint.url}: {why}. Is the server running "
                             f"and the base URL right? (rankwise needs no network except to this endpoint)")

    def _fatal(self, status: int, message: str) -> EndpointError:
        hint = {401: "check the API key (OPENAI_API_KEY)", 403: "check the API key (OPENAI_API_KEY)",
                404: "check the model name and the base URL (it usually ends in /v1)"}[status]
        return EndpointError(f"HTTP {status} from {self.endpoint.url} (model {self.endpoint.model!r}): "
                             f"{message}; {hint}")

    def _contact(self) -> None:
        """The endpoint answered (any HTTP reply): it is there."""
        self._succeeded = True
        self._conn_failures = 0
        self._last_contact = time.monotonic()

    def _connection_failed(self, why: str, refused: bool, attempt: int) -> None:
        """Count a connection failure; raise :class:`EndpointError` when the endpoint is gone."""
        self._conn_failures += 1
        if refused and not self._succeeded and attempt >= 1:
            raise self._unreachable(why)
        silent = time.monotonic() - self._last_contact
        if self._conn_failures >= self.policy.breaker_failures and silent >= self.policy.breaker_seconds:
            raise EndpointError(f"lost the LLM endpoint {self.endpoint.url}: {self._conn_failures} connection "
                                f"failures in a row and no reply for {silent:.1f} s (last: {why})")

    async def chat(self, messages: list[dict], *, max_tokens: int = 300,
                   schema: dict[str, Any] | None = None) -> ChatReply:
        """One completion, retried as the policy says; raises :class:`CallError` (this call failed; a
        :class:`ReplyError` when the reply was not a chat completion; :class:`ContextOverflow` when the
        prompt does not fit) or :class:`EndpointError` (stop). ``schema``: the reply is JSON of this
        schema, asked for with the endpoint's ``response_format`` level (see the module's notes)."""
        import openai

        attempt = 0
        adaptations = 0
        while True:
            if not self.budget.take():
                raise BudgetExhausted(f"max-calls reached ({self.budget.max_calls} requests)")
            await self.limiter.wait()
            self.stats.requests += 1
            retry_after: float | None = None
            kwargs = self._request(messages, max_tokens, schema)
            try:
                resp = await self._send_gated(kwargs)
            except (asyncio.TimeoutError, openai.APITimeoutError) as exc:
                refused = _connect_failure(exc)
                if refused is None:
                    error = f"timeout after {self.policy.timeout:g}s"
                else:  # the aiohttp transport reports a refused connection as a connect timeout
                    error = f"connection error: {refused}"
                    self._connection_failed(refused, True, attempt)
            except openai.APIStatusError as exc:
                self._contact()
                status = exc.status_code
                message = _error_message(exc)
                if status in (401, 403, 404):
                    raise self._fatal(status, message) from None
                if status in (400, 422, 500, 501) and adaptations < 6 and self._step_down(kwargs, message):
                    adaptations += 1
                    continue
                if status in (400, 413, 422, 500) and _OVERFLOW.search(message):
                    self.stats.errors["context length"] += 1
                    raise ContextOverflow(f"context length exceeded: the server said: {message}") from None
                if status == 400 and adaptations < 2 and self._adapt(message, kwargs):
                    adaptations += 1
                    continue
                if status != 429 and status < 500 and status != 408:
                    self.stats.errors[f"HTTP {status}"] += 1
                    raise CallError(f"HTTP {status}: {message}") from None
                error = f"HTTP {status}: {message}"
                retry_after = retry_after_seconds(getattr(exc.response, "headers", None))
            except openai.APIConnectionError as exc:
                why = _cause(exc)
                error = f"connection error: {why}"
                self._connection_failed(why, _refused(exc), attempt)
            except ReplyError as exc:
                self._contact()
                error = str(exc)
            else:
                self._contact()
                try:
                    return self._reply(resp)
                except ReplyError as exc:
                    error = str(exc)
            kind = error.split(":")[0] if error.startswith(("HTTP", "bad reply")) else error.split(" ")[0]
            self.stats.errors[kind] += 1
            attempt += 1
            if attempt > self.policy.max_retries:
                cls = ReplyError if error.startswith("bad reply") else CallError
                raise cls(f"{error} (gave up after {attempt} attempts)")
            self.stats.retries += 1
            if retry_after is not None:
                delay = min(retry_after, self.policy.max_retry_after)
                delay += random.uniform(0, min(1.0, 0.1 * delay))
                self.limiter.pause_until(time.monotonic() + delay)
            else:
                delay = backoff_delay(attempt, self.policy.backoff_base, self.policy.backoff_max)
            await asyncio.sleep(delay)

    def _reply(self, resp: Any) -> ChatReply:
        """The reply checked field by field (:func:`reply_of`); tokens are counted once it is whole."""
        reply = reply_of(resp)
        self.stats.usage.add(reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens)
        if not self._format_known:  # the first reply at this level: remembered, the next run starts here
            self._format_known = True
            self.formats.put(self.endpoint.url, self.endpoint.model, self.response_format)
        return reply

    def _adapt(self, message: str, sent: dict[str, Any]) -> bool:
        """Newer OpenAI models reject ``max_tokens`` or a set ``temperature``: switch and resend."""
        low = message.lower()
        if "max_tokens" in low and "max_completion_tokens" in low and "max_tokens" in sent:
            self._token_param = "max_completion_tokens"
            return True
        if "temperature" in low and "temperature" in sent:
            self._send_temperature = False
            return True
        return False


def _shape(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _count(usage: dict, key: str) -> int:
    value = usage.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReplyError(f"bad reply: usage.{key} is {_shape(value)} ({str(value)[:40]!r}), not a token count")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ReplyError(f"bad reply: usage.{key} is {value!r}, not a token count")
    if value < 0:
        raise ReplyError(f"bad reply: usage.{key} is negative ({value})")
    return int(value)


def reply_of(resp: Any) -> ChatReply:
    """A chat-completion body checked field by field; anything that is not one raises :class:`ReplyError`.

    ``usage`` may be absent (some local servers send none: 0 tokens); when present it must be an object
    of non-negative integer counts. ``choices`` must be a non-empty list whose first item has a
    ``message`` object; its ``content`` is text, null, or a list of text parts.

    Example:
        >>> reply_of({"choices": [{"message": {"content": "{}"}, "finish_reason": "stop"}]}).content
        '{}'
        >>> reply_of({"choices": {"message": {}}})
        Traceback (most recent call last):
        rankwise.errors.ReplyError: bad reply: choices is an object, not a list
    """
    if not isinstance(resp, dict):
        raise ReplyError(f"bad reply: the body is {_shape(resp)}, not a JSON object: {str(resp)[:80]!r}")
    usage = resp.get("usage")
    if usage is None:
        usage = {}
    if not isinstance(usage, dict):
        raise ReplyError(f"bad reply: usage is {_shape(usage)} ({str(usage)[:40]!r}), not an object")
    pt, ct = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    cached = _cached_tokens(usage, resp.get("timings"))
    if "choices" not in resp:
        error = resp.get("error")
        if isinstance(error, dict) and error.get("message"):
            raise ReplyError(f"bad reply: an error in a 200 reply: {str(error['message'])[:200]}")
        raise ReplyError("bad reply: no choices")
    choices = resp["choices"]
    if not isinstance(choices, list):
        raise ReplyError(f"bad reply: choices is {_shape(choices)}, not a list")
    if not choices:
        raise ReplyError("bad reply: choices is empty")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise ReplyError(f"bad reply: choices[0] is {_shape(choice)}, not an object")
    msg = choice.get("message")
    if not isinstance(msg, dict):
        raise ReplyError("bad reply: choices[0] has no message" if msg is None
                         else f"bad reply: choices[0].message is {_shape(msg)}, not an object")
    content = msg.get("content")
    if isinstance(content, list):  # content parts
        if not all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content):
            raise ReplyError("bad reply: message.content is a list that is not of text parts")
        content = "".join(p.get("text", "") for p in content)
    elif content is not None and not isinstance(content, str):
        raise ReplyError(f"bad reply: message.content is {_shape(content)} ({str(content)[:40]!r}), not text")
    refusal = msg.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise ReplyError(f"bad reply: message.refusal is {_shape(refusal)}, not text")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise ReplyError(f"bad reply: finish_reason is {_shape(finish)}, not text")
    return ChatReply(content=utf8_safe(content), refusal=utf8_safe(refusal), finish_reason=utf8_safe(finish),
                     prompt_tokens=pt, completion_tokens=ct, cached_tokens=cached)


def _cached_tokens(usage: dict, timings: Any) -> int:
    """Prompt tokens served from the server's cache: ``usage.prompt_tokens_details.cached_tokens`` (OpenAI,
    vLLM), else llama.cpp's ``timings.cache_n``; 0 when the server does not say. Never raises: a
    detail the server fills oddly is not worth failing a reply over."""
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


def _one_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def _refused(exc: BaseException) -> bool:
    """Whether a connection error is a connection never made (refused, no such host), not a reset."""
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        names = {c.__name__ for c in type(cur).__mro__}
        if names & {"ClientConnectorError", "ConnectError", "ConnectionRefusedError", "gaierror"}:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _error_message(exc: Any) -> str:
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
    llama-cpp-python's server sends for a field it does not take) as one line: ``body.x.y: msg; ...``."""
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


def _connect_failure(exc: BaseException) -> str | None:
    """Why the connection could not be made, if a timeout error really is a refused/failed connect."""
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ == "ClientConnectorError" or (
                isinstance(cur, OSError) and not isinstance(cur, TimeoutError)):
            return str(cur).splitlines()[0][:200] or type(cur).__name__
        cur = cur.__cause__ or cur.__context__
    return None


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__
    text = str(inner or exc) or type(inner or exc).__name__
    return text.splitlines()[0][:200]
