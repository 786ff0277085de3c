"""The files a synth run resumes from: the samples already decided (accepted and rejected), checked
against the run's fingerprint, a partial last line cut, the failed calls asked again.
"""

from __future__ import annotations

import hashlib
import json
from os import PathLike
from pathlib import Path
from typing import Any

from rankwise.data.corpus import Corpus
from rankwise.errors import InputError
from rankwise.testsets.synth_checks import ASKED_AGAIN
from rankwise.testsets.synth_plan import SynthSettings

__all__ = ["fingerprint", "drop_failed_calls", "read_done", "truncate_partial", "rejected_path"]


def fingerprint(corpus: Corpus, settings: SynthSettings, model: str, version: str) -> str:
    h = hashlib.sha256()
    for d in corpus:
        h.update(d.id.encode() + b"\0" + hashlib.sha256(d.text.encode()).digest())
    h.update(json.dumps([settings.n, sorted(settings.styles.items()), settings.seed, settings.passage_chars,
                         settings.min_passage_chars, settings.critic, model, version]).encode())
    return h.hexdigest()[:16]


def drop_failed_calls(path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rejected rows without those that decided nothing (:data:`ASKED_AGAIN`: a call that failed
    after its retries, a reply that was no answer -- not the JSON asked for, or a refusal); the file
    is rewritten without them, so their samples are asked again, as the judge retries its failures.
    """
    kept = [r for r in rows if r.get("reason") not in ASKED_AGAIN]
    if len(kept) < len(rows):
        from rankwise._atomic import atomic_write

        with atomic_write(path) as fh:
            fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in kept)
    return kept


def read_done(path: Path, plan: str) -> list[dict[str, Any]]:
    """Rows already written by an earlier run of the same plan (a half-written last line is
    dropped)."""
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # killed mid-line: that sample is redone from the cache
                continue
            raise InputError("not valid JSON (fix or remove the file to start over)", source=path,
                             line=number) from None
        prov = row.get("provenance") or {}
        if prov.get("plan") != plan:
            raise InputError(f"this file was written by another synth run (plan {prov.get('plan')}, this run "
                             f"{plan}: other corpus, settings, model or prompt); use another --out or remove it",
                             source=path, line=number, field="provenance.plan")
        rows.append(row)
    return rows


def truncate_partial(path: Path) -> None:
    """Drop a half-written last line (a killed run) so new rows start on a line of their own."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(cut)


def rejected_path(out: str | PathLike) -> Path:
    """Where rejected samples go: ``OUT`` with ``.rejected.jsonl`` in place of its suffix.

    Example:
        >>> rejected_path("sets/testset.jsonl").as_posix(), rejected_path("testset").as_posix()
        ('sets/testset.rejected.jsonl', 'testset.rejected.jsonl')
    """
    p = Path(out)
    return p.with_name((p.name[: -len(p.suffix)] if p.suffix else p.name) + ".rejected.jsonl")
