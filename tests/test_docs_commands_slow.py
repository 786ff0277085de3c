"""The commands of the slow pages (README.md's demo, dense retrieval: :data:`test_docs_commands.SLOW`) run as
shown, by the machinery of test_docs_commands.py; a file of their own so that pytest-xdist's ``--dist
loadfile`` can run them beside the other pages instead of after them."""

from __future__ import annotations

import pytest

from test_docs_commands import _check, _pages_with_commands


@pytest.mark.parametrize("name", _pages_with_commands(spark=False, slow=True))
def test_page_commands_run_as_shown(name, tmp_path, monkeypatch, shared_data):
    """Every command of the page exits as expected, and every transcript shown is what it prints."""
    _check(name, tmp_path, monkeypatch, shared_data, spark=False)
