"""The pages' ``--engine spark`` commands run as shown (the machinery of test_docs_commands.py), on a local
Spark; a file of their own so that pytest-xdist's ``--dist loadfile`` can run them beside the other pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_docs_commands import _check, _pages_with_commands


@pytest.fixture(scope="module")
def spark_workdir(tmp_path_factory) -> Path:
    """One folder for every page's Spark commands: the Spark session of the process stays in the folder
    it started in and reads relative paths from there, so the pages share it."""
    return tmp_path_factory.mktemp("spark-docs")


@pytest.mark.parametrize("name", _pages_with_commands(spark=True))
def test_page_spark_commands_run_as_shown(name, spark_workdir, monkeypatch, shared_data):
    """The pages' ``--engine spark`` commands, on a local Spark (the same numbers as in one process)."""
    pytest.importorskip("pyspark", reason="the Spark commands of the docs need pyspark (pip install 'rankwise[spark]')")
    _check(name, spark_workdir, monkeypatch, shared_data, spark=True)
