"""One rule for optional packages in the suite: a package that ``make test`` installs
(``scripts/setup.sh --test``: every extra and the test tools) is required, so a test that needs it
fails when it is missing rather than skipping — a skip would hide a feature that no longer installs
or imports. (``pytest.importorskip`` is not used in the suite: tests/structure/test_skip_rules.py
holds that.)"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def need(module: str, reason: str | None = None) -> ModuleType:
    """``module`` imported; a failure (not a skip) naming what is missing and how ``make test``
    installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        why = f" ({reason})" if reason else ""
        pytest.fail(f"{module} is not importable{why}: {exc}. `make test` installs every extra "
                    "(scripts/setup.sh --test); a missing one is a failure, not a skip", pytrace=False)
