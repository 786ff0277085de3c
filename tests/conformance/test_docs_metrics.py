"""docs/metrics.md states the metric contract with test vectors; every vector there is checked here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import rankwise
from rankwise.metrics import average_context_precision, set_precision, set_recall, weighted_context_precision
from rankwise.metrics.rag import evaluate_rag

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


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
    assert len(rows) == 17
    for metric, verdicts, expected, fraction in rows:
        v = [] if verdicts == "(none)" else [int(x) for x in verdicts.split(",")]
        k = max(3, len(v))
        values = []
        if v:  # through the registry and the engine, as `rankwise eval -m` computes it
            docs = [f"d{i}" for i in range(len(v))]
            judged = {"q": {d: x for d, x in zip(docs, v, strict=True)}}
            result = rankwise.evaluate(judged, {"q": docs}, [f"{metric}@{k}"])
            values.append(result.mean[result.names[0]])
        if metric in ("wcp", "wcp(decay=linear)"):  # and through the plain functions
            values.append(weighted_context_precision(v, k=k, decay="linear" if "linear" in metric else "log"))
        elif metric == "acp":
            values.append(average_context_precision(v, k=k))
        assert values, (metric, verdicts)
        for value in values:
            assert f"{value:.4f}" == expected, (metric, verdicts)
        if "/" in fraction and "(" not in fraction:
            num, den = (float(x) for x in fraction.split("/"))
            assert f"{num / den:.4f}" == expected


def test_set_vectors():
    rows = vector_table("set")
    assert len(rows) == 2
    for metric, retrieved, gold, expected in rows:
        fn = {"id_precision": set_precision, "id_recall": set_recall}[metric]
        assert f"{fn(retrieved.split(','), gold.split(',')):.4f}" == expected
        # and through the registry, from an ids test set
        case = {"id": "c", "retrieved_context_ids": retrieved.split(","), "reference_context_ids": gold.split(",")}
        result = evaluate_rag([case], "ids", k=1, metrics=[metric])
        assert f"{result.mean[metric]:.4f}" == expected


def _calls_example() -> list[dict]:
    import json

    text = DOC.read_text(encoding="utf-8")
    block = text[text.index("<!-- calls-example -->"):].split("```jsonl\n", 1)[1].split("```", 1)[0]
    return [json.loads(line) for line in block.splitlines() if line.strip()]


def test_calls_vectors(tmp_path):
    """The multi-call worked example: every vector, per agent, from evaluate_rag and from eval-rag's
    JSON."""
    import json

    from click.testing import CliRunner

    from rankwise.cli import main

    rows = vector_table("calls")
    assert len(rows) == 12
    cases = _calls_example()
    names = [row[0] for row in rows]
    result = evaluate_rag(cases, "containment", metrics=names)
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    cli = CliRunner().invoke(main, ["eval-rag", str(path), "-m", ",".join(names), "--per-query", "--format",
                                    "json", "--quiet"])
    assert cli.exit_code == 0, cli.output
    shown = json.loads(cli.stdout)["per_query"]
    for name, a, b, _why in rows:
        for case, expected in (("agent-a", a), ("agent-b", b)):
            value = result.per_query[case][name]
            got = "null" if value is None else f"{value:.4f}"
            assert got == expected, (name, case)
            assert shown[case][name] == value, (name, case)
    assert result.summary["undefined"] == {"calls_to_evidence@3": 1}
    assert "never complete" in result.summary["undefined_why"]["calls_to_evidence@3"]
