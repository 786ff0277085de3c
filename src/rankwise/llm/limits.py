"""How calls are paced: the call policy (concurrency, rate, timeout, retries), the rate limiter, the
adaptive concurrency limit (halved on overload, grown back one by one), the call budget and the
backoff delays.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from rankwise.errors import (
    InputError,
)

__all__ = ["CallPolicy", "RateLimiter", "AdaptiveLimit", "CallBudget", "retry_after_seconds", "backoff_delay"]


@dataclass(frozen=True)
class CallPolicy:
    """How calls are made: concurrency, rate, timeout, retries, sampling, the cap on requests, and
    when a run gives the endpoint up (``breaker_failures`` connection failures in a row and no reply
    for ``breaker_seconds``).

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


class RateLimiter:
    """At most ``rpm`` starts per minute, evenly spaced; :meth:`pause_until` holds everyone (429).
    """

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
    """At most ``limit`` requests in flight, adapted AIMD-style: the limit halves when the endpoint
    says it is overloaded (429, 503, 529, a timeout; at most one cut per ``cooldown`` seconds) and
    grows back by one per ``limit`` successes, up to ``maximum``.

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
    """Seconds asked for by ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), else
    None.

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
