"""Shared fixtures: where the shared test data lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RANKWISE_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` (or $RANKWISE_SHARED_DATA): trec_eval's suite, Cranfield and CISI."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared test data not found at {SHARED_DATA}; set RANKWISE_SHARED_DATA")
    return SHARED_DATA


@pytest.fixture(scope="module")
def server():
    """A real Chat Completions server on loopback (tests/llm_server.py), one per test module."""
    from llm_server import running_server

    with running_server() as srv:
        yield srv


@pytest.fixture
def srv(server):
    """The module's LLM server, counters reset and faults cleared."""
    server.reset()
    server.configure(latency=0.0, slow_seconds=5.0, retry_after="1")
    return server


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession (``local[2]``) for the whole run (one per xdist worker that runs Spark tests):
    test_spark.py and the in-process ``--engine spark`` CLI calls of test_spark_cli.py share it."""
    import rankwise.spark as rs

    s = rs.session("local[2]", conf={"spark.sql.shuffle.partitions": 3, "spark.ui.enabled": "false",
                                     "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "1g"})
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session", autouse=True)
def _private_caches(tmp_path_factory):
    """The embedding cache of this run (of this xdist worker) in a temporary folder, not the user's
    ``~/.cache/rankwise``: no test sees another's (or an earlier run's) embeddings. (Not $RANKWISE_CACHE: it
    outranks a judge config file's cache, which test_llm_cli checks.)"""
    root = tmp_path_factory.mktemp("rankwise-cache")
    saved = {k: os.environ.get(k) for k in ("RANKWISE_CACHE_DIR",)}
    os.environ.setdefault("RANKWISE_CACHE_DIR", str(root))
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value

