"""The same number everywhere: one test set, every verdict source, every command and the API.

Per case and in the mean, ``eval-rag``, ``probe``, ``agree``, ``compare-rag`` (table values and
``--sweep``), ``gate``, the Python API and the HTML report give identical values for ndcg@5,
recall@5, wcp@5 and acp@5. ``compare``/``compare-rag`` and ``gate`` print the same p-value for the
same data.
"""

from __future__ import annotations

import csv
import html
import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import rankwise
from rankwise.cli import main
from rankwise.data.records import Verdict, records_from_testset, write_records

METRICS = ["ndcg@5", "recall@5", "wcp@5", "acp@5"]
SOURCES = ["containment", "span", "fuzzy", "ids", "human", "llm"]
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "omicron", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "river", "stone", "cloud", "ember", "frost", "grove", "harbor", "island", "jungle", "kettle", "lantern", "meadow", "needle", "orchard"]


def _documents(rng: random.Random) -> dict[str, str]:
    return {f"doc{i}": " ".join(rng.choice(WORDS) + f"{rng.randrange(1000)}" for _ in range(120)) for i in range(6)}


def _cases(rng: random.Random, docs: dict[str, str], n: int = 14) -> list[dict]:
    """Cases whose chunks are slices of the documents; reference passages are slices too, so
    containment, span and fuzzy verdicts all have something to find, some chunks match the same
    passage twice."""
    cases = []
    for c in range(n):
        doc_id = rng.choice(sorted(docs))
        text = docs[doc_id]
        n_refs = rng.choice([1, 1, 2, 3])
        refs = []
        for _ in range(n_refs):
            start = rng.randrange(0, len(text) - 120)
            refs.append((doc_id, start, start + rng.randrange(30, 60)))
        chunks = []
        for _j in range(rng.randrange(3, 8)):
            if refs and rng.random() < 0.45:
                _, rs, re_ = rng.choice(refs)  # a chunk holding a reference passage
                start = max(0, rs - rng.randrange(0, 40))
                end = min(len(text), re_ + rng.randrange(0, 40))
            else:
                start = rng.randrange(0, len(text) - 80)
                end = start + rng.randrange(40, 80)
            chunks.append({"id": f"{doc_id}:{start}", "text": text[start:end], "doc_id": doc_id, "start": start,
                           "end": end})
        cases.append({
            "id": f"case{c:02d}",
            "question": f"question {c}",
            "retrieved_contexts": chunks,
            "reference_contexts": [{"text": text[s:e], "doc_id": d, "start": s, "end": e} for d, s, e in refs],
            # gold ids: the chunks that hold a passage (and an id that no chunk has)
            "reference_context_ids": sorted({ch["id"] for ch in chunks if any(
                ch["start"] <= s and e <= ch["end"] for _, s, e in refs)} | {f"{doc_id}:missing"}),
        })
    return cases


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("same-number")
    rng = random.Random(7)
    docs = _documents(rng)
    runner = CliRunner()
    out = {}
    for system, shuffle in (("A", False), ("B", True)):
        cases = _cases(random.Random(11), docs)
        if shuffle:  # system B: the same chunks in another order
            r2 = random.Random(5)
            for case in cases:
                r2.shuffle(case["retrieved_contexts"])
        testset = tmp / f"{system}.testset.jsonl"
        testset.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
        labels = tmp / f"{system}.labels.csv"
        lrng = random.Random(3)
        with open(labels, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(["query_id", "chunk_id", "rank", "verdict"])
            for case in cases:
                for rank, ch in enumerate(case["retrieved_contexts"], start=1):
                    w.writerow([case["id"], ch["id"], rank, lrng.choice([0, 1])])
        # LLM verdicts (graded 0-3), as `rankwise judge --records` writes them
        records = records_from_testset(testset)
        vrng = random.Random(17)
        for rec in records:
            for ch in rec.chunks:
                grade = vrng.choice([0, 0, 1, 2, 3])
                ch.verdicts["llm"] = Verdict(1 if grade >= 1 else 0, grade=grade, reason="judged",
                                             meta={"mode": "reference"})
        current = tmp / f"{system}.llm.records.jsonl"
        write_records(records, current)
        for source in ("containment", "span", "fuzzy", "ids", "human"):
            nxt = tmp / f"{system}.{source}.records.jsonl"
            args = ["eval-rag", str(current), "--relevance", source, "--records", str(nxt), "--format", "json"]
            if source == "human":
                args += ["--labels", str(labels)]
            res = runner.invoke(main, args)
            assert res.exit_code == 0, res.output
            current = nxt
        out[system] = {"testset": testset, "labels": labels, "records": current}
    out["tmp"] = tmp
    return out


def _cli_json(args: list[str]) -> dict:
    res = CliRunner().invoke(main, args)
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


def _api(world, source: str, system: str = "A"):
    return rankwise.evaluate_rag(world[system]["records"], source, metrics=METRICS)


@pytest.mark.parametrize("source", SOURCES)
def test_same_number_in_every_command(world, source):
    api = _api(world, source)
    cases = list(api.per_query.query_ids)
    assert len(cases) == 14
    expected = {c: api.per_query[c] for c in cases}
    mean = api.mean

    # the API on the raw test set (judged now) agrees with the stored records
    if source not in ("llm",):
        raw = rankwise.evaluate_rag(world["A"]["testset"], source, metrics=METRICS,
                                    labels=world["A"]["labels"] if source == "human" else None)
        assert raw.mean == mean
        assert {c: raw.per_query[c] for c in cases} == expected

    # eval-rag
    data = _cli_json(["eval-rag", str(world["A"]["records"]), "--relevance", source, "-m", ",".join(METRICS),
                      "--format", "json", "--per-query"])
    assert data["mean"] == mean
    assert data["per_query"] == expected

    # probe
    data = _cli_json(["probe", "--records", str(world["A"]["records"]), "--sources", source, "-m",
                      ",".join(METRICS), "--format", "json", "--per-query"])
    assert {n: data["mean"][n][source] for n in METRICS} == mean
    assert {c["id"]: {n: c["metrics"][n][source] for n in METRICS} for c in data["cases"]} == expected

    # agree (its verdict effect reports each source's score)
    other = "human" if source == "llm" else "llm"
    data = _cli_json(["agree", str(world["A"]["records"]), "--a", source, "--b", other, "-m", ",".join(METRICS),
                      "--format", "json"])
    assert {n: data["verdict_effect"][n][source] for n in METRICS} == mean

    # compare-rag: table values and the k-sweep at K = 5
    args = ["compare-rag", str(world["A"]["records"]), str(world["B"]["records"]), "--name", "A", "--name", "B",
            "--source", source, "-m", ",".join(METRICS), "--format", "json", "--per-query"]
    for m in METRICS:
        args += ["--sweep", m.split("@")[0]]
    data = _cli_json([*args, "--max-k", "5"])
    assert data["means"]["A"] == mean
    assert data["per_query"]["A"] == expected
    for sweep in data["sweeps"]:
        assert sweep["values"]["A"][4] == mean[f"{sweep['metric']}@5"]
        assert sweep["values"]["B"][4] == data["means"]["B"][f"{sweep['metric']}@5"]

    # gate: same means, same p-value as compare-rag
    gate = _cli_json(["gate", "--baseline", str(world["A"]["records"]), "--candidate", str(world["B"]["records"]),
                      "--relevance", source, "-m", ",".join(METRICS), "--max-drop", "1", "--format", "json"])
    by_metric = {c["metric"]: c for c in gate["checks"]}
    for n in METRICS:
        assert by_metric[n]["baseline_mean"] == mean[n]
        assert by_metric[n]["candidate_mean"] == data["means"]["B"][n]
        cmp = next(c for c in data["comparisons"] if c["metric"] == n)
        assert by_metric[n]["p_value"] == cmp["p_value"]

    # the HTML report: per-case table and the rank-vs-verdict means, as printed (4 decimals)
    report = world["tmp"] / f"report-{source}.html"
    res = CliRunner().invoke(main, ["compare-rag", str(world["A"]["records"]), str(world["B"]["records"]),
                                    "--name", "A", "--name", "B", "--source", source, "-m", ",".join(METRICS),
                                    "--format", "json", "--html", str(report), "--probe-sources", source])
    assert res.exit_code == 0, res.output
    text = report.read_text(encoding="utf-8")
    shown = _html_case_values(text)
    for c in cases:
        for n in METRICS:
            assert shown[c][n][0] == f"{expected[c][n]:.4f}", (c, n)
    probe_means = _html_probe_means(text, "A")
    for n in METRICS:
        assert probe_means[n] == f"{mean[n]:.4f}"


def _html_case_values(text: str) -> dict[str, dict[str, list[str]]]:
    out: dict[str, dict[str, list[str]]] = {}
    for block in re.finditer(r'<details class="query" data-qid="([^"]*)"(.*?)</details>', text, re.S):
        qid = html.unescape(block.group(1))
        table = re.search(r'<table class="grid"><thead>.*?</thead><tbody>(.*?)</tbody>', block.group(2), re.S)
        assert table, qid
        rows = {}
        for row in re.finditer(r"<tr><td>([^<]*)</td>(.*?)</tr>", table.group(1), re.S):
            rows[html.unescape(row.group(1))] = re.findall(r"<td>([^<]*)</td>", row.group(2))
        out[qid] = rows
    return out


def _html_probe_means(text: str, system: str) -> dict[str, str]:
    table = re.search(rf'<table class="grid probe" data-system="{system}">.*?<tbody>(.*?)</tbody>', text, re.S)
    assert table, "no probe table"
    out = {}
    for row in re.finditer(r"<tr><td>([^<]*)</td><td>([^<]*)</td>", table.group(1)):
        out[html.unescape(row.group(1))] = row.group(2)
    return out


def test_r_basis_is_shown_and_documented(world):
    basis = {s: _api(world, s).summary["r_basis"] for s in SOURCES}
    assert basis == {"containment": "reference passages", "span": "reference passages",
                     "fuzzy": "reference passages", "ids": "reference ids", "human": "pooled verdicts",
                     "llm": "pooled verdicts"}
    doc = (Path(__file__).resolve().parents[2] / "docs" / "context-metrics.md").read_text(encoding="utf-8")
    assert "What R is" in doc


def test_compare_and_gate_print_the_same_p_on_runs(tmp_path):
    rng = random.Random(1)
    qrels = {f"q{i:02d}": {f"d{j}": rng.choice([0, 1, 2]) for j in range(8)} for i in range(40)}
    base = {q: {f"d{j}": rng.random() for j in range(8)} for q in qrels}
    cand = {q: {f"d{j}": rng.random() for j in range(8)} for q in qrels}
    paths = []
    for name, run in (("base", base), ("cand", cand)):
        p = tmp_path / f"{name}.trec"
        p.write_text("".join(f"{q} Q0 {d} 0 {s!r} {name}\n" for q, docs in run.items() for d, s in docs.items()))
        paths.append(p)
    qp = tmp_path / "qrels.txt"
    qp.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    cmp = _cli_json(["compare", str(qp), *map(str, paths), "-m", "ndcg@5,map", "--format", "json"])
    gate = _cli_json(["gate", "--baseline", str(paths[0]), "--candidate", str(paths[1]), "--qrels", str(qp),
                      "-m", "ndcg@5,map", "--max-drop", "1", "--format", "json"])
    for check in gate["checks"]:
        c = next(x for x in cmp["comparisons"] if x["metric"] == check["metric"])
        assert check["p_value"] == c["p_value"]
        assert check["candidate_mean"] == cmp["means"]["cand"][check["metric"]]
