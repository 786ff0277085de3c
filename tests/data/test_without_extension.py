"""An install without a C compiler (no ``rankwise.data._walk``) evaluates to the very numbers an
install with it gives: whole ``evaluate`` and ``evaluate_stream`` calls, in processes of their own,
on files in every order the C paths take (shuffled rows, blocks out of query order with ties, a run
big enough for the threaded C pass and the threaded C encoding of the query ids) and on dicts."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pytest

_CHILD = r"""
import json, sys
if sys.argv[1] == "without":
    sys.modules["rankwise.data._walk"] = None  # what an install without a C compiler has
from rankwise import evaluate
from rankwise.data.compiled import walk
from rankwise.metrics.stream import evaluate_stream
folder, metrics = sys.argv[2], ["map", "ndcg@10", "P@5", "recall@100", "mrr", "bpref", "num_rel_ret"]
out = {"compiled": walk is not None}
for name in ("ranked.trec", "shuffled.trec", "big.trec"):
    for how, call in (("memory", evaluate), ("stream", evaluate_stream)):
        r = call(f"{folder}/qrels.txt", f"{folder}/{name}", metrics)
        out[f"{name} {how}"] = [r.mean, r.per_query.query_ids, r.per_query.values.tolist()]
run, qrels = json.load(open(f"{folder}/dicts.json"))
r = evaluate(qrels, run, metrics)
out["dicts"] = [r.mean, r.per_query.query_ids, r.per_query.values.tolist()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Runs with numeric query ids (blocks out of byte order), tied scores, a shuffled copy and a
    run past the sizes from which the C pass and the query grouping take two threads."""
    d = tmp_path_factory.mktemp("no_ext")
    rng = np.random.default_rng(4)
    n_q, depth = 120, 60
    rows = [(f"{q}", f"d{int(doc)}", float(s)) for q in range(n_q)
            for doc, s in zip(rng.choice(5000, depth, replace=False), -np.sort(-rng.choice(8, depth) / 2), strict=True)]
    text = "".join(f"{q} Q0 {doc} {i} {s} tag\n" for i, (q, doc, s) in enumerate(rows))
    (d / "ranked.trec").write_text(text)
    lines = text.splitlines(keepends=True)
    (d / "shuffled.trec").write_text("".join(lines[i] for i in rng.permutation(len(lines))))
    judged = {(q, doc) for q, doc, _ in rows if rng.random() < 0.1} | {(f"{q}", f"d{q}x") for q in range(n_q)}
    (d / "qrels.txt").write_text("".join(f"{q} 0 {doc} {int(rng.integers(0, 4))}\n" for q, doc in sorted(judged)))
    n = 1_200_000  # past 2**20 rows: two threads group the query ids and rank
    q = pc.binary_join_element_wise("", pa.array(rng.integers(0, n_q, n)).cast(pa.string()), "")
    docs = pc.binary_join_element_wise("d", pa.array(rng.permutation(n)).cast(pa.string()), "")
    table = pa.table({"q": q, "z": pa.array(np.full(n, "Q0")), "d": docs, "r": pa.array(np.zeros(n, np.int64)),
                      "s": pa.array(rng.choice(16, n) / 4), "t": pa.array(np.full(n, "t"))})
    pcsv.write_csv(table, d / "big.trec", pcsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"))
    run: dict = {}
    for qid, doc, s in rows:
        run.setdefault(qid, {})[doc] = s
    qrels: dict = {}
    for qid, doc in judged:
        qrels.setdefault(qid, {})[doc] = 1
    (d / "dicts.json").write_text(json.dumps([run, qrels]))
    return d


def _child(mode: str, folder) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode, str(folder)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_without_the_extension_every_number_is_the_same(folder):
    built, without = _child("with", folder), _child("without", folder)
    assert built.pop("compiled") is True and without.pop("compiled") is False
    assert set(built) == set(without)
    for key in built:
        assert built[key] == without[key], key  # means, query order and every per-query value, exactly
    means = built["shuffled.trec memory"][0]
    assert built["ranked.trec memory"] == built["shuffled.trec memory"] and 0 < means["map"] < 1
    assert built["big.trec memory"][0]["num_rel_ret"] > 0
