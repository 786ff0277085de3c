"""Token usage and cost of a judge run: summed from the endpoint's ``usage`` replies, or estimated.

Estimates (for ``--dry-run``) count 4 characters per token, the usual rule of thumb for English text
with GPT-style tokenizers; real runs report the endpoint's own counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Usage", "Prices", "estimate_tokens", "OUTPUT_TOKENS_PER_VERDICT", "SINGLE_MAX_TOKENS",
           "estimate_prompt_tokens"]

CHARS_PER_TOKEN = 4
OUTPUT_TOKENS_PER_VERDICT = 40  # {"verdict": 1, "reason": "..."}: a reason of a few words
SINGLE_MAX_TOKENS = 300  # the output cap of one per-chunk verdict call (a batch call adds 100 per chunk)
MESSAGE_OVERHEAD_TOKENS = 4  # role and separators per chat message


def estimate_tokens(text: str) -> int:
    """A rough token count: ``ceil(len(text) / 4)``.

    Example:
        >>> estimate_tokens("Paris is the capital of France.")
        8
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_prompt_tokens(messages: list[dict]) -> int:
    """Estimated prompt tokens of a chat request."""
    return sum(estimate_tokens(m.get("content") or "") + MESSAGE_OVERHEAD_TOKENS for m in messages)


@dataclass(frozen=True)
class Prices:
    """Prices per 1 million tokens, as providers quote them (None = unknown).

    Example:
        >>> Prices(0.15, 0.60).cost(1_000_000, 100_000)
        0.21
    """

    input_per_m: float | None = None
    output_per_m: float | None = None

    @property
    def known(self) -> bool:
        return self.input_per_m is not None or self.output_per_m is not None

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Cost of the given token counts, None when no price is known."""
        if not self.known:
            return None
        return round(prompt_tokens * (self.input_per_m or 0.0) / 1e6
                     + completion_tokens * (self.output_per_m or 0.0) / 1e6, 10)


@dataclass
class Usage:
    """Requests sent and tokens used, summed over a run.

    Example:
        >>> u = Usage(); u.add(120, 30); u.add(100, 25); (u.requests, u.total_tokens)
        (2, 275)
    """

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the server said it took from its cache

    def add(self, prompt_tokens: int | None, completion_tokens: int | None, cached_prompt_tokens: int = 0) -> None:
        self.requests += 1
        self.prompt_tokens += int(prompt_tokens or 0)
        self.completion_tokens += int(completion_tokens or 0)
        self.cached_prompt_tokens += int(cached_prompt_tokens or 0)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
