"""Calls to any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, llama.cpp,
LiteLLM).

Concurrency, retries, timeouts and structured output: docs/llm-judge.md, "Robust calls".
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rankwise.errors import (
    BudgetExhausted,
    CallError,
    ContextOverflow,
    EndpointError,
    RankwiseError,
    ReplyError,
)
from rankwise.llm.cost import Usage
from rankwise.llm.endpoint import (
    Endpoint,
    check_base_url,
    config_paths,
    load_config,
    mask_url,
    resolve_endpoint,
    split_credentials,
)
from rankwise.llm.formats import (
    FORMAT_ERROR,
    OVERFLOW,
    RESPONSE_FORMATS,
    FormatMemory,
    level_of,
    response_format_body,
)
from rankwise.llm.limits import (
    AdaptiveLimit,
    CallBudget,
    CallPolicy,
    RateLimiter,
    backoff_delay,
    retry_after_seconds,
)
from rankwise.llm.replies import (
    ChatReply,
    connect_failure,
    error_cause,
    error_message,
    one_line,
    refused_connection,
    reply_of,
    utf8_safe,
)

# the client, and (re-exported) the names its users import from here: each defined in the module
# named above
__all__ = ["Endpoint", "CallPolicy", "ChatReply", "ChatClient", "CallError", "ReplyError", "BudgetExhausted",
           "EndpointError", "CallBudget", "RateLimiter", "AdaptiveLimit", "resolve_endpoint", "load_config",
           "config_paths", "retry_after_seconds", "backoff_delay", "split_credentials", "reply_of", "utf8_safe",
           "mask_url", "check_base_url", "ContextOverflow", "FormatMemory", "RESPONSE_FORMATS",
           "response_format_body", "CallStats"]


@dataclass
class CallStats:
    """Requests sent, retries, errors by kind, tokens: what the run's summary prints."""

    requests: int = 0
    retries: int = 0
    errors: Counter = field(default_factory=Counter)
    usage: Usage = field(default_factory=Usage)
    format_steps: list[str] = field(default_factory=list)  # "json_schema -> json_object: <server's words>"


class ChatClient:
    """An ``AsyncOpenAI`` client with our retries, rate limit, request cap, reply checks and
    breaker.

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
            # a close that hangs (a half-dead endpoint) must not hold the run; closing is best
            # effort
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
        """The endpoint refused the ``response_format`` sent: use the next level (for every later
        call, and remembered for the endpoint); False when there is nothing to step down from."""
        level = level_of(sent.get("response_format"))
        if level is None or not FORMAT_ERROR.search(message):
            return False
        lower = RESPONSE_FORMATS[RESPONSE_FORMATS.index(level) + 1]
        if RESPONSE_FORMATS.index(lower) > RESPONSE_FORMATS.index(self.response_format):
            self.stats.format_steps.append(f"{self.response_format} -> {lower}: {message[:120]}")
            self.response_format = lower
            self.formats.put(self.endpoint.url, self.endpoint.model, lower)
            self._format_known = True
        return True

    async def _send_gated(self, kwargs: dict[str, Any]) -> Any:
        """:meth:`_send` inside the adaptive concurrency limit, telling it about overload signals.
        """
        import openai

        await self.gate.acquire()
        try:
            resp = await self._send(kwargs)
        except (asyncio.TimeoutError, openai.APITimeoutError) as exc:
            if connect_failure(exc) is None:
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
        # AsyncOpenAI.post (the SDK's documented call for any endpoint) with a plain dict reply: the
        # same auth, URL and error mapping as chat.completions.create, without its pydantic round
        # trips, which cost more CPU than the request itself against a fast local server.
        import openai

        post = self._client.post("/chat/completions", body=kwargs, cast_to=dict[str, Any])
        try:
            if sys.version_info >= (3, 11):
                # asyncio.timeout, not wait_for: wait_for of Python <= 3.11 can swallow a
                # cancellation that arrives as the reply does, and a worker that ignores its
                # cancellation hangs the run.
                async with asyncio.timeout(self.policy.timeout):
                    return await post
            return await asyncio.wait_for(post, self.policy.timeout)
        except (openai.APIStatusError, openai.APIConnectionError, asyncio.TimeoutError, asyncio.CancelledError):
            raise
        except openai.APIError as exc:  # e.g. a response the SDK could not validate
            raise ReplyError(f"bad reply: {one_line(exc)}") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            # a 200 whose body says application/json but is not JSON (an HTML error page, a cut
            # body)
            raise ReplyError(f"bad reply: the body is not JSON ({type(exc).__name__}: {one_line(exc)})") from None

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
        """One completion, retried as the policy says; raises :class:`CallError` (this call failed;
        a :class:`ReplyError` when the reply was not a chat completion; :class:`ContextOverflow`
        when the prompt does not fit) or :class:`EndpointError` (stop). ``schema``: the reply is
        JSON of this schema, asked for with the endpoint's ``response_format`` level (see the
        module's notes)."""
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
                refused = connect_failure(exc)
                if refused is None:
                    kind, error = "timeout", f"timeout after {self.policy.timeout:g}s"
                else:  # the aiohttp transport reports a refused connection as a connect timeout
                    kind, error = "connection", f"connection error: {refused}"
                    self._connection_failed(refused, True, attempt)
            except openai.APIStatusError as exc:
                self._contact()
                status = exc.status_code
                message = error_message(exc)
                if status in (401, 403, 404):
                    raise self._fatal(status, message) from None
                if status in (400, 422, 500, 501) and adaptations < 6 and self._step_down(kwargs, message):
                    adaptations += 1
                    continue
                if status in (400, 413, 422, 500) and OVERFLOW.search(message):
                    self.stats.errors["context length"] += 1
                    raise ContextOverflow(f"context length exceeded: the server said: {message}") from None
                if status == 400 and adaptations < 2 and self._adapt(message, kwargs):
                    adaptations += 1
                    continue
                if status != 429 and status < 500 and status != 408:
                    self.stats.errors[f"HTTP {status}"] += 1
                    raise CallError(f"HTTP {status}: {message}", kind=f"HTTP {status}") from None
                kind, error = f"HTTP {status}", f"HTTP {status}: {message}"
                retry_after = retry_after_seconds(getattr(exc.response, "headers", None))
            except openai.APIConnectionError as exc:
                why = error_cause(exc)
                kind, error = "connection", f"connection error: {why}"
                self._connection_failed(why, refused_connection(exc), attempt)
            except ReplyError as exc:
                self._contact()
                kind, error = exc.kind, str(exc)
            else:
                self._contact()
                try:
                    return self._reply(resp)
                except ReplyError as exc:
                    kind, error = exc.kind, str(exc)
            self.stats.errors[kind] += 1
            attempt += 1
            if attempt > self.policy.max_retries:
                cls = ReplyError if isinstance(kind, str) and kind == ReplyError.kind else CallError
                raise cls(f"{error} (gave up after {attempt} attempts)", kind=kind)
            self.stats.retries += 1
            if retry_after is not None:
                delay = min(retry_after, self.policy.max_retry_after)
                delay += random.uniform(0, min(1.0, 0.1 * delay))
                self.limiter.pause_until(time.monotonic() + delay)
            else:
                delay = backoff_delay(attempt, self.policy.backoff_base, self.policy.backoff_max)
            await asyncio.sleep(delay)

    def _reply(self, resp: Any) -> ChatReply:
        """The reply checked field by field (:func:`reply_of`); tokens are counted once it is whole.
        """
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
