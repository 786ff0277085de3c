"""What ``rankwise import-testset`` prints: the contexts mapped to spans, and how (render only)."""

from __future__ import annotations

from rankwise.testsets.importers import ImportSummary

__all__ = ["import_lines"]


def import_lines(s: ImportSummary) -> list[str]:
    """The report of ``rankwise import-testset``."""
    mapped = sum(s.mapped.values())
    return [f"import ({s.format}): {s.questions} questions, {s.contexts} contexts: {mapped} mapped to spans "
            f"(exact {s.mapped.get('exact', 0)}, normalised {s.mapped.get('normalised', 0)}, fuzzy "
            f"{s.mapped.get('fuzzy', 0)}), {s.unmapped} unmapped",
            f"test set: {s.out}"]
