"""The judge's SQLite verdict cache: a real file, WAL, committed per verdict, readable by other processes."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from rankwise.errors import InputError
from rankwise.llm.cache import VerdictCache, cache_key, default_cache_path

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
    with VerdictCache(path) as cache:
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
    with VerdictCache(tmp_path / "c.sqlite") as cache:
        for i in range(1200):
            _put(cache, f"k{i}", i % 2)
        got = cache.get_many([f"k{i}" for i in range(0, 1300)])
    assert len(got) == 1200 and got["k7"].verdict == 1


def test_each_verdict_is_committed_at_once(tmp_path):
    """Another connection (another process in real life) sees a verdict as soon as put() returns."""
    path = tmp_path / "c.sqlite"
    cache = VerdictCache(path)
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
        "from rankwise.llm.cache import VerdictCache\n"
        f"c = VerdictCache({str(path)!r})\n"
        "for i in range(50):\n"
        "    c.put(f'k{i}', verdict=1, grade=None, reason='r', model='m', mode='question', scale='binary',\n"
        "          prompt_version='v', style='single', call='single')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    with VerdictCache(path) as cache:
        assert len(cache) == 50


def test_not_a_cache_file(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("this is not a database, just text " * 50)
    with pytest.raises(InputError, match="notes.sqlite: not a usable rankwise cache"):
        VerdictCache(bad)


def test_default_path_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RANKWISE_CACHE", str(tmp_path / "x.sqlite"))
    assert default_cache_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("RANKWISE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "rankwise" / "llm-judge.sqlite"
