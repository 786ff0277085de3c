"""What the pytest plugin and :mod:`rankwise.integrations.testing` share in one process.

Kept free of heavy imports, so loading the plugin (every pytest run where rankwise is installed)
costs nothing until a test calls an assertion.
"""

from __future__ import annotations

from typing import Any

#: what the pytest plugin sets from its command-line options: ``baseline`` (a path) and ``update``
#: (bool)
session_defaults: dict[str, Any] = {}
#: the baselines written on purpose in this process: (baseline path, what it was written from)
accepted_baselines: list[tuple[str, str]] = []
