"""SIGTERM handled like Ctrl-C.

``timeout``, CI runners and container stops send SIGTERM, not SIGINT. The command line installs
:func:`install_sigterm` once: SIGTERM then raises :class:`Terminated` (a ``KeyboardInterrupt``) wherever
Ctrl-C would raise ``KeyboardInterrupt``, and the LLM runner stops a run on either signal the same way
(records and cache written). :func:`interrupt_exit_code` is 130 after Ctrl-C and 143 after SIGTERM
(128 + the signal's number, as a shell reports a process the signal killed).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["Terminated", "install_sigterm", "note_signal", "interrupt_exit_code", "runner_takes_sigterm",
           "signals_held"]

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
    """SIGTERM raises :class:`Terminated` from now on (the main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is threading.main_thread():
        note_signal(signal.SIGINT)
        signal.signal(signal.SIGTERM, _on_sigterm)


def runner_takes_sigterm() -> bool:
    """True when an event loop may take SIGTERM over: nobody but rankwise (or the default) handles it."""
    try:
        current = signal.getsignal(signal.SIGTERM)
    except (ValueError, AttributeError):
        return False
    return current in (signal.SIG_DFL, _on_sigterm)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM are ignored meanwhile (records being written must not be cut in half)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
