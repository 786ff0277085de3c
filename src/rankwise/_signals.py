"""SIGTERM handled like Ctrl-C.

``timeout``, CI runners and container stops send SIGTERM, not SIGINT. The command line installs
:func:`install_sigterm` once: SIGTERM then raises :class:`Terminated` (a ``KeyboardInterrupt``)
wherever Ctrl-C would raise ``KeyboardInterrupt``, and the LLM runner stops a run on either signal
the same way (records and cache written). :func:`interrupt_exit_code` is 130 after Ctrl-C and 143
after SIGTERM (128 + the signal's number, as a shell reports a process the signal killed).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Terminated", "install_sigterm", "note_signal", "interrupt_exit_code", "runner_takes_sigterm",
           "signals_deferred", "signals_held"]

_last: dict[str, int] = {"signum": int(signal.SIGINT)}


class Terminated(KeyboardInterrupt):
    """SIGTERM received (raised where Ctrl-C raises ``KeyboardInterrupt``)."""


def note_signal(signum: int) -> None:
    """Remember which signal interrupted the process (for :func:`interrupt_exit_code`)."""
    _last["signum"] = int(signum)


def interrupt_exit_code() -> int:
    """130 after Ctrl-C (SIGINT), 143 after SIGTERM."""
    return 128 + _last["signum"]


def _on_sigterm(signum: int, frame: Any) -> None:
    note_signal(signal.SIGTERM)
    raise Terminated("terminated")


def install_sigterm() -> None:
    """SIGTERM raises :class:`Terminated` from now on (the main thread only; elsewhere nothing
    changes)."""
    if threading.current_thread() is threading.main_thread():
        note_signal(signal.SIGINT)
        signal.signal(signal.SIGTERM, _on_sigterm)


def runner_takes_sigterm() -> bool:
    """True when an event loop may take SIGTERM over: nobody but rankwise (or the default) handles
    it."""
    try:
        current = signal.getsignal(signal.SIGTERM)
    except (ValueError, AttributeError):
        return False
    return current in (signal.SIG_DFL, _on_sigterm)


_deferring: dict[str, Any] = {"depth": 0, "pending": None}


def _defer(signum: int, frame: Any) -> None:
    if _deferring["pending"] is None:  # the first signal decides (Ctrl-C then SIGTERM: 130)
        _deferring["pending"] = int(signum)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends (a file being written is never cut in half),
    then take effect as if they arrived just then: ``KeyboardInterrupt`` / :class:`Terminated` under
    the command line (exit 130 / 143), the default action (the process ends) where nobody handles
    SIGTERM. Nested blocks defer to the outermost; outside the main thread nothing changes (signals
    only reach the main thread).

    Example:
        >>> with signals_deferred():  # a SIGTERM meanwhile is raised here, after the block
        ...     print("written whole")
        written whole
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _deferring["depth"]:  # inside another block: that one delivers
        _deferring["depth"] += 1
        try:
            yield
        finally:
            _deferring["depth"] -= 1
        return
    previous = {s: signal.signal(s, _defer) for s in (signal.SIGINT, signal.SIGTERM)}
    _deferring["depth"], _deferring["pending"] = 1, None
    try:
        yield
    finally:
        _deferring["depth"] = 0
        pending, _deferring["pending"] = _deferring["pending"], None
        for s, handler in previous.items():
            signal.signal(s, handler)
        if pending is not None:
            _deliver(pending, previous[pending])


def _deliver(signum: int, handler: Any) -> None:
    """The deferred signal, to the handler it would have met (an ignored one stays ignored)."""
    if handler is signal.SIG_IGN:
        return
    if signum == signal.SIGINT and handler is signal.default_int_handler:
        note_signal(signum)
        raise KeyboardInterrupt
    if signum == signal.SIGTERM and handler is _on_sigterm:
        _on_sigterm(signum, None)
    signal.raise_signal(signum)  # another handler (or the default: the process ends as it would have)


#: the old name (it ignored the signals; they are now deferred)
signals_held = signals_deferred
