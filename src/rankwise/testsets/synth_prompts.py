"""The prompts of test-set synthesis (generation and critic), how a slot is rendered into them, and
a reply's cache key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from rankwise.data.corpus import Corpus
from rankwise.errors import InputError
from rankwise.llm.cache import cache_key
from rankwise.llm.prompts import data_boundary, fence, fill, load_toml, shipped_toml
from rankwise.testsets.language import language_name
from rankwise.testsets.synth_plan import STYLES, Slot

__all__ = ["OUTPUT_TOKENS", "SynthPrompts", "load_synth_prompts", "render_slot", "render_critic", "reply_key"]


OUTPUT_TOKENS = {"factual": 150, "paraphrase": 150, "multi": 220, "conversational": 260, "multi-hop": 240,
                 "critic": 40}


@dataclass(frozen=True)
class SynthPrompts:
    """The generation templates (one per style) and the critic's, with their version."""

    version: str
    system: str
    styles: dict[str, str]
    critic_system: str
    critic_user: str
    source: str

    @property
    def prompt_version(self) -> str:
        """``synth-v<version>+<8 hex of the template text>``: a changed prompt is a new cache key.
        """
        text = "\x1f".join([self.system, *[self.styles[s] for s in sorted(self.styles)], self.critic_system,
                            self.critic_user])
        return f"synth-v{self.version}+{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def load_synth_prompts(path: str | PathLike | None = None) -> SynthPrompts:
    """The shipped templates (``rankwise/testsets/prompts/synth.toml``), or a user file laid out the
    same way (any key it gives replaces the shipped one).

    Example:
        >>> load_synth_prompts().prompt_version.startswith("synth-v2+")
        True
    """
    data, source = shipped_toml("rankwise.testsets", "synth.toml")
    if path is not None:
        user = load_toml(Path(path))
        source = str(path)
        for key in ("version", "system"):
            if key in user:
                data[key] = user[key]
        for table in ("styles", "critic"):
            if table in user:
                if not isinstance(user[table], dict):
                    raise InputError(f"[{table}] must be a table", source=path, field=table)
                data[table] = {**data[table], **user[table]}
        data.setdefault("version", "custom")
    for style in STYLES:
        if not isinstance(data["styles"].get(style), str):
            raise InputError(f"[styles] {style} must be a string", source=source, field=style)
    return SynthPrompts(str(data["version"]), data["system"], dict(data["styles"]), data["critic"]["system"],
                        data["critic"]["user"], source)


def _fenced(template: str, data: dict[str, str], plain: dict[str, str] | None = None) -> str:
    """``template`` filled: every ``data`` text fenced with one boundary over all of them
    (:func:`~rankwise.llm.prompts.fence`), ``plain`` values (ours, not the corpus's) as they are."""
    boundary = data_boundary(*data.values())
    return fill(template, {k: fence(v, boundary) for k, v in data.items()} | (plain or {}))


def render_slot(slot: Slot, prompts: SynthPrompts, corpus: Corpus) -> list[dict]:
    """The chat messages of one sample's generation call (passages and titles fenced)."""
    first = slot.passages[0]
    data = {"passage": first.text, "title": corpus[first.doc_id].title or first.doc_id}
    if len(slot.passages) > 1:
        second = slot.passages[1]
        data |= {"passage2": second.text, "title2": corpus[second.doc_id].title or second.doc_id}
    user = _fenced(prompts.styles[slot.style], data, {"language": language_name(slot.language)})
    return [{"role": "system", "content": prompts.system}, {"role": "user", "content": user}]


def render_critic(prompts: SynthPrompts, question: str, answer: str, quotes: list[str]) -> list[dict]:
    """The chat messages of a critic call: question, answer and the quotes (not the whole passage),
    fenced."""
    data = {"question": question, "answer": answer, "quotes": "\n".join(f"- {q}" for q in quotes)}
    return [{"role": "system", "content": prompts.critic_system},
            {"role": "user", "content": _fenced(prompts.critic_user, data)}]


def reply_key(model: str, version: str, kind: str, messages: list[dict], temperature: float | None,
              max_tokens: int) -> str:
    """The cache key of one synth call (``kind``: ``generation`` or ``critic``): a SHA-256 of the
    model, the prompt version, the sampling parameters and the exact messages, in the judge's cache
    file (mode ``synth``; :func:`~rankwise.llm.cache.cache_key`).

    Example:
        >>> len(
        ...     reply_key(
        ...         "m", "synth-v2+0", "generation", [{"role": "user", "content": "q"}], 0.0, 800
        ...     )
        ... )
        64
    """
    return cache_key(model=model, mode="synth", scale=kind, prompt_version=version, style="generate",
                     question="", chunk=json.dumps(messages, ensure_ascii=False, sort_keys=True), context=None,
                     params={"temperature": temperature, "max_tokens": max_tokens})
