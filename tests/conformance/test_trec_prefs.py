"""Preference (``-R prefs``, ``-R qrels_prefs``), judgement-group (``-R qrels_jg``) measures and
``-Z`` z-scores against a trec_eval 10.0 binary built from source (as
tests/conformance/test_trec_eval_binary.py builds it), on seeded random inputs unlike the NIST
files: judgement groups with one and with several sub-groups (equivalence classes and transitive
preference arrays), more non-relevant than relevant documents and the reverse (both branches of
``*_Rnonrel``), negative and fractional levels, runs with shuffled rows and heavy score ties (the
preference measures break ties by docno ascending, the others descending), judged documents never
retrieved, queries missing from the run (``-c``), ``-M`` depths and ``-l`` levels; a z-score table
with zero deviations and missing measures and queries. Printed text must be equal line for line
(runid's value aside: trec_eval prints the run's tag column, rankwise the run's name), and the
``%.17g`` build's doubles equal ours exactly.

Then the readers' one-line errors (file, line, field). The NIST expected outputs themselves are
compared in tests/conformance/test_conformance_trec_eval.py.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.test_trec_eval_binary import _build, _compare, _have_compiler, _numbers, _ours
from conftest import need_trec_eval_source
from rankwise import evaluate
from rankwise.cli import main
from rankwise.data import load_run
from rankwise.data.prefs import read_prefs, read_qrels_jg, read_qrels_prefs, read_zscores
from rankwise.errors import InputError
from rankwise.metrics.jg import evaluate_jg
from rankwise.metrics.prefs import evaluate_prefs
from rankwise.metrics.zscores import apply_zscores
from rankwise.report.text import to_trec


@pytest.fixture(scope="module")
def binaries() -> dict[str, Path]:
    if not _have_compiler():
        pytest.skip("no C compiler/make: cannot build trec_eval (scripts/setup.sh --test installs gcc and make)")
    need_trec_eval_source()
    return {v: _build(v) for v in ("std", "g17")}


DOCS = [f"D{j:03d}" for j in range(120)] + [f"doc-{j}" for j in range(40)]


def _prefs_lines(rng: random.Random, qid: str) -> list[str]:
    """One query's preferences: JGs whose sub-groups all follow one hidden order per JG (consistent,
    as trec_eval requires), so transitivity adds preferences no sub-group states."""
    lines = []
    for g in range(rng.choice([1, 1, 2, 3])):
        pool = rng.sample(DOCS, rng.randint(2, 40))
        relevant = set(pool[: rng.randint(0, len(pool))])
        latent = {d: (rng.random() + 1.0 if d in relevant else 0.0) for d in pool}
        for s in range(rng.choice([1, 1, 2, 4])):
            sub = rng.sample(pool, rng.randint(1, len(pool)))
            buckets = rng.choice([2, 3, 5])
            scale = rng.choice(["{}", "{}.0", "{}e0"]) if rng.random() < 0.7 else None  # or levels x 1.5
            for d in sub:
                level = 0 if latent[d] == 0.0 else 1 + int((latent[d] - 1.0) * buckets)
                text = "0" if not level else scale.format(level) if scale else f"{level * 1.5:g}"
                lines.append(f"{qid} U{g} S{s} {d} {text}\n")
    return lines


def _run_lines(rng: random.Random, qids: list[str], tag: str = "rwprefs") -> list[str]:
    rows = []
    for qid in qids:
        docs = rng.sample(DOCS, rng.randint(1, 90))
        ties = rng.random() < 0.6
        for d in docs:
            score = rng.choice([1.0, 0.5, 2.0, 0.25]) if ties else round(rng.uniform(0, 5), 2)
            rows.append(f"{qid} Q0 {d} 0 {score} {tag}\n")
    rng.shuffle(rows)
    return rows


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines))
    return path


def _trec(binary: Path, args: list[str]) -> str:
    done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _check(binaries, args: list[str], result) -> int:
    """trec_eval's printed text and %.17g doubles vs rankwise's: no difference; how many values
    compared."""
    std = _ours(_trec(binaries["std"], args))
    g17 = _ours(_trec(binaries["g17"], args))
    problems = _compare(std, _ours(to_trec(result, per_query=True)), "printed", exact_text=True)
    numbers = {k: v for k, v in g17.items() if k[0] != "runid" and not v.startswith("'")}
    ours = _numbers(result)
    if "zscores" in result.summary:  # every z-score is a double (counts too), under its name with a Z
        exact = {("Z" + k[0], k[1]): v for k, v in ours.items() if not k[0].startswith("Z")}
        for m in result.measures:
            if m.metric.aggregate == "sum" and m.name not in result.texts:
                exact[("Z" + (m.trec_name or m.name), "all")] = (
                    result.summary["num_rel_all_trec_eval"]  # -c: trec_eval prints the judgement count
                    if m.metric.name == "num_rel" and "num_rel_all_trec_eval" in result.summary
                    else result.mean[m.name])
                if m.metric.name != "num_q":
                    for i, qid in enumerate(result.per_query):
                        exact[("Z" + (m.trec_name or m.name), qid)] = float(result.per_query.column(m.name)[i])
        ours = {**{k: v for k, v in ours.items() if k[0].startswith("Z")}, **exact}
    problems += _compare(numbers, ours, "%.17g", exact_text=False)
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:30])
    return len(std)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_prefs_equal_trec_eval(binaries, tmp_path, seed):
    rng = random.Random(seed)
    qids = [f"q{i}" for i in range(25)]
    prefs_lines = [line for q in qids for line in _prefs_lines(rng, q)]
    rng.shuffle(prefs_lines)
    prefs = _write(tmp_path / "prefs", prefs_lines)
    in_run = [q for q in qids if rng.random() < 0.8]
    run = _write(tmp_path / "run", _run_lines(rng, in_run + ["only_in_run"]))
    # without -c trec_eval stops at a judged query the run lacks: give it only the others
    prefs_noc = _write(tmp_path / "prefs_noc", [ln for ln in prefs_lines if ln.split()[0] in in_run])
    checked = 0
    for complete in (True, False):
        for depth in (None, 7):
            args = ["-q", "-m", "all_prefs", "-R", "prefs"] + (["-c"] if complete else [])
            args += [] if depth is None else ["-M", str(depth)]
            args += [str(prefs if complete else prefs_noc), str(run)]
            result = evaluate_prefs(read_prefs(prefs), load_run(run), ["all_prefs"],
                                    missing="zero" if complete else "skip", depth=depth)
            checked += _check(binaries, args, result)
    assert checked > 4 * 25 * 10


@pytest.mark.parametrize("seed", [4, 5])
def test_qrels_prefs_equal_trec_eval(binaries, tmp_path, seed):
    """qrels read as preferences: the qrels' second column is the judgement group."""
    rng = random.Random(seed)
    lines = []
    qids = [f"{300 + i}" for i in range(12)]
    for q in qids:
        for g in range(rng.choice([1, 2, 3])):
            grades = {d: rng.choice([-1, 0, 0, 0, 1, 1, 2, 3]) for d in rng.sample(DOCS, rng.randint(1, 60))}
            relevant, negative = sum(v > 0 for v in grades.values()), sum(v < 0 for v in grades.values())
            if negative < relevant:
                # *_Rnonrel would take R documents from the lowest class (-1) and read past its end,
                # into memory trec_eval never wrote for this query: undefined, so not compared
                # (docs/trec-measures.md)
                grades = {d: max(v, 0) for d, v in grades.items()}
            lines += [f"{q} {g} {d} {v}\n" for d, v in grades.items()]
    qrels = _write(tmp_path / "qrels", lines)
    run = _write(tmp_path / "run", _run_lines(rng, qids))
    args = ["-q", "-c", "-m", "all_prefs", "-R", "qrels_prefs", str(qrels), str(run)]
    result = evaluate_prefs(read_qrels_prefs(qrels), load_run(run), ["all_prefs"])
    assert _check(binaries, args, result) > 12 * 14


@pytest.mark.parametrize("level", [1, 2])
def test_qrels_jg_equal_trec_eval(binaries, tmp_path, level):
    rng = random.Random(10 + level)
    qids = [f"t{i}" for i in range(15)]
    lines = []
    for q in qids:
        for g in rng.sample(["0", "1", "2", "7", "a"], rng.randint(1, 4)):
            for d in rng.sample(DOCS, rng.randint(1, 80)):
                lines.append(f"{q} {g} {d} {rng.choice([-1, 0, 0, 1, 2, 3])}\n")
    rng.shuffle(lines)
    qrels = _write(tmp_path / "qrels", lines)
    in_run = qids[:-2]
    run = _write(tmp_path / "run", _run_lines(rng, in_run))
    # trec_eval: a measure's parameters given with -m replace its defaults, so the two lists go
    # apart
    for names in (["qrels_jg"], ["map_avgjg", "P_avgjg.1,3,200", "Rprec_mult_avgjg.0.5,3.0,0.05"]):
        for depth in (None, 20):
            args = ["-q", "-c", "-l", str(level), "-R", "qrels_jg", *(x for n in names for x in ("-m", n))]
            args += [] if depth is None else ["-M", str(depth)]
            result = evaluate_jg(read_qrels_jg(qrels), load_run(run), names, relevance_level=level, depth=depth)
            assert _check(binaries, [*args, str(qrels), str(run)], result) > 15 * 6


def test_zscores_equal_trec_eval(binaries, tmp_path, shared_data):
    """-Z on all_trec: means and deviations drawn at random, some deviations 0 (value equal to the
    mean or not), some measures and one query left out of the table; with -c and without."""
    data = shared_data / "trec_eval"
    rng = random.Random(7)
    base = evaluate(data / "qrels.test", data / "results.test", ["all_trec"], missing="skip")
    lines = []
    for qid in ["301", "303", "999"]:  # 302 absent: every value is trec_eval's -1000000
        for m in base.measures:
            name = m.trec_name or m.name
            if rng.random() < 0.1 or m.metric.aggregate == "gmean" or name == "relstring":
                continue
            value = base.per_query[qid][m.name] if qid != "999" else 0.0
            if rng.random() < 0.15:
                lines.append(f"{qid} {name} {value!r} 0.0000\n" if rng.random() < 0.5 else f"{qid} {name} 0.5 0\n")
            else:
                lines.append(f"{qid} {name} {rng.uniform(-1, 50):.4f} {rng.uniform(0.01, 20):.4f}\n")
    table = _write(tmp_path / "zscores", lines)
    for complete, run in ((False, "results.test"), (True, "results.trunc")):
        args = ["-q", "-m", "all_trec", "-Z", str(table)] + (["-c"] if complete else [])
        result = evaluate(data / "qrels.test", data / run, ["all_trec"], missing="zero" if complete else "skip")
        z = apply_zscores(result, read_zscores(table))
        assert _check(binaries, [*args, str(data / "qrels.test"), str(data / run)], z) > 250


# ------------------------------------------------------------------------------------- readers
@pytest.mark.parametrize("reader,text,where", [
    (read_prefs, "q1 u s d1 1\nq1 u s d2\n", ":2: field 'rel_level': expected 5 fields"),
    (read_prefs, "q1 u s d1 1\nq1 u s d2 high\n", ":2: field 'rel_level': not a number: 'high'"),
    (read_prefs, "q1 u s d1 1 extra\n", ":1: field '(extra)': expected 5 fields"),
    (read_prefs, "# only a comment\n\n", ": no judgement lines"),
    (read_qrels_prefs, "301 0 d1 1\n301 0 d2 x\n", ":2: field 'relevance': not a number: 'x'"),
    (read_qrels_jg, "301 0 d1 1\n301 0 d2 1.5\n", ":2: field 'relevance': not an integer: '1.5'"),
    (read_qrels_jg, "301 0 d1 1\n301 1 d1 0\n301 0 d1 2\n", ":3: field 'doc_id': document 'd1' judged twice"),
    (read_qrels_jg, "301 0 d1\n", ":1: field 'relevance': expected 4 fields"),
    (read_zscores, "301 map 0.2\n", ":1: field 'std_dev': expected 4 fields"),
    (read_zscores, "301 map 0.2 0.1\n301 map 0.3 0.1\n", ":2: field 'measure': measure 'map' given twice"),
    (read_zscores, "301 map 0.2 wide\n", ":1: field 'std_dev': not a number: 'wide'"),
])
def test_reader_errors_name_file_line_field(tmp_path, reader, text, where):
    path = tmp_path / "judgements"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        reader(path)
    message = str(caught.value)
    assert message.startswith(str(path) + where), message
    assert "\n" not in message


def test_readers_take_bom_crlf_and_comments(tmp_path):
    path = tmp_path / "prefs"
    path.write_bytes(b"\xef\xbb\xbf# a comment\r\nq1 u s d#1 2\r\nq1\tu\ts\td2\t0\r\n")
    prefs = read_prefs(path)
    assert [(p.doc_id, p.level, p.line) for p in prefs.lines("q1")] == [("d#1", 2.0, 2), ("d2", 0.0, 3)]
    jg = tmp_path / "qrels_jg"
    jg.write_bytes(b"\xef\xbb\xbf301 0 d1 1\r\n# skip\r\n301 1 d1 0\r\n")
    assert read_qrels_jg(jg).by_query == {"301": {"0": {"d1": 1}, "1": {"d1": 0}}}


def test_inconsistent_preferences_are_one_line_errors(tmp_path):
    two_levels = tmp_path / "two_levels"
    two_levels.write_text("q1 u s a 2\nq1 u s b 1\nq1 u s a 1\n")
    conflict = tmp_path / "conflict"
    conflict.write_text("q1 u s1 a 2\nq1 u s1 b 1\nq1 u s2 b 2\nq1 u s2 a 1\n")
    zero = tmp_path / "zero"
    zero.write_text("q1 u s1 a 2\nq1 u s1 b 1\nq1 u s2 a 0\nq1 u s2 c 1\n")
    run = tmp_path / "run"
    run.write_text("q1 Q0 a 0 1.0 r\n")
    for path, problem in ((two_levels, "has two levels"), (conflict, "each preferred to the other"),
                          (zero, "both level 0 and a level above 0")):
        result = CliRunner().invoke(main, ["eval", "-R", "prefs", str(path), str(run)])
        assert result.exit_code == 2, result.output
        line = result.output.strip()
        assert line.startswith(f"rankwise: error: {path}:") and problem in line and "\n" not in line, line


def test_measures_need_their_judgements(shared_data):
    data = shared_data / "trec_eval"
    runner = CliRunner()
    wrong = runner.invoke(main, ["eval", str(data / "qrels.test"), str(data / "results.test"), "-m", "prefs_simp"])
    assert wrong.exit_code == 2 and "prefs_simp needs preference judgements" in wrong.output
    other = runner.invoke(main, ["eval", "-R", "qrels_jg", str(data / "qrels.123"), str(data / "results.test"),
                                 "-m", "map"])
    assert other.exit_code == 2 and "map is not computed from -R qrels_jg judgements" in other.output
    stream = runner.invoke(main, ["eval", "-R", "prefs", str(data / "prefs.test"), str(data / "prefs.results.test"),
                                  "--stream"])
    assert stream.exit_code == 2 and "in memory only" in stream.output


def test_small_case_by_hand():
    """One JG, levels a=2 b=1 c=0; ranking b a x: b>a is failed with both retrieved (b above a), a>c
    and b>c are fulfilled by implication (c not retrieved)."""
    from rankwise.data.prefs import PrefLine, Prefs
    from rankwise.data.run import Run

    prefs = Prefs({"q": (PrefLine("u", "s", "a", 2.0), PrefLine("u", "s", "b", 1.0), PrefLine("u", "s", "c", 0.0))})
    run = Run.from_dict({"q": ["b", "a", "x"]})
    r = evaluate_prefs(prefs, run, ["all_prefs"])
    assert r.per_query["q"] == {
        "num_q": 1.0, "prefs_num_prefs_poss": 3.0, "prefs_num_prefs_ful": 2.0, "prefs_num_prefs_ful_ret": 0.0,
        "prefs_simp": 2 / 3, "prefs_pair": 2 / 3, "prefs_avgjg": 2 / 3,
        # R = 2 >= N = 1: one fulfilled pref added per retrieved relevant doc (2), R * (R - N) = 2
        # possible
        "prefs_avgjg_Rnonrel": (2 + 2) / (3 + 2), "prefs_simp_ret": 0.0, "prefs_pair_ret": 0.0,
        "prefs_avgjg_ret": 0.0,
        # retrieved: R = 2, N = 0: (0 + 2 * 2) / (1 + 2 * 2)
        "prefs_avgjg_Rnonrel_ret": 4 / 5, "prefs_simp_imp": 2 / 3, "prefs_pair_imp": 2 / 3,
        "prefs_avgjg_imp": 2 / 3,
    }
