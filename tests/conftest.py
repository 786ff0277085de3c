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
