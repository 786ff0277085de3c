"""The lines `rankwise plan-testset` prints: the planned size beside the formula's, the power curve,
the MDE."""

from __future__ import annotations

from rankwise.analysis.plan import SamplePlan

__all__ = ["sample_plan_lines"]


def sample_plan_lines(plan: SamplePlan, metric: str | None = None) -> list[str]:
    """The plan in words: what was asked, what the simulation found, and why a number is missing.

    Example:
        >>> from rankwise.analysis.plan import plan_sample_size
        >>> sample_plan_lines(plan_sample_size(0.05, sd=0.2, test="t", sims=200))[0].startswith(
        ...     "to detect a mean"
        ... )
        True
    """
    test = "sign-flip randomization test" if plan.test == "randomization" else "paired t-test"
    what = f" in {metric}" if metric else ""
    source = (f"a pilot of {plan.pilot} questions" if plan.pilot is not None else "normal differences")
    sd = "—" if plan.sd is None else f"{plan.sd:.4f}"
    lines = [f"to detect a mean difference of {plan.effect:g}{what} (two-sided {test}, alpha {plan.alpha:g}, "
             f"power {plan.power:g}), simulated from {source} (sd of the differences {sd}):"]
    if plan.n is not None:
        lines.append(f"  {plan.n} questions (simulated power there {plan.power_at_n:.3f}; {plan.sims:,} simulated "
                     f"sets per size" + (f", {plan.permutations:,} sign flips each" if plan.test == "randomization"
                                         else "") + ")")
    else:
        lines.append("  no size: " + (plan.note or "undefined"))
    if plan.formula is not None:
        lines.append(f"  normal-approximation formula: {plan.formula} questions")
    if plan.n_for_mde and plan.mde is not None:
        lines.append(f"  minimum detectable effect of {plan.n_for_mde} questions: {plan.mde:.4f}")
    elif plan.n_for_mde:
        lines.append(f"  minimum detectable effect of {plan.n_for_mde} questions: — (undefined: "
                     f"{plan.note or 'fewer than 2 questions'})")
    if plan.n is not None and plan.note:
        lines.append(f"  note: {plan.note}")
    lines.append(f"seed {plan.seed}; the same seed for every size (common random numbers)")
    return lines
