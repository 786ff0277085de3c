"""``rankwise position-curve`` end to end against the simulated generator
(tests/generator_server.py): a planted RBP(p = 0.7), power(a = 1.5), cliff(n = 3) and U-shape are
recovered (family and parameters), a hump (best in the middle) fits no family and writes no curve;
--dry-run counts the calls and makes none; a run stopped by Ctrl-C or SIGKILL resumes from the cache
without asking the same context twice.

Tolerance: the server draws each question's "difficulty" from its own stratum of [0, 1) (see the
server's docstring), so accuracy by position is the planted curve to within 1/cases; with 150 cases
the RBP fit must name ``rbp`` with p within 0.03 of 0.7, and the U-shape must be named ``u_shape``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from _extras import need
from _inprocess import run_cli
from generator_server import key_of, running_generator, synthetic_cases, write_cases
from rankwise.analysis.position import chi2_sf, discount_weights, fit_position_curve, write_position_curve
from rankwise.cli import main

N_CASES = 150
K = 8


@pytest.fixture(scope="module")
def generator():
    with running_generator() as gen:
        yield gen


@pytest.fixture(scope="module")
def cases():
    return synthetic_cases(N_CASES, k=K, golds=(0, 1, 1, 2))


def _curve(gen, tmp_path, cases, curve, *extra):
    gen.reset()
    gen.configure(key=key_of(cases), curve=curve, mode="sample", draw="stratified", alpha=0.1, beta=0.8, seed=3)
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    out = tmp_path / "curve.json"
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", gen.base_url,
                                  "-k", str(K), "--score", "em", "--cache", str(tmp_path / "c.sqlite"),
                                  "--out", str(out), "--quiet", *extra])
    assert r.exit_code == 0, r.output
    return json.loads(out.read_text()), r


def test_recovers_planted_rbp(generator, cases, tmp_path):
    doc, r = _curve(generator, tmp_path, cases, {"kind": "rbp", "p": 0.7}, "--plot", str(tmp_path / "p.png"))
    best = doc["fits"][0]
    assert best["discount"] == "rbp", doc["best"]
    assert abs(best["params"]["p"] - 0.7) <= 0.03
    assert abs(best["alpha"] - 0.1) <= 0.03 and abs(best["beta"] - 0.8) <= 0.05
    assert doc["counts"] == [N_CASES] * K  # every case planted at every position, every answer scored
    planted = [0.1 + 0.8 * 0.7 ** i for i in range(K)]
    assert max(abs(a - p) for a, p in zip(doc["accuracy"], planted, strict=True)) <= 1.5 / N_CASES + 1e-9
    assert generator.stats()["by_kind"] == {"answer": N_CASES * K}
    assert re.search(r"best fit: rbp\(p=0\.(69|70)", r.output) and "goodness of fit: deviance" in r.output, r.output
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the curve file drives wcp(decay=curve): weights are the fitted accuracy per position, all in
    # [0, 1]
    assert doc["weights"][0] == pytest.approx(best["alpha"] + best["beta"])
    assert all(0.0 <= w <= 1.0 for w in doc["weights"])
    # the AIC shown is the family's own maximum: 2 x parameters - 2 x log-likelihood, rbp has 3
    assert best["n_params"] == 3 and best["aic"] == pytest.approx(6 - 2 * best["loglik"])
    assert doc["fitted"] is True and doc["goodness_of_fit"]["p_value"] >= 0.01


def test_recovers_planted_u_shape(generator, cases, tmp_path):
    doc, _ = _curve(generator, tmp_path, cases, {"kind": "u_shape", "p": 0.5, "q": 0.5, "b": 1.0})
    assert doc["fits"][0]["discount"] == "u_shape", doc["best"]
    params = doc["fits"][0]["params"]
    assert abs(params["p"] - 0.5) <= 0.1 and abs(params["q"] - 0.5) <= 0.1 and 0.5 <= params["b"] <= 2.0
    monotone = [f["aic"] for f in doc["fits"] if f["discount"] in ("log", "linear", "rbp", "power", "flat", "cliff")]
    assert doc["fits"][0]["aic"] < min(monotone) - 10
    acc = doc["accuracy"]
    assert acc[0] > acc[K // 2] and acc[-1] > acc[K // 2]  # lost in the middle


@pytest.mark.parametrize(("curve", "family", "param", "value", "tol"),
                         [({"kind": "power", "a": 1.5}, "power", "a", 1.5, 0.15),
                          ({"kind": "cliff", "n": 3}, "cliff", "n", 3, 0)])
def test_recovers_planted_power_and_cliff(generator, cases, tmp_path, curve, family, param, value, tol):
    doc, r = _curve(generator, tmp_path, cases, curve)
    best = doc["fits"][0]
    assert best["discount"] == family, doc["best"]
    assert abs(best["params"][param] - value) <= tol
    assert abs(best["alpha"] - 0.1) <= 0.03 and abs(best["beta"] - 0.8) <= 0.05
    assert doc["fitted"] is True


def test_no_family_fits_a_hump_and_no_curve_is_written(generator, cases, tmp_path):
    hump = [0.0, 0.3, 0.6, 1.0, 1.0, 0.6, 0.3, 0.0]  # best in the middle: no family has that shape
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "table", "w": hump}, mode="sample", draw="stratified",
                        alpha=0.1, beta=0.8, seed=3)
    ts = write_cases(cases, tmp_path / "ts.jsonl")
    out = tmp_path / "curve.json"
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url,
                                  "-k", str(K), "--score", "em", "--cache", str(tmp_path / "c.sqlite"),
                                  "--out", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    assert not out.exists()
    assert "no family fits the accuracy by position" in r.output
    assert f"no curve written to {out}" in r.output
    assert "curve: " not in r.output


def test_dry_run_counts_calls_and_calls_nothing(generator, cases, tmp_path):
    generator.reset()
    generator.configure(key=key_of(cases))
    ts = write_cases(cases[:20], tmp_path / "ts.jsonl")
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url,
                                  "-k", "6", "--repeats", "2", "--dry-run", "--cache", str(tmp_path / "c.sqlite"),
                                  "--price-in", "1", "--price-out", "2"])
    assert r.exit_code == 0, r.output
    assert "20 cases x 6 positions x 2 repeats = 240 contexts" in r.output
    assert "0 in the cache, 240 calls to make" in r.output and "estimated cost $" in r.output
    assert generator.stats()["requests"] == 0


def test_cases_without_reference_or_support_are_skipped_and_counted(generator, cases, tmp_path):
    rows = [dict(c) for c in cases[:12]]
    rows[0] = {k: v for k, v in rows[0].items() if k != "reference"}
    rows[1] = dict(rows[1], reference_contexts=[], retrieved_contexts=["only filler here"] * 3)
    ts = write_cases(rows, tmp_path / "ts.jsonl")
    r = CliRunner().invoke(main, ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url,
                                  "-k", "4", "--dry-run", "--cache", str(tmp_path / "c.sqlite")])
    assert r.exit_code == 0, r.output
    assert "10 cases x 4 positions x 1 repeat = 40 contexts (1 no reference answer, 1 no supporting chunk" in r.output


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from rankwise.cli import main; main()", *args]


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    return dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_stopped_run_resumes_without_repeating_a_call(generator, cases, tmp_path, sig):
    generator.reset()
    generator.configure(key=key_of(cases), curve={"kind": "rbp", "p": 0.7}, latency=0.05)
    rows = cases[:40]
    ts = write_cases(rows, tmp_path / "ts.jsonl")
    args = ["position-curve", str(ts), "--model", "sim", "--base-url", generator.base_url, "-k", "5",
            "--concurrency", "8", "--cache", str(tmp_path / "c.sqlite"), "--quiet", "--score", "em",
            "--format", "json"]
    try:
        proc = subprocess.Popen(_cli(*args), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while generator.stats()["requests"] < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        if sig == signal.SIGINT:
            assert proc.returncode == 130, err
            assert "rerun the same command to resume" in err
        first = generator.stats()["requests"]
        assert 60 <= first < 200
        # the rerun resumes from the cache file: the process boundary is not what it tests, so it
        # runs in-process, and without the latency that only slowed the first run enough to stop it
        # mid-way
        generator.configure(latency=0.0)
        done = run_cli(args)
        assert done.returncode == 0, done.stderr
        stats = generator.stats()
        doc = json.loads(done.stdout)
        assert doc["counts"] == [40] * 5
        # every reply had before Ctrl-C was kept: only the calls in flight then (8 at most) are
        # asked again; SIGKILL also loses the replies the cache writer had not committed yet (a few
        # milliseconds' worth)
        bound = 8 if sig == signal.SIGINT else 16
        assert stats["repeated_prompts"] <= bound and stats["requests"] == 200 + stats["repeated_prompts"]
        assert doc["calls"]["cached"] == first - stats["repeated_prompts"]
    finally:
        generator.configure(latency=0.0)


# the fit itself, on answers drawn with binomial noise (seeded): 2,000 answers per position, 10
# positions

def _planted(family: str, params: dict, k: int = 10, floor: float = 0.1, drop: float = 0.8) -> np.ndarray:
    w = discount_weights(family, k, **params)
    return floor + drop * w / w.max()


def _answers(curve: np.ndarray, per_position: int, seed: int) -> tuple[list[float], list[int]]:
    correct = np.random.default_rng(seed).binomial(per_position, curve)
    return (correct / per_position).tolist(), [per_position] * len(curve)


@pytest.mark.parametrize(("family", "params", "tol"), [
    ("rbp", {"p": 0.7}, {"p": 0.03}), ("power", {"a": 1.5}, {"a": 0.2}), ("cliff", {"n": 4}, {"n": 0}),
    ("u_shape", {"p": 0.5, "q": 0.5, "b": 1.0}, {"p": 0.1, "q": 0.1, "b": 0.5})])
@pytest.mark.parametrize("seed", [1, 2])
def test_maximum_likelihood_recovers_family_and_parameters(family, params, tol, seed):
    fit = fit_position_curve(*_answers(_planted(family, params), 2000, seed))
    assert fit.best.name == family, fit.sentence()
    for name, value in params.items():
        assert abs(fit.best.params[name] - value) <= tol[name], fit.best.label()
    assert fit.fitted and fit.gof.p_value >= 0.01
    assert all(0.0 <= w <= 1.0 for w in fit.weights())


def test_a_planted_step_is_a_cliff_and_every_aic_is_the_family_maximum():
    acc, counts = _answers(np.array([0.85] * 3 + [0.35] * 7), 100, seed=5)  # the issue's planted step
    fit = fit_position_curve(acc, counts)
    assert fit.best.name == "cliff" and fit.best.params == {"n": 3}
    assert fit.best.predict(10)[0] <= 1.0 and fit.weights()[0] == pytest.approx(np.mean(acc[:3]), abs=1e-6)
    by = {f.name: f for f in fit.fits}
    # power(a=1) is linear, power's maximum is at least linear's; rbp's maximum beats every p on a
    # fine grid
    assert by["power"].loglik >= by["linear"].loglik - 1e-6
    y, n = np.array(acc) * 100, np.array(counts, dtype=float)
    for p in np.arange(0.02, 0.99, 0.02):
        for floor in np.arange(0.0, 1.0, 0.05):
            for top in np.arange(floor, 1.0, 0.05):
                pred = np.clip(floor + (top - floor) * discount_weights("rbp", 10, p=p), 1e-12, 1 - 1e-12)
                ll = float((y * np.log(pred) + (n - y) * np.log1p(-pred)).sum())
                assert ll <= by["rbp"].loglik + 1e-6
    for f in fit.fits:
        assert f.aic == pytest.approx(2 * f.n_params - 2 * f.loglik)
        assert (f.predict(10) >= 0).all() and (f.predict(10) <= 1).all()


def test_no_family_fits_a_hump():
    fit = fit_position_curve(*_answers(np.array([0.2, 0.4, 0.6, 0.8, 0.8, 0.6, 0.4, 0.2]), 300, seed=1))
    assert not fit.fitted and fit.weights() is None
    assert fit.sentence().startswith("no family fits the accuracy by position")
    assert fit.sentence().endswith("no curve written")
    with pytest.raises(ValueError, match="no family fits"):
        write_position_curve(fit, "never-written.json")


def test_chi2_tail_matches_scipy():
    stats = need("scipy.stats")
    for df in range(1, 12):
        for x in (0.1, 1.0, 3.0, 7.5, 20.0, 60.0):
            assert chi2_sf(x, df) == pytest.approx(stats.chi2.sf(x, df), rel=1e-9, abs=1e-300)


def test_min_evidence_chars_names_the_supporting_chunk(generator, tmp_path):
    """position-curve takes --min-evidence-chars like eval-rag: records whose stored containment
    verdict calls the only supporting chunk a fragment (the default rule, 20 letters/digits) plant
    the reference passage; ``--min-evidence-chars 0`` re-judges them and plants the retrieved chunk
    (before: no such option)."""
    from rankwise.data.records import write_records
    from rankwise.metrics.rag import evaluate_rag

    rows = [{"id": f"q{i}", "question": f"Where is item {i}?", "reference": f"Item {i} is in Oslo.",
             "reference_contexts": [f"Item {i} is stored in the archive in Oslo."],
             "retrieved_contexts": ["in Oslo", f"Filler text {i} about nothing in particular."]} for i in range(3)]
    with pytest.warns(Warning):
        records = evaluate_rag(rows, "containment", k=2).records
    assert [r.verdicts("containment") for r in records] == [[0, 0]] * 3  # "in Oslo": a fragment under 20
    path = write_records(records, tmp_path / "records.jsonl")

    def plan(*extra):
        r = CliRunner().invoke(main, ["position-curve", str(path), "--model", "sim", "--base-url",
                                      generator.base_url, "-k", "2", "--dry-run", "--cache",
                                      str(tmp_path / "c.sqlite"), *extra])
        assert r.exit_code == 0, r.output
        return r.output

    assert "supporting chunk from reference passage: 3" in plan()
    assert "supporting chunk from verdicts: 3" in plan("--min-evidence-chars", "0")
