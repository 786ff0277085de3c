"""The docstring examples' temporary files go to pytest's own temporary folder.

The examples under ``src/`` write their files where ``tempfile.mkdtemp()`` says, as a user's code
would; pointed at pytest's per-test folder (removed with its old runs), a run of the suite no
longer leaves dozens of folders in the system's temporary directory.
"""

from __future__ import annotations

import tempfile

import pytest


@pytest.fixture(autouse=True)
def _examples_write_under_pytest(request, monkeypatch):
    if isinstance(request.node, pytest.DoctestItem):
        monkeypatch.setattr(tempfile, "tempdir", str(request.getfixturevalue("tmp_path")))
