"""What ``rankwise synth`` prints: the dry run's plan and the run's summary (render only)."""

from __future__ import annotations

from rankwise.testsets.synth_checks import REASONS
from rankwise.testsets.synth_run import SynthEstimate, SynthSummary

__all__ = ["estimate_lines", "summary_lines"]


def estimate_lines(est: SynthEstimate, url: str, model: str) -> list[str]:
    """The ``--dry-run`` report: one line per phase, then the total."""
    lines = [f"dry run: {est.samples} samples planned ({est.already_done} already done), model {model} at {url}"]
    total_cost: float | None = None
    for name, p in est.phases.items():
        extra = f", {p['cached']} cached" if p.get("cached") else ""
        bound = " (at most: only samples that pass the checks)" if p.get("upper_bound") else ""
        money = f", ${p['cost']:.4f}" if p.get("cost") is not None else ""
        lines.append(f"  {name:16} {p['calls']:6d} calls{extra}, ~{p['prompt_tokens']:,} prompt + "
                     f"~{p['completion_tokens']:,} completion tokens{money}{bound}")
        if p.get("cost") is not None:
            total_cost = (total_cost or 0.0) + p["cost"]
    money = f", ~${total_cost:.4f}" if total_cost is not None else " (give --price-in/--price-out for money)"
    lines.append(f"  {'total':16} {est.calls:6d} calls{money}")
    return lines


def summary_lines(s: SynthSummary) -> list[str]:
    """The end-of-run report: kept, rejected by reason, duplicates, difficulty, calls and money."""
    rejected = sum(s.rejected.values())
    lines = [f"synth: {s.accepted} samples kept of {s.planned} planned, {rejected} rejected"
             + (f" ({s.resumed} decided by an earlier run)" if s.resumed else "")]
    for reason, n in sorted(s.rejected.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  rejected {n:5d}  {reason}: {REASONS.get(reason, reason)}")
    lines.append(f"  near-duplicates removed: {s.rejected.get('duplicate', 0)}")
    lines.append("  difficulty (BM25 round trip): " + ", ".join(
        f"{k} {s.difficulty.get(k, 0)}" for k in ("easy", "hard", "unretrieved")))
    lines.append("  styles: " + ", ".join(f"{k} {v}" for k, v in sorted(s.styles.items()))
                 + "; languages: " + ", ".join(f"{k} {v}" for k, v in sorted(s.languages.items())))
    lines.append(f"  documents: {s.documents}, at most {s.max_per_document} planned samples from one document")
    if s.requested > s.planned:
        lines.append(f"  planned {s.planned} of the {s.requested} asked for: each document gives at most its share "
                     f"of passages; a smaller --passage-chars gives more")
    money = f", ${s.cost:.4f}" if s.cost is not None else ""
    lines.append(f"  calls: {s.calls} made ({s.requests} requests with retries), {s.cached} from the cache; "
                 f"{s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion tokens{money}")
    if s.stopped:
        cap = "--max-calls" if s.stopped.startswith("max calls") else "--max-cost"
        lines.append(f"  stopped: {s.stopped}; rerun the same command (with a higher {cap}) to go on")
    lines.append(f"test set: {s.out}; rejected samples: {s.rejected_out}")
    return lines
