"""``rankwise`` as a real process, forked from the test's process rather than started from nothing.

``cli_popen(args, ...)`` is ``subprocess.Popen([python, "-m", "rankwise.cli", *args], ...)`` and
``cli_run`` is ``subprocess.run`` of the same, except that the child is a fork of this (test)
process, which has imported the command line and the libraries its LLM commands load (the OpenAI SDK
alone: 1.3 CPU-seconds a process) once, instead of a new interpreter importing them for each
process. The child is a process all the same, as the tests of signals, exit codes, hangs and faults
need: its own pid (SIGTERM, SIGINT and SIGKILL reach it alone), its own stdin/stdout/stderr pipes,
the environment and working directory given, and the command line's own exit (``main()`` flushes and
leaves through ``os._exit``); the object returned is a ``subprocess.Popen`` (``communicate``,
``wait``, ``poll``, ``send_signal`` with timeouts, a negative return code for a signal). A fresh
interpreter's start itself is tested by test_startup.py and test_exit.py.
"""

from __future__ import annotations

import functools
import gc
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

# what `rankwise judge` loads, imported once here (each fork starts with them)
_PRELOAD = ("rankwise.cli", "rankwise.cli.judge", "rankwise.relevance.llm_judge", "rankwise.llm.client",
            "rankwise.llm.runner", "rankwise.llm.batch_api", "rankwise.report.judge_console", "openai",
            "openai._vendor.httpx_aiohttp", "rankwise.data.records", "rankwise.testsets.synth_run")


@functools.cache
def _preload() -> None:
    import importlib

    for name in _PRELOAD:
        importlib.import_module(name)


class _ForkedCLI(subprocess.Popen):
    """A Popen whose child runs ``rankwise.cli.main`` in a fork instead of executing a program."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, *rest) -> None:
        argv = [str(a) for a in args]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                _become_cli(argv, cwd, env, preexec_fn, p2cread, c2pwrite, errwrite)
            except BaseException:  # noqa: BLE001 (anything before main() ran: say it and leave)
                import traceback

                traceback.print_exc()
            finally:
                os._exit(70)
        self.pid = pid
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)


def _become_cli(argv: list[str], cwd, env, preexec_fn, stdin_fd: int, stdout_fd: int, stderr_fd: int) -> None:
    """In the child: the standard streams, environment, directory and signals of a new process, then
    main()."""
    import faulthandler
    import io

    gc.freeze()  # the parent's objects: never scanned (or copied) by this process's collections
    faulthandler.disable()
    for fd, target in ((stdin_fd, 0), (stdout_fd, 1), (stderr_fd, 2)):
        if fd != -1:
            os.dup2(fd, target)
    # (the parent's other descriptors stay open, unused: SQLite keeps descriptors of databases this
    # process used, and a child that closed them under it fails with "locking protocol" on the same
    # file)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))  # as python -u
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)))
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), line_buffering=True,
                                  write_through=unbuffered, errors="backslashreplace")
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as the interpreter sets it
    if cwd is not None:
        os.chdir(cwd)
    if preexec_fn is not None:
        preexec_fn()
    _as_python_m("rankwise.cli", argv)
    from rankwise.cli import main

    main()  # leaves the process itself (flush, os._exit)
    sys.stdout.flush()
    os._exit(0)


def _as_python_m(package: str, argv: list[str]) -> None:
    """``sys.argv`` and ``__main__`` as ``python -m PACKAGE ARGV`` sets them (click names the
    program from them)."""
    import importlib.util
    import types

    spec = importlib.util.find_spec(f"{package}.__main__")
    main_module = types.ModuleType("__main__")
    main_module.__spec__, main_module.__package__, main_module.__file__ = spec, package, spec.origin
    sys.modules["__main__"] = main_module
    sys.argv = [spec.origin, *argv]
    sys.path.insert(0, os.getcwd())  # python -m puts the working directory first


def cli_popen(args: Sequence[Any], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen([python, "-m", "rankwise.cli", *args], **kwargs)``, the child forked (see
    above)."""
    _preload()
    return _ForkedCLI([str(a) for a in args], **kwargs)


def cli_run(args: Sequence[Any], *, timeout: float | None = None, input: str | None = None,
            **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run([python, "-m", "rankwise.cli", *args], **kwargs)``, the child forked (see
    above)."""
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with cli_popen(args, **kwargs) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
