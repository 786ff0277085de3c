"""One lazy-import helper for the package faces: a name is imported from its module on first use.

Example:
    >>> getattr_, dir_ = lazy_exports("demo", {"sqrt": "math", "root": "math:sqrt"}, {"pi": 1})
    >>> getattr_("sqrt")(9.0), getattr_("root")(16.0)
    (3.0, 4.0)
    >>> dir_()
    ['pi', 'root', 'sqrt']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, names: Mapping[str, str],
                 namespace: Mapping[str, Any] | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package face: ``names`` maps an exported name to its
    module.

    A module path starting with a dot is relative to ``package`` (``".client"`` →
    ``package.client``); ``"module:attr"`` exports ``module.attr`` under another name;
    ``package.name`` itself (a submodule exported under its own name) gives the module. The face
    stays light: nothing is imported until a name is asked for.
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            mod, _, attr = names[name].partition(":")
            mod = package + mod if mod.startswith(".") else mod
            module = importlib.import_module(mod)
            return module if not attr and mod == f"{package}.{name}" else getattr(module, attr or name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*(namespace or {}), *names})

    return __getattr__, __dir__
