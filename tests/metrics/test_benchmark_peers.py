"""benchmarks/metrics_vs_peers.py, the benchmark docs/performance.md quotes: a small run end to end
(rankwise in memory and --stream, pytrec_eval and the floor, each a process of its own, their means
checked against pytrec_eval's) and its ratios from hand-made rows."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "metrics_vs_peers.py"


@pytest.fixture
def bench(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("metrics_vs_peers", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DATA", tmp_path)
    monkeypatch.setitem(module.SIZES, "300x40", (300, 40))
    monkeypatch.setattr(module, "PROBE_BYTES", 1 << 22)
    return module


def _row(tool, mode="file", time=1.0, rss=100.0, **extra):
    return {"size": "10kx1000", "mode": mode, "tool": tool, "time": time, "rss": rss, "means": {}, **extra}


def test_ratios_put_the_floor_and_stream_beside_rankwise(bench):
    rows = [_row("rankwise", time=2.0, rss=100.0, floor=1.6, floor_rss=80.0), _row("rankwise-stream", time=2.5),
            _row("pytrec_eval", time=7.0, rss=200.0), _row("rankwise", mode="dict", time=1.0),
            _row("pytrec_eval", mode="dict", time=2.5, rss=50.0)]
    table = bench.table(rows)
    assert "| 10k × 1000 | TREC file, ranked, whole process | floor: `pyarrow.csv.read_csv` alone | 1.60 | 0.80 | 80 |" in table
    assert "| 10k × 1000 | TREC file, ranked, whole process | rankwise --stream | 2.50 | 1.25 | 100 |" in table
    assert "| 10k × 1000 | TREC file, ranked, whole process | pytrec_eval | 7.00 | 3.50 | 200 |" in table
    targets = bench.targets(rows)
    assert "| 10k × 1000 | TREC file, ranked, whole process | 3.50 | 1.25 | 1.25 | 0.50 |" in targets
    assert "| 10k × 1000 | Python dicts, ranked | 2.50 |  |  | 2.00 |" in targets


def test_a_small_run_end_to_end(bench, capsys):
    code = bench.main(["--sizes", "300x40", "--tools", "rankwise,rankwise-stream,pytrec_eval",
                       "--modes", "dict,file-shuffled"])
    out = capsys.readouterr().out
    assert code == 0
    for tool in ("rankwise", "rankwise --stream", "pytrec_eval", "floor: `pyarrow.csv.read_csv` alone"):
        assert f"| 300 × 40 | TREC file, shuffled, whole process | {tool} |" in out
    assert "| 300 × 40 | Python dicts, ranked | rankwise --stream" not in out  # --stream reads files
    ratios = re.search(r"\| 300 × 40 \| TREC file, shuffled, whole process \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|",
                       out)
    assert ratios and all(float(x) > 0 for x in ratios.groups())
    assert "within 1e-9 (rankwise, rankwise --stream, ir_measures)" in out  # else check_agreement raised
    assert re.search(r"touched 0.00390625 GiB of fresh memory in [\d.]+ s at the start", out)
    assert "the best of 3 interleaved runs of the floor and rankwise (in memory, --stream) per input, of 1 run(s)" in out
