"""The judge's SQLite verdict cache: a real file, WAL, committed per verdict, readable by other
processes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from rankwise.errors import InputError
from rankwise.llm.cache import ResponseCache, cache_key, default_cache_path

BASE = {"model": "m", "mode": "reference", "scale": "binary", "prompt_version": "reference-binary-v1+abc",
        "style": "single", "question": "q?", "chunk": "chunk text", "context": "the reference"}


def _put(cache, key, verdict=1, **kw):
    fields = {"grade": None, "reason": "because", "model": "m", "mode": "reference", "scale": "binary",
              "prompt_version": "reference-binary-v1+abc", "style": "single", "call": "single",
              "prompt_tokens": 100, "completion_tokens": 10} | kw
    cache.put(key, verdict=verdict, **fields)


def test_key_changes_with_every_field():
    k0 = cache_key(**BASE)
    assert k0 == cache_key(**BASE)
    for field, other in [("model", "m2"), ("mode", "response"), ("scale", "graded"),
                         ("prompt_version", "reference-binary-v2+abc"), ("style", "batch"),
                         ("question", "q2?"), ("chunk", "chunk text!"), ("context", "another reference")]:
        assert cache_key(**(BASE | {field: other})) != k0, field
    assert cache_key(**BASE, params={"temperature": 0.7}) != cache_key(**BASE, params={"temperature": 0.0})


def test_put_get_stats_clear(tmp_path):
    path = tmp_path / "c.sqlite"
    with ResponseCache(path) as cache:
        assert cache.get("nope") is None
        _put(cache, "k1", 1)
        _put(cache, "k2", 0, reason=None)
        _put(cache, "k3", 1, grade=3, model="m2", scale="graded", prompt_version="reference-graded-v1+def")
        got = cache.get("k1")
        assert (got.verdict, got.grade, got.reason, got.call) == (1, None, "because", "single")
        assert set(cache.get_many(["k1", "k2", "k3", "k4"])) == {"k1", "k2", "k3"}
        assert len(cache) == 3
        stats = cache.stats()
        assert stats.verdicts == 3 and stats.prompt_tokens == 300 and stats.completion_tokens == 30
        assert [(g["model"], g["verdicts"], g["relevant"]) for g in stats.groups] == [("m", 2, 1), ("m2", 1, 1)]
        assert cache.clear(model="m2") == 1
        assert len(cache) == 2
        assert cache.clear() == 2
        assert len(cache) == 0
        mode = cache._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_get_many_handles_more_keys_than_one_query_takes(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        for i in range(1200):
            _put(cache, f"k{i}", i % 2)
        got = cache.get_many([f"k{i}" for i in range(0, 1300)])
    assert len(got) == 1200 and got["k7"].verdict == 1


def test_each_verdict_is_committed_at_once(tmp_path):
    """Another connection (another process in real life) sees a verdict as soon as put() returns."""
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    _put(cache, "k1", 1)
    other = sqlite3.connect(str(path))
    assert other.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 1
    _put(cache, "k2", 0)
    assert other.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 2
    other.close()
    cache.close()


def test_verdicts_survive_a_killed_writer(tmp_path):
    path = tmp_path / "c.sqlite"
    script = (
        "import os, sys\n"
        "from rankwise.llm.cache import ResponseCache\n"
        f"c = ResponseCache({str(path)!r})\n"
        "for i in range(50):\n"
        "    c.put(f'k{i}', verdict=1, grade=None, reason='r', model='m', mode='question', scale='binary',\n"
        "          prompt_version='v', style='single', call='single')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    with ResponseCache(path) as cache:
        assert len(cache) == 50


def test_not_a_cache_file(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("this is not a database, just text " * 50)
    with pytest.raises(InputError, match="notes.sqlite: not a usable rankwise cache"):
        ResponseCache(bad)


def test_default_path_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RANKWISE_CACHE", str(tmp_path / "x.sqlite"))
    assert default_cache_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("RANKWISE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("RANKWISE_CACHE_DIR", raising=False)
    assert default_cache_path() == tmp_path / "xdg" / "rankwise" / "llm-cache.sqlite"
    # one cache variable for every cache: the folder the embedding cache obeys holds the LLM cache
    # too
    monkeypatch.setenv("RANKWISE_CACHE_DIR", str(tmp_path / "caches"))
    assert default_cache_path() == tmp_path / "caches" / "llm-cache.sqlite"
    from rankwise.retrieval.dense import default_cache_dir

    assert default_cache_path().parent == default_cache_dir()


def test_rows_no_judge_could_write_are_misses_counted(tmp_path):
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        for key in ("ok", "seven", "grade9", "text", "ungraded"):
            _put(cache, key, grade=2 if key in ("grade9", "ungraded") else None,
                 scale="graded" if key in ("grade9", "ungraded") else "binary")
        db = cache._db
        db.execute("UPDATE verdicts SET verdict=7 WHERE key='seven'")
        db.execute("UPDATE verdicts SET grade=9 WHERE key='grade9'")
        db.execute("UPDATE verdicts SET verdict='one' WHERE key='text'")
        db.execute("UPDATE verdicts SET grade=NULL WHERE key='ungraded'")
        got = cache.get_many(["ok", "seven", "grade9", "text", "ungraded", "absent"])
        assert list(got) == ["ok"] and got["ok"].verdict == 1
        assert cache.bad_rows == 4 and cache.bad_example in {  # the first one met
            "verdict 7 (not 0 or 1)", "grade 9 (not 0-3)", "verdict 'one' (not 0 or 1)", "a graded verdict without a grade"}


def test_an_impossible_cached_verdict_is_judged_again_not_served(tmp_path):
    """A cache row holding verdict 7 used to be served into records that rankwise then refused to
    read."""
    import json

    from click.testing import CliRunner

    from llm_server import start_server
    from rankwise.cli import main
    from rankwise.data.records import load_records

    texts = ["The Eiffel Tower was completed in 1889.", "Paris is the capital of France.",
             "The tower is 330 metres tall.", "Construction began in 1887 and ended in 1889."]
    (tmp_path / "ts.jsonl").write_text(json.dumps({"id": "q1", "user_input": "When was the Eiffel Tower completed?",
                                                   "reference": "It was completed in 1889.",
                                                   "retrieved_contexts": texts}) + "\n")
    srv = start_server()
    try:
        def judge(out):
            return CliRunner().invoke(main, ["judge", str(tmp_path / "ts.jsonl"), "--model", "judge-test",
                                             "--base-url", srv.base_url, "--cache", str(tmp_path / "c.sqlite"),
                                             "--records", str(tmp_path / out), "--quiet"])

        r = judge("first.jsonl")
        assert r.exit_code == 0, r.output
        want = load_records(tmp_path / "first.jsonl")[0].verdicts("llm")
        db = sqlite3.connect(tmp_path / "c.sqlite")
        keys = [k for (k,) in db.execute("SELECT key FROM verdicts ORDER BY key")]
        db.execute("UPDATE verdicts SET verdict=7 WHERE key=?", (keys[0],))
        db.execute("UPDATE verdicts SET verdict=-1 WHERE key=?", (keys[1],))
        db.commit()
        db.close()
        srv.reset()
        r = judge("second.jsonl")
        assert r.exit_code == 0, r.output
        assert "verdicts: 4 ok (2 from cache, 2 new), 0 failed" in r.stdout
        assert "cache: 2 unusable rows (a verdict no judge gives) not served: judged again" in r.stdout
        assert srv.stats()["requests"] == 2  # the two bad rows, asked again
        assert load_records(tmp_path / "second.jsonl")[0].verdicts("llm") == want
        db = sqlite3.connect(tmp_path / "c.sqlite")
        assert sorted(v for (v,) in db.execute("SELECT verdict FROM verdicts")) == sorted(want)  # overwritten
        db.close()
    finally:
        srv.stop()


def test_cache_stats_and_merge_of_a_damaged_file_are_one_line_errors(tmp_path):
    from click.testing import CliRunner

    from rankwise.cli import main

    with ResponseCache(tmp_path / "good.sqlite") as cache:
        for i in range(2000):
            _put(cache, f"k{i}", reason="r" * 200)
        cache._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray((tmp_path / "good.sqlite").read_bytes())
    for at in range(8192, len(data), 4096):  # every page past the schema overwritten in the middle
        data[at + 100:at + 400] = b"\xff" * 300
    (tmp_path / "bad.sqlite").write_bytes(bytes(data))
    for args in (["cache", "stats", "--cache", str(tmp_path / "bad.sqlite")],
                 ["cache", "merge", str(tmp_path / "bad.sqlite"), "--into", str(tmp_path / "all.sqlite")]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2, r.output
        assert r.stderr == (f"rankwise: error: {tmp_path / 'bad.sqlite'}: not a usable rankwise cache (SQLite) "
                            "file: database disk image is malformed\n")
    # a merge skips, and counts, rows no judge could have written
    with ResponseCache(tmp_path / "part.sqlite") as cache:
        _put(cache, "a")
        _put(cache, "b")
        cache._db.execute("UPDATE verdicts SET verdict=7 WHERE key='b'")
    r = CliRunner().invoke(main, ["cache", "merge", str(tmp_path / "part.sqlite"), "--into", str(tmp_path / "m.sqlite")])
    assert r.exit_code == 0 and "2 rows read, 1 added" in r.stdout and "1 unusable rows skipped" in r.stdout


def test_a_cache_under_its_former_name_is_used_until_one_under_the_new_name_exists(tmp_path, monkeypatch):
    """The default file was llm-judge.sqlite; a user's paid replies there are found, not paid for
    again."""
    from rankwise.llm.cache import default_cache_path

    monkeypatch.delenv("RANKWISE_CACHE", raising=False)
    monkeypatch.setenv("RANKWISE_CACHE_DIR", str(tmp_path))
    assert default_cache_path() == tmp_path / "llm-cache.sqlite"
    (tmp_path / "llm-judge.sqlite").write_bytes(b"")
    assert default_cache_path() == tmp_path / "llm-judge.sqlite"
    (tmp_path / "llm-cache.sqlite").write_bytes(b"")
    assert default_cache_path() == tmp_path / "llm-cache.sqlite"
