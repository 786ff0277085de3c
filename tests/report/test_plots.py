"""PNG plots (matplotlib, Agg) of k-sweeps and per-query deltas, and lazy imports of heavy
libraries."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from _synthetic_runs import qrels_dict, system_run, write_trec
from rankwise.analysis.compare import compare
from rankwise.analysis.ksweep import ksweep
from rankwise.cli import main
from rankwise.errors import InputError
from rankwise.report.plots import plot_report
from rankwise.report.svg import GAIN, LOSS


@pytest.fixture(scope="module")
def cranfield(shared_data):
    qrels_path = shared_data / "cranfield" / "qrels" / "test.tsv"
    qrels = qrels_dict(qrels_path)
    return qrels_path, [system_run(qrels, strength=0.6, seed=1), system_run(qrels, strength=0.9, seed=2)]


def _pixels_near(image: np.ndarray, hex_color: str, tol: float = 0.06) -> int:
    rgb = np.array([int(hex_color[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(image[:, :, :3] - rgb).max(axis=2) < tol).sum())


def test_plot_has_sweep_and_delta_panels(cranfield, tmp_path):
    from matplotlib.image import imread

    qrels_path, runs = cranfield
    result = compare(qrels_path, runs, ["ndcg@10"], names=["a", "b"], permutations=500)
    sweep = ksweep(qrels_path, runs, "ndcg", max_k=10, names=["a", "b"])
    path = plot_report(tmp_path / "plot.png", comparison=result, sweeps=[sweep], dpi=100)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(path)
    assert image.shape[:2] == (680, 800)  # two panels of 8 x 3.4 inches at 100 dpi
    d = result.deltas("b", "ndcg@10")
    # bars in the gain and loss colours, roughly in proportion to the queries that gained and lost
    gains, losses = _pixels_near(image, GAIN), _pixels_near(image, LOSS)
    assert gains > 1000 and losses > 100
    assert (gains > losses) == ((d > 0).sum() > (d < 0).sum())


def test_sweep_only_and_nothing_to_plot(cranfield, tmp_path):
    from matplotlib.image import imread

    qrels_path, runs = cranfield
    sweep = ksweep(qrels_path, runs, "recall", max_k=5)
    path = plot_report(tmp_path / "s.png", sweeps=[sweep], dpi=50)
    assert imread(path).shape[:2] == (170, 400)
    with pytest.raises(InputError, match="nothing to plot"):
        plot_report(tmp_path / "n.png")
    with pytest.raises(InputError, match="cannot write"):
        plot_report(tmp_path / "no" / "such" / "dir" / "p.png", sweeps=[sweep])


def test_cli_plot(cranfield, tmp_path):
    qrels_path, runs = cranfield
    paths = [write_trec(r, tmp_path / f"r{i}.trec") for i, r in enumerate(runs)]
    out = CliRunner().invoke(main, ["compare", str(qrels_path), *map(str, paths), "-m", "map",
                                    "--permutations", "200", "--plot", str(tmp_path / "p.png")])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "p.png").stat().st_size > 10_000
    assert f"wrote {tmp_path / 'p.png'}" in out.output


def test_heavy_libraries_load_lazily():
    code = ("import sys, rankwise.analysis.compare, rankwise.analysis.gate, rankwise.analysis.ksweep, "
            "rankwise.report.html, rankwise.report.plots, rankwise.report.compare_console, "
            "rankwise.report.markdown; "
            "print(sorted(m for m in ('scipy', 'matplotlib', 'pandas', 'polars') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
