"""docs/metrics.md states the metric contract with test vectors; every vector there is checked here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rankwise
from rankwise.metrics import average_context_precision, set_precision, set_recall, weighted_context_precision

DOC = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


def vector_table(tag: str) -> list[list[str]]:
    """The rows of the markdown table right after ``<!-- vectors: TAG -->``."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"<!-- vectors: {tag} -->")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[0]) <= {"-"}:
            continue
        rows.append(cells)
    return rows[1:]  # without the header


@pytest.mark.parametrize("level", [1, 2])
def test_ir_worked_example(level):
    rows = vector_table(f"ir level={level}")
    assert len(rows) >= 6
    qrels = {"q": {"a": 1, "b": 0, "c": 2, "d": 1}}
    run = {"q": {"a": 1.0, "b": 1.0, "z": 1.0, "c": 0.5}}
    result = rankwise.evaluate(qrels, run, [name for name, _ in rows], relevance_level=level)
    for (name, expected), measure in zip(rows, result.names, strict=True):
        assert f"{result.mean[measure]:.4f}" == expected, name


def test_context_vectors():
    rows = vector_table("context")
    assert len(rows) == 15
    for metric, verdicts, expected, fraction in rows:
        v = [] if verdicts == "(none)" else [int(x) for x in verdicts.split(",")]
        k = max(3, len(v))
        if metric.startswith("wcp"):
            decay = re.search(r"decay=(\w+)", metric)
            value = weighted_context_precision(v, k=k, decay=decay.group(1) if decay else "log")
        elif metric == "acp":
            value = average_context_precision(v, k=k)
        else:
            docs = [f"d{i}" for i in range(len(v))]
            judged = {"q": {d: x for d, x in zip(docs, v, strict=True)}}
            value = rankwise.evaluate(judged, {"q": docs}, [f"{metric}@{k}"]).mean[f"{metric}@{k}"]
        assert f"{value:.4f}" == expected, (metric, verdicts)
        if "/" in fraction and "(" not in fraction:
            num, den = (float(x) for x in fraction.split("/"))
            assert f"{num / den:.4f}" == expected


def test_set_vectors():
    rows = vector_table("set")
    assert len(rows) == 2
    for metric, retrieved, gold, expected in rows:
        fn = {"set_precision": set_precision, "set_recall": set_recall}[metric]
        assert f"{fn(retrieved.split(','), gold.split(',')):.4f}" == expected
