"""Plain-text renderings of PPI estimates, label plans and PPI gates (docs/ppi.md); rendering only.

Example:
    >>> from rankwise.analysis.ppi import ppi_mean
    >>> ppi_lines_one(ppi_mean([1, 0], [1, 0], [1, 0, 1]))[0].startswith("metric")
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from rankwise.analysis.ppi import LabelPlan, PPIEstimate, PPIGate, PPIResult

__all__ = ["ppi_lines", "ppi_lines_one", "ppi_plan_lines", "ppi_gate_lines", "ppi_csv"]

CSV_COLUMNS = ("metric", "n", "N", "judge_mean", "human_mean", "human_ci_low", "human_ci_high", "estimate",
               "ci_low", "ci_high", "se", "lam", "effective_n", "note")


def ppi_csv(result: PPIResult) -> str:
    """One CSV row per metric (empty cells where an estimate is undefined)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in result.estimates.values():
        hci, ci = e.human_ci or (None, None), e.ci or (None, None)
        values = (e.metric, e.n, e.N, e.judge_mean, e.human_mean, hci[0], hci[1], e.estimate, ci[0], ci[1], e.se,
                  e.lam, e.effective_n, e.note)
        writer.writerow(["" if v is None else v for v in values])
    return buf.getvalue()


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "no interval" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def ppi_lines_one(e: PPIEstimate) -> list[str]:
    """The lines of one estimate: means, interval, λ, n, N and effective sample size, and any note.
    """
    conf = round(100 * (1 - e.alpha), 2)
    lines = [f"{e.metric}",
             f"  judge only  {_num(e.judge_mean)}   (all {e.n + e.N} cases, uncorrected)",
             f"  human only  {_num(e.human_mean)}   {conf:g}% CI {_ci(e.human_ci)}   (n = {e.n} labelled)",
             f"  PPI++       {_num(e.estimate)}   {conf:g}% CI {_ci(e.ci)}   "
             f"(λ = {_num(e.lam)}, n = {e.n}, N = {e.N} unlabelled, effective n = "
             f"{'—' if e.effective_n is None else f'{e.effective_n:.1f}'})"]
    if e.note:
        lines.append(f"  note: {e.note}")
    return lines


def ppi_lines(result: PPIResult) -> list[str]:
    """Every metric's estimate, then what was labelled and what the unlabelled set is."""
    lines = [f"PPI++: judge {result.judge!r} corrected by {result.human!r} verdicts"]
    for e in result.estimates.values():
        lines += ppi_lines_one(e)
    s = result.summary
    if "labelled" in s:
        lines.append(f"{s['labelled']} labelled cases, {s['unlabelled']} unlabelled"
                     + (f", {s['partially_labelled']} partially labelled (counted as unlabelled)"
                        if s.get("partially_labelled") else "")
                     + (f", {s['left_out']} left out (--incomplete/--unscorable skip)" if s.get("left_out") else ""))
    lines.append(f"unlabelled set: {s['unlabelled_set']}")
    lines.append("method: PPI++ (Angelopoulos, Duchi & Zrnic 2023), λ tuned on the data and clipped to [0, 1], "
                 "normal interval; effective n = human labels that alone would give this width")
    return lines


def ppi_plan_lines(plans: Sequence[LabelPlan]) -> list[str]:
    """One block per metric: labels for PPI++ and for humans alone, with costs beside labelling
    everything."""
    lines = []
    for p in plans:
        def cost(k: int | None, p: LabelPlan = p) -> str:
            c = p.cost(k)
            return "" if c is None else f" (cost {c:,.2f})"
        lines.append(f"{p.metric}: half-width ±{p.half_width:g} from a pilot of {p.pilot} of {p.total} cases")
        lines.append(f"  PPI++ (judge + humans): {'—' if p.ppi_labels is None else p.ppi_labels} labels"
                     f"{cost(p.ppi_labels)}")
        if p.human_labels is None and p.human_labels_needed is not None:
            lines.append(f"  humans only:            not reachable ({p.human_labels_needed} labels needed, "
                         f"{p.total} cases exist)")
        else:
            lines.append(f"  humans only:            {'—' if p.human_labels is None else p.human_labels} labels"
                         f"{cost(p.human_labels)}")
        lines.append(f"  label everything:       {p.total} labels{cost(p.total)}")
        if p.note:
            lines.append(f"  note: {p.note}")
    return lines


def ppi_gate_lines(g: PPIGate) -> list[str]:
    """Each metric's verdict with its PPI estimate of candidate − baseline."""
    lines = [f"gate (PPI++, max drop {g.max_drop:g}): {'FAIL' if g.exit_code == 1 else 'UNDECIDED' if g.exit_code == 2 else 'PASS'}"]
    for key, e in g.result.estimates.items():
        lines.append(f"  {g.verdicts[key].upper():9} {key}: {_num(e.estimate)} {_ci(e.ci)} (n = {e.n}, N = {e.N})"
                     + (f" — {e.note}" if e.note else ""))
    return lines
