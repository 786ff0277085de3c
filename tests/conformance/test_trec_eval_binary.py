"""rankwise against a real trec_eval 10.0, built here from
``../shared/external/trec_eval-src.tar.gz``.

Two binaries are built once into ``~/.cache/rankwise`` (keyed by the tarball's hash): the stock one,
whose ``-q`` output must equal ``rankwise eval --format trec``'s line for line (as sets: (name,
query) -> text), and one whose printf format is ``%.17g`` instead of ``%6.4f``, whose values must
equal rankwise's doubles exactly. The data is random but seeded: graded and negative grades, queries
with no relevant or only non-relevant judgements, heavy score ties, scores written in many
notations, unjudged documents, queries only in the qrels or only in the run, depths 1..1500. Every
mode: with ``-c`` (rankwise's default ``missing="zero"``) and without (``missing="skip"``), at ``-l
1``, ``2`` and ``3``.

trec_eval 10.0 (f4253652) exits 4 without ``-c`` when a qrels query has no ranking ("result qid ...
not found in qrels"), so the runs without ``-c`` get qrels without the qrels-only queries; rankwise
reads the full qrels with ``missing="skip"``, which must give the same numbers.

Skipped only where no C compiler or ``make`` exists (scripts/setup.sh --test installs them).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

from conftest import TREC_EVAL_SRC, need_trec_eval_source
from rankwise import evaluate
from rankwise.report.text import to_trec

TARBALL = TREC_EVAL_SRC

# trec_eval's measure sets by their nicknames: rankwise accepts the same ones (metrics/trec.py
# NICKNAMES)
ALL_TREC = ["all_trec"]
# more invocations: measures outside all_trec and non-default parameters. dcg and ideal_dcg get
# their own: they share ndcg's parameter block, and trec_eval frees it once per measure (a crash)
# when ndcg has a map
PLAIN_DCG = ["dcg", "ideal_dcg", "yaap", "num_q"]
EXTRA = [
    "ndcg.1=1,2=3,3=7", "iprec_at_recall.0.15,0.55",
    "Rprec_mult.0.3,1.5", "G.1=2,2=5", "rbp.p=0.8", "rbp_resid.p=0.5", "relstring.25", "utility.2,-1,-0.5,0.25",
    "11pt_avg.0.2,0.5,0.8", "relative_P.3,50", "unj.1,7", "ndcg_rel.1=3", "Rndcg.2=1,3=10", "num_q",
]


def _have_compiler() -> bool:
    return bool(shutil.which("make") and (shutil.which("cc") or shutil.which("gcc")))


def _build(variant: str) -> Path:
    """Build trec_eval (``std`` or ``g17``: printf %.17g) into the cache once; its path."""
    digest = hashlib.sha256(TARBALL.read_bytes()).hexdigest()[:12]
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rankwise"
    target = root / f"trec_eval-{digest}-{variant}"
    binary = target / "trec_eval"
    if binary.is_file():
        return binary
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="trec_eval-build-", dir=root))
    with tarfile.open(TARBALL) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
            tar.extractall(work, filter="data")
        else:
            tar.extractall(work)  # noqa: S202 - our own shared tarball
    src = next(p.parent for p in work.rglob("Makefile"))
    if variant == "g17":
        for name in ("meas_print_single.c", "meas_print_final.c"):
            path = src / name
            path.write_text(path.read_text().replace("%6.4f", "%.17g"))
    done = subprocess.run(["make", "-s", "trec_eval"], cwd=src, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not (src / "trec_eval").is_file():
        raise AssertionError(f"building trec_eval failed:\n{done.stdout}\n{done.stderr}")
    out = work / "bin"
    out.mkdir()
    shutil.move(str(src / "trec_eval"), out / "trec_eval")
    with contextlib.suppress(OSError):  # atomic: a concurrent build of the same variant wins or loses
        os.replace(out, target)
    shutil.rmtree(work, ignore_errors=True)
    return binary


@pytest.fixture(scope="module")
def binaries() -> dict[str, Path]:
    if not _have_compiler():
        pytest.skip("no C compiler/make: cannot build trec_eval (scripts/setup.sh --test installs gcc and make)")
    need_trec_eval_source()
    return {v: _build(v) for v in ("std", "g17")}


def _score_text(rng: random.Random, value: float) -> str:
    forms = [repr(value), f"{value:e}", f"{value:E}", f"{value:.17g}"]
    if float(value).is_integer():
        forms.append(str(int(value)))
    if value > 0:
        forms.append(f"+{value!r}")
    if 0 < abs(value) < 1:
        forms.append(repr(value).replace("0.", ".", 1))  # .5, -.25
    text = rng.choice(forms)
    return text


def _make_data(seed: int, tmp: Path) -> tuple[Path, Path, Path]:
    """Random qrels (with and without the qrels-only queries) and a run; their paths."""
    rng = random.Random(seed)
    qrels_lines, qrels_lines_noc, run_lines = [], [], []
    docs = [f"d{j}" for j in range(1, 2400)] + [f"DOC-{j:05d}" for j in range(300)]
    ties = [5.0, 0.5, 1e-3, -250.0, 3.25, 0.0, 7.0]
    for q in range(1, 91):
        qid = rng.choice([f"q{q}", f"{300 + q}", f"Q_{q:03d}"])
        kind = rng.choices(["normal", "norel", "nonrel_only", "run_only", "qrels_only", "negative"],
                           [10, 2, 2, 1, 2, 1])[0]
        pool = rng.sample(docs, rng.randint(30, 2200))
        judged: dict[str, int] = {}
        if kind != "run_only":
            n = rng.randint(1, min(len(pool), rng.choice([5, 20, 60, 300])))
            for d in pool[:n]:
                if kind == "normal":
                    judged[d] = rng.choices([-1, 0, 1, 2, 3, 4], [1, 6, 4, 2, 1, 1])[0]
                elif kind == "negative":
                    judged[d] = rng.choice([-2, -1, 0, 1])
                elif kind == "norel":
                    judged[d] = rng.choice([-1, 0])
                else:  # judged non-relevant only
                    judged[d] = 0
        if judged and max(judged.values()) < 0:
            # trec_eval reuses the previous query's grade-level counts for a query whose every
            # judgement is negative (form_res_rels.c sizes its level table by the query's top grade,
            # -1): not a mode to match
            judged[next(iter(judged))] = 0
        for d, g in judged.items():
            qrels_lines.append(f"{qid} 0 {d} {g}\n")
            if kind != "qrels_only":
                qrels_lines_noc.append(f"{qid} 0 {d} {g}\n")
        if kind == "qrels_only":
            continue
        depth = min(len(pool), rng.choice([1, 2, 3, 7, 10, 25, 60, 100, 400, 1000, 1500]))
        ranked = pool[:depth]
        rng.shuffle(ranked)
        tied = rng.random() < 0.5
        for d in ranked:
            value = rng.choice(ties) if tied else round(rng.uniform(-3, 3), rng.choice([1, 3, 6]))
            tag = f"rw{len(run_lines) % 3}"  # tags differ line to line: trec_eval's runid is the last line's
            run_lines.append(f"{qid} Q0 {d} {rng.randint(0, 9)} {_score_text(rng, value)} {tag}\n")
    rng.shuffle(run_lines)
    paths = tmp / "qrels", tmp / "qrels_noc", tmp / "run"
    for path, lines in zip(paths, (qrels_lines, qrels_lines_noc, run_lines), strict=True):
        path.write_text("".join(lines))
    return paths


def _trec(binary: Path, args: list[str], qrels: Path, run: Path) -> dict[tuple[str, str], str]:
    done = subprocess.run([str(binary), "-q", *args, str(qrels), str(run)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = {}
    for line in done.stdout.splitlines():
        name, qid, value = line.split("\t")
        out[(name.strip(), qid)] = value
    return out


def _ours(text: str) -> dict[tuple[str, str], str]:
    out = {}
    for line in text.splitlines():
        name, qid, value = line.split("\t")
        out[(name.strip(), qid)] = value
    return out


def _numbers(result) -> dict[tuple[str, str], float]:
    """rankwise's doubles under trec_eval's names, per query and ``all`` (as --format trec prints
    them)."""
    out: dict[tuple[str, str], float] = {}
    for key, text in _ours(to_trec(result, per_query=True)).items():
        if key[0] == "runid" or text.startswith("'"):
            continue
        out[key] = float(text)
    for m in result.measures:
        name = m.trec_name or m.name
        if m.name in result.texts:
            continue
        if m.metric.aggregate != "sum":
            out[(name, "all")] = result.mean[m.name]
            if m.metric.aggregate == "mean":
                for i, qid in enumerate(result.per_query):
                    out[(name, qid)] = float(result.per_query.values[i, result.names.index(m.name)])
    return out


def _compare(trec: dict, ours: dict, what: str, exact_text: bool) -> list[str]:
    problems = []
    if set(trec) != set(ours):
        problems.append(f"{what}: only trec_eval: {sorted(set(trec) - set(ours))[:8]}; "
                        f"only rankwise: {sorted(set(ours) - set(trec))[:8]}")
    for key in sorted(set(trec) & set(ours)):
        a, b = trec[key], ours[key]
        if exact_text:
            if a != b:
                problems.append(f"{what} {key}: trec_eval {a!r}, rankwise {b!r}")
        elif a.startswith("'"):
            continue
        elif float(a) != b and not (a == "nan" and b != b):
            problems.append(f"{what} {key}: trec_eval {a}, rankwise {b!r}")
    return problems


MODES = [(c, level) for c in (True, False) for level in (1, 2, 3)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    seed = int(os.environ.get("RANKWISE_TREC_SEED", "20261201"))  # other seeds: a longer hunt, by hand
    return _make_data(seed, tmp_path_factory.mktemp("trec_binary"))


@pytest.mark.parametrize("complete,level", MODES, ids=[f"{'c' if c else 'noc'}-l{lv}" for c, lv in MODES])
def test_every_shared_measure_equals_trec_eval(binaries, data, complete, level):
    qrels, qrels_noc, run = data
    problems: list[str] = []
    checked = 0
    for specs in (ALL_TREC, EXTRA, PLAIN_DCG):
        args = ["-l", str(level)] + (["-c"] if complete else [])
        for s in specs:
            args += ["-m", s]
        trec_qrels = qrels if complete else qrels_noc
        result = evaluate(qrels, run, specs, relevance_level=level, missing="zero" if complete else "skip")
        std = _trec(binaries["std"], args, trec_qrels, run)
        g17 = _trec(binaries["g17"], args, trec_qrels, run)
        ours_text = _ours(to_trec(result, per_query=True))
        problems += _compare(std, ours_text, "printed", exact_text=True)
        numbers = {k: v for k, v in g17.items() if k[0] != "runid" and not v.startswith("'")}
        problems += _compare(numbers, _numbers(result), "%.17g", exact_text=False)
        checked += len(g17)
    by_measure: dict[str, int] = {}
    for p in problems:
        key = p.split("'")[1] if "(" in p else p[:30]
        by_measure[key] = by_measure.get(key, 0) + 1
    assert not problems, (f"{len(problems)} differences (of {checked} values) {by_measure}:\n"
                          + "\n".join(problems[:40]))
    assert checked > 8_000, checked


def test_cli_format_trec_prints_what_trec_eval_prints(binaries, data):
    """``rankwise eval -q --format trec`` in its own process vs ``trec_eval -q -c -l 2 -m
    all_trec``: the same text, line for line and in the same order, runid (the run file's last tag)
    included."""
    qrels, _, run = data
    args = [sys.executable, "-m", "rankwise.cli", "eval", str(qrels), str(run), "-q", "--format", "trec", "-l", "2",
            "-m", "all_trec"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    ours = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([str(binaries["std"]), "-q", "-c", "-l", "2", "-m", "all_trec", str(qrels), str(run)],
                            capture_output=True, text=True, timeout=120)
    assert theirs.returncode == 0, theirs.stderr

    # in order: trec_eval prints its measure table's order, as do we
    a, b = theirs.stdout.splitlines(), ours.stdout.splitlines()
    assert len(a) > 5000
    assert a[-len([x for x in a if x.split("\t")[1] == "all"])] == f"{'runid':<22s}\tall\t{_last_tag(run)}"
    assert a == b, (f"{len(set(a) ^ set(b))} lines differ; only trec_eval: {sorted(set(a) - set(b))[:5]}; "
                    f"only rankwise: {sorted(set(b) - set(a))[:5]}")


@pytest.mark.parametrize("stream", [False, True])
def test_max_docs_prints_what_trec_eval_M_prints(binaries, data, stream):
    """``rankwise eval -M 7`` (in memory and streamed) vs ``trec_eval -M 7``: the top 7 of each
    ranking after sorting, num_ret counting them; the same text line for line."""
    qrels, _, run = data
    args = [sys.executable, "-m", "rankwise.cli", "eval", str(qrels), str(run), "-q", "--format", "trec", "-M", "7",
            "-m", "all_trec", *(["--stream", "--block-rows", "500"] if stream else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    ours = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert ours.returncode == 0, ours.stderr
    theirs = subprocess.run([str(binaries["std"]), "-q", "-c", "-M", "7", "-m", "all_trec", str(qrels), str(run)],
                            capture_output=True, text=True, timeout=120)
    assert theirs.returncode == 0, theirs.stderr
    a, b = theirs.stdout.splitlines(), ours.stdout.splitlines()
    assert len(a) > 5000 and f"{'num_ret':<22s}\tall\t" in "\n".join(a)
    assert a == b, (f"only trec_eval: {sorted(set(a) - set(b))[:5]}; only rankwise: {sorted(set(b) - set(a))[:5]}")


@pytest.mark.parametrize("nickname", ["official", "set"])
def test_other_measure_sets(binaries, data, nickname):
    qrels, _, run = data
    theirs = _trec(binaries["std"], ["-c", "-m", nickname], qrels, run)
    ours = _ours(to_trec(evaluate(qrels, run, [nickname]), per_query=True))
    assert len(theirs) > 500
    assert ours == theirs
    assert ours[("runid", "all")] == _last_tag(run)


def _last_tag(run: Path) -> str:
    """The tag column of the run file's last line, read here independently of rankwise."""
    return run.read_text().rstrip("\n").rsplit("\n", 1)[-1].split()[5]


@pytest.mark.parametrize("beta", ["0.5", "2", "1.0", "0.25", "3.75", ".5"])
@pytest.mark.parametrize("complete", [True, False], ids=["c", "noc"])
def test_set_F_beta_equals_trec_eval(binaries, data, shared_data, beta, complete):
    """``-m set_F.<beta>``: the same printed name (the parameter as written: set_F_0.5, set_F_2,
    set_F_1.0) and value per query and ``all``, and the same double (%.17g binary), on the random
    data and on the NIST conformance data."""
    qrels, qrels_noc, run = data
    folder = shared_data / "trec_eval"
    checked = 0
    for q, q_trec, r in ((qrels, qrels if complete else qrels_noc, run),
                         (folder / "qrels.test", folder / "qrels.test", folder / "results.test")):
        args = (["-c"] if complete else []) + ["-m", f"set_F.{beta}"]
        result = evaluate(q, r, [f"set_F.{beta}"], missing="zero" if complete else "skip")
        std = _trec(binaries["std"], args, q_trec, r)
        g17 = _trec(binaries["g17"], args, q_trec, r)
        assert {k[0] for k in std} == {f"set_F_{beta}"}
        assert _ours(to_trec(result, per_query=True)) == std
        assert not _compare(g17, _numbers(result), "%.17g", exact_text=False)
        checked += len(std)
    assert checked > 60


def test_set_F_beta_changes_the_value(data):
    """Not the same number under another name: beta weighs recall (R > P on most queries here)."""
    qrels, _, run = data
    result = evaluate(qrels, run, ["set_F", "set_F.0.5", "set_F.2"])
    a, b, c = (result.mean[n] for n in ("set_F", "set_F(beta=0.5)", "set_F(beta=2.0)"))
    assert len({a, b, c}) == 3


@pytest.mark.parametrize("measures", [["runid"], ["runid", "P.5"], ["P.5"], ["set"], ["official"], []],
                         ids=["runid", "runid+P5", "P5", "set", "official", "default"])
def test_runid_printed_when_trec_eval_prints_it(binaries, data, measures):
    """The runid line: the run file's last tag, printed exactly when trec_eval prints it (asked by
    -m runid or a set holding it; with no -m, trec_eval's default set holds it)."""
    qrels, _, run = data
    args = [a for m in measures for a in ("-m", m)]
    theirs = _trec(binaries["std"], ["-c", *args], qrels, run)
    ours = _ours(to_trec(evaluate(qrels, run, measures or None), per_query=True))
    assert ours.get(("runid", "all")) == theirs.get(("runid", "all"))
    assert (("runid", "all") in theirs) == (measures != ["P.5"])
    if measures:  # rankwise's default metrics are not trec_eval's official set
        assert ours == theirs


def test_runid_from_the_stream_engine(binaries, data, tmp_path):
    """``--stream`` reads the tag from the file's end: the same runid line as trec_eval's."""
    from rankwise.metrics.stream import evaluate_stream

    qrels, _, run = data
    padded = tmp_path / "run.trec"
    padded.write_text(run.read_text() + "# a comment after the last line\n\n")
    theirs = _trec(binaries["std"], ["-c", "-m", "runid", "-m", "map"], qrels, padded)
    ours = _ours(to_trec(evaluate_stream(qrels, padded, ["runid", "map"], block_rows=500), per_query=True))
    assert ours == theirs


@pytest.mark.parametrize("complete", [True, False], ids=["c", "noc"])
def test_default_parameters_written_out_equal_trec_eval(binaries, data, complete):
    """``-m utility.1,-1,0,0``, ``-m relstring.10``, ``-m rbp_resid.p=0.9``: a default written out
    keeps its name (``utility_1,-1,0,0`` ...), and trec_eval's value for that name: under ``-c`` a
    qrels query missing from the run keeps the placeholder's value (utility -1, relstring '-',
    rbp_resid 1), as trec_eval resets it only under the bare name."""
    qrels, qrels_noc, run = data
    specs = ["utility.1,-1,0,0", "relstring.10", "rbp_resid.p=0.9"]
    args = (["-c"] if complete else []) + [a for s in specs for a in ("-m", s)]
    result = evaluate(qrels, run, specs, missing="zero" if complete else "skip")
    std = _trec(binaries["std"], args, qrels if complete else qrels_noc, run)
    assert {k[0] for k in std} == {"utility_1,-1,0,0", "relstring_10", "rbp_resid_p=0.9"}
    ours = _ours(to_trec(result, per_query=True))
    assert ours == std, (f"only trec_eval: {sorted(set(std.items()) - set(ours.items()))[:5]}; "
                         f"only rankwise: {sorted(set(ours.items()) - set(std.items()))[:5]}")
    assert result.names == ["utility(coefficients=1,-1,0,0)", "relstring(length=10)", "rbp_resid(gains=p=0.9)"]
    if complete:  # the qrels-only queries: the placeholder's values, not the bare names' 0 and ''
        missing = result.summary["missing_queries"]
        assert missing
        for qid in missing:
            assert std[("utility_1,-1,0,0", qid)] == "-1.0000"
            assert std[("relstring_10", qid)] == "'-'"
        bare = _ours(to_trec(evaluate(qrels, run, ["utility", "relstring"]), per_query=True))
        assert bare[("utility", missing[0])] == "0.0000" and bare[("relstring", missing[0])] == "''"
