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
- fatal: 401/403 (key), 404 (model or URL) and an endpoint that cannot be reached abort the run with
  :class:`EndpointError` (a one-line message); other 4xx fail the one call.

Endpoint settings come from flags, then the environment (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
``RANKWISE_JUDGE_MODEL``), then the ``[llm]`` table of a config file (``--config``, ``./rankwise.toml``,
or ``~/.config/rankwise/config.toml``).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import os
import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.errors import InputError, RankwiseError
from rankwise.relevance.llm.cost import Usage

__all__ = ["Endpoint", "CallPolicy", "ChatReply", "ChatClient", "CallError", "BudgetExhausted",
           "EndpointError", "CallBudget", "RateLimiter", "AdaptiveLimit", "resolve_endpoint", "load_config", "config_paths",
           "retry_after_seconds", "backoff_delay"]

OPENAI_URL = "https://api.openai.com/v1"
CONFIG_KEYS = {"model", "base_url", "api_key", "api_key_env", "mode", "graded", "concurrency", "rpm",
               "timeout", "max_retries", "temperature", "price_in", "price_out", "cache", "prompt",
               "batch_size"}


class EndpointError(RankwiseError):
    """The endpoint cannot be used at all (unreachable, bad key, unknown model): the run stops."""


class CallError(Exception):
    """One call gave no usable reply after its retries; ``str()`` says why."""


class BudgetExhausted(CallError):
    """``max_calls`` requests were sent already."""


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
    from rankwise.relevance.llm.prompts import _load_toml

    if path is not None:
        candidates, explicit = [Path(path)], True
    else:
        candidates, explicit = config_paths(), False
    for p in candidates:
        if not p.is_file():
            if explicit:
                raise InputError("config file not found", source=p)
            continue
        data = _load_toml(p)
        table = data.get("llm", {})
        if not isinstance(table, dict):
            raise InputError("[llm] must be a table", source=p, field="llm")
        unknown = set(table) - CONFIG_KEYS
        if unknown:
            raise InputError(f"unknown key(s) {sorted(unknown)}; [llm] takes {sorted(CONFIG_KEYS)}", source=p,
                             field="llm")
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
        return (self.base_url or OPENAI_URL).rstrip("/")


def resolve_endpoint(*, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                     config: dict[str, Any] | None = None, config_source: str | None = None,
                     env: dict[str, str] | None = None) -> Endpoint:
    """Flags win over the environment, which wins over the config file.

    Example:
        >>> resolve_endpoint(model="m", base_url="http://127.0.0.1:8000/v1", env={}).api_key
        'unused'
    """
    env = os.environ if env is None else env
    config = config or {}
    model = model or env.get("RANKWISE_JUDGE_MODEL") or config.get("model")
    if not model:
        raise InputError("no judge model: pass --model, set RANKWISE_JUDGE_MODEL, or put model = \"...\" in the "
                         "[llm] table of rankwise.toml", field="model")
    base_url = base_url or env.get("OPENAI_BASE_URL") or config.get("base_url") or None
    key_env = config.get("api_key_env")
    api_key = (api_key or env.get("OPENAI_API_KEY") or (env.get(key_env) if key_env else None)
               or config.get("api_key") or None)
    if api_key is None:
        if base_url is None or base_url.rstrip("/") == OPENAI_URL:
            raise InputError("no API key for api.openai.com: pass --api-key, set OPENAI_API_KEY, or pass "
                             "--base-url of a local server (vLLM, Ollama, llama.cpp ...)", source=config_source,
                             field="api_key")
        api_key = "unused"  # local servers ignore it; the SDK insists on one
    return Endpoint(str(model), base_url, api_key)


@dataclass(frozen=True)
class CallPolicy:
    """How calls are made: concurrency, rate, timeout, retries, sampling, and the cap on requests.

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


# ----------------------------------------------------------------------------------------------- client


@dataclass
class ChatReply:
    """One completion: its text (or refusal), why it stopped, and its token counts."""

    content: str | None
    refusal: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int


@dataclass
class CallStats:
    """Requests sent, retries, errors by kind, tokens: what the run's summary prints."""

    requests: int = 0
    retries: int = 0
    errors: Counter = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)


class ChatClient:
    """An ``AsyncOpenAI`` client with our retries, rate limit and request cap.

    Example::

        async with ChatClient(Endpoint("qwen2.5:7b", "http://localhost:11434/v1", "unused")) as client:
            reply = await client.chat([{"role": "user", "content": "Say hi"}], max_tokens=20)
    """

    def __init__(self, endpoint: Endpoint, policy: CallPolicy | None = None) -> None:
        self.endpoint = endpoint
        self.policy = policy or CallPolicy()
        self.limiter = RateLimiter(self.policy.rpm)
        self.gate = AdaptiveLimit(self.policy.concurrency)
        self.budget = CallBudget(self.policy.max_calls)
        self.stats = CallStats()
        self.transport = "aiohttp"
        self._client: Any = None
        self._succeeded = False
        self._token_param = "max_tokens"
        self._send_temperature = self.policy.temperature is not None

    async def __aenter__(self) -> ChatClient:
        try:
            import openai
        except ModuleNotFoundError:
            raise RankwiseError("the LLM judge needs the openai SDK: pip install 'rankwise[llm]'") from None
        try:
            http_client = openai.DefaultAioHttpClient()
        except (RuntimeError, AttributeError):
            http_client = openai.DefaultAsyncHttpxClient()
            self.transport = "httpx (install 'openai[aiohttp]' for the faster aiohttp transport)"
        self._client = openai.AsyncOpenAI(api_key=self.endpoint.api_key, base_url=self.endpoint.base_url,
                                          max_retries=0, timeout=self.policy.timeout + 5.0,
                                          http_client=http_client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    def _request(self, messages: list[dict], max_tokens: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.endpoint.model, "messages": messages,
                                  self._token_param: max_tokens}
        if self._send_temperature:
            kwargs["temperature"] = self.policy.temperature
        return kwargs

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
        return await asyncio.wait_for(self._client.post("/chat/completions", body=kwargs, cast_to=dict[str, Any]),
                                      self.policy.timeout)

    def _unreachable(self, why: str) -> EndpointError:
        return EndpointError(f"cannot reach the LLM endpoint {self.endpoint.url}: {why}. Is the server running "
                             f"and --base-url right? (rankwise needs no network except to this endpoint)")

    def _fatal(self, status: int, message: str) -> EndpointError:
        hint = {401: "check --api-key / OPENAI_API_KEY", 403: "check --api-key / OPENAI_API_KEY",
                404: "check --model and --base-url (it usually ends in /v1)"}[status]
        return EndpointError(f"HTTP {status} from {self.endpoint.url} (model {self.endpoint.model!r}): "
                             f"{message}; {hint}")

    async def chat(self, messages: list[dict], *, max_tokens: int = 300) -> ChatReply:
        """One completion, retried as the policy says; raises :class:`CallError` or
        :class:`EndpointError`."""
        import openai

        attempt = 0
        adaptations = 0
        while True:
            if not self.budget.take():
                raise BudgetExhausted(f"max-calls reached ({self.budget.max_calls} requests)")
            await self.limiter.wait()
            self.stats.requests += 1
            retry_after: float | None = None
            kwargs = self._request(messages, max_tokens)
            try:
                resp = await self._send_gated(kwargs)
            except (asyncio.TimeoutError, openai.APITimeoutError) as exc:
                refused = _connect_failure(exc)
                if refused is None:
                    error = f"timeout after {self.policy.timeout:g}s"
                else:  # the aiohttp transport reports a refused connection as a connect timeout
                    error = f"connection error: {refused}"
                    if not self._succeeded and attempt >= 1:
                        raise self._unreachable(refused) from None
            except openai.APIStatusError as exc:
                status = exc.status_code
                message = _error_message(exc)
                if status in (401, 403, 404):
                    raise self._fatal(status, message) from None
                if status == 400 and adaptations < 2 and self._adapt(message, kwargs):
                    adaptations += 1
                    continue
                if status != 429 and status < 500 and status != 408:
                    self.stats.errors[f"HTTP {status}"] += 1
                    raise CallError(f"HTTP {status}: {message}") from None
                error = f"HTTP {status}: {message}"
                retry_after = retry_after_seconds(getattr(exc.response, "headers", None))
            except openai.APIConnectionError as exc:
                error = f"connection error: {_cause(exc)}"
                if not self._succeeded and attempt >= 1:
                    raise self._unreachable(_cause(exc)) from None
            else:
                self._succeeded = True
                return self._reply(resp)
            self.stats.errors[error.split(":")[0] if error.startswith("HTTP") else error.split(" ")[0]] += 1
            attempt += 1
            if attempt > self.policy.max_retries:
                if error.startswith("connection error"):
                    raise EndpointError(f"lost the LLM endpoint {self.endpoint.url}: {error} (gave up after "
                                        f"{attempt} attempts)")
                raise CallError(f"{error} (gave up after {attempt} attempts)")
            self.stats.retries += 1
            if retry_after is not None:
                delay = min(retry_after, self.policy.max_retry_after)
                delay += random.uniform(0, min(1.0, 0.1 * delay))
                self.limiter.pause_until(time.monotonic() + delay)
            else:
                delay = backoff_delay(attempt, self.policy.backoff_base, self.policy.backoff_max)
            await asyncio.sleep(delay)

    def _reply(self, resp: Any) -> ChatReply:
        if not isinstance(resp, dict):
            raise CallError(f"the endpoint's reply is not a JSON object: {str(resp)[:200]!r}")
        usage = resp.get("usage") or {}
        pt = int(usage.get("prompt_tokens") or 0)
        ct = int(usage.get("completion_tokens") or 0)
        self.stats.usage.add(pt, ct)
        choices = resp.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        msg = choice.get("message") or {}
        content = msg.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return ChatReply(content=content, refusal=msg.get("refusal"), finish_reason=choice.get("finish_reason"),
                         prompt_tokens=pt, completion_tokens=ct)

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


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return str(getattr(exc, "message", exc))[:300]


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
