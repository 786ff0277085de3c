"""The demo's comparison table: every metric at every K for each system, the best marked."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from rankwise.report.console import make_console
from rankwise.report.labels import signed

__all__ = ["demo_table", "print_demo", "print_llm_demo"]


def demo_table(result) -> Table:
    """Rows: metric x K; columns: systems. The best value of each row is bold and starred."""
    s = result.settings
    table = Table(title=f"rankwise demo: {s['dataset']}, {s['questions']} questions",
                  caption=f"{s['documents']} documents, {s['chunks']} chunks of <= {s['chunk_size']} chars; "
                          "span ground truth")
    table.add_column("metric", style="bold")
    table.add_column("K", justify="right")
    for system in result.systems:
        table.add_column(system, justify="right")
    previous = None
    for metric in result.metrics:
        base, _, k = metric.rpartition("@")
        if previous is not None and base != previous:
            table.add_section()
        best = set(result.best_systems(metric))
        cells = []
        for system in result.systems:
            value = f"{result.means[system][metric]:.4f}"
            marked = system in best and len(best) < len(result.systems)  # a tie for all marks none
            cells.append(f"[bold green]{value} ★[/]" if marked else value + "  ")
        label = base + (" †" if base == "acp" else "") if base != previous else ""
        table.add_row(label, k, *cells)
        previous = base
    return table


def print_demo(result, console: Console | None = None) -> None:
    """Print the table, the verdict on the best system with its paired tests, and where files went.
    """
    console = console or make_console()
    console.print(demo_table(result))
    console.print("★ best system on that row.  † acp divides by relevant chunks retrieved, not by all relevant "
                  "passages: read it beside recall. Recall counts ground-truth passages, so it equals "
                  "context_recall here.", style="dim")
    primary = result.settings["primary_metric"]
    wins = {s: sum(s in result.best_systems(m) for m in result.metrics) for s in result.systems}
    comp = result.comparison
    lines = [f"Best system: [bold]{result.winner}[/] by {primary} "
             f"({result.means[result.winner][primary]:.4f}); best or tied on {wins[result.winner]} of "
             f"{len(result.metrics)} rows."]
    for c in comp.comparisons:
        if c.metric != primary:
            continue
        mark = "significant" if c.significant else "not significant"
        lines.append(f"  {c.system} vs {comp.baseline} on {primary}: {signed(c.delta)} "
                     f"(95% CI {signed(c.ci_low)} .. {signed(c.ci_high)}, p = {c.p_adjusted:.4f} after "
                     f"{comp.settings['correction']}, {mark})")
    for line in lines:
        console.print(line)
    t = result.timings
    # the timing on its own line: a slow machine's longer figure must not re-wrap the line that
    # follows
    console.print(f"Took {t['total']:.1f} s (retrieval {t['retrieval']:.1f} s).", style="dim")
    console.print("Wrote runs, records, summary.json" + (" and report.html" if "html" in result.files else "")
                  + f" to {_folder(result)}", style="dim")


def _folder(result) -> str:
    return str(Path(result.files["summary"]).parent) + "/"


def print_llm_demo(result, console: Console | None = None) -> None:
    """The LLM demo: what the judge run did, its agreement with the span labels and the metrics
    under both, the sentence on what that agreement means, and where the files went."""
    from rankwise.report.judge_console import judge_summary_lines, print_agreement

    console = console or make_console()
    for line in judge_summary_lines(result.summary, result.base_url):
        console.print(line, highlight=False)
    print_agreement(result.agreement, result.effects, show=5, console=console)
    console.print(result.sentence)
    console.print(f"Took {result.seconds:.0f} s (stated beforehand: about {result.expected_seconds:.0f} s). "
                  f"Wrote records (span and llm verdicts) and summary.json to "
                  f"{Path(result.files['summary']).parent}/; the verdict cache "
                  "answers a rerun.", style="dim")
