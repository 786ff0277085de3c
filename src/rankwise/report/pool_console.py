"""What ``rankwise pool`` prints: the dry run's plan and the run's summary (render only)."""

from __future__ import annotations

from rankwise.testsets.pool_run import PoolSummary

__all__ = ["pool_lines"]


def pool_lines(s: PoolSummary) -> list[str]:
    """The report printed by ``rankwise pool``."""
    if s.plan is not None:
        p = s.plan
        money = f", ${p['cost']:.4f}" if p["cost"] is not None else ""
        return [f"dry run: {s.questions} questions, {s.pooled} distinct chunks in the top {s.k}: {s.labelled} "
                f"labelled already, {p['chunks']} to judge ({p['cached']} cached)",
                f"  judge            {p['calls']:6d} calls, ~{p['prompt_tokens']:,} prompt + "
                f"~{p['completion_tokens']:,} completion tokens{money}"]
    money = f", ${s.cost:.4f}" if s.cost is not None else ""
    lines = [f"pool: {s.questions} questions, {s.pooled} distinct chunks in the top {s.k} of the systems: "
             f"{s.labelled} labelled already, {s.judged} judged ({s.relevant} relevant, added as labels)"
             + (f", {s.failed} not judged (failed)" if s.failed else ""),
             f"  judge calls: {s.calls} made, {s.cached} from the cache{money}",
             f"  judged@{s.k} per system (share of the top {s.k} with a label): before -> after"]
    for name in s.judged_before:
        lines.append(f"    {name:30} {s.judged_before[name]:.4f} -> {s.judged_after[name]:.4f}")
    lines.append(f"pooled test set: {s.out}")
    return lines
