"""The rankwise CLI run in the test's own process, seen as a finished process.

``run_cli(args)`` gives what ``subprocess.run([python, "-m", "rankwise.cli", *args],
capture_output=True, text=True)`` gives (``returncode``, ``stdout``, ``stderr``), without starting
an interpreter: for tests where the process boundary is not what is tested. What a real process
would print at an uncaught exception (a traceback on stderr, exit code 1) is printed here too, so
"no traceback" assertions keep their meaning. Tests of exit codes from signals, startup time, piping
or Ctrl-C keep real processes.
"""

from __future__ import annotations

import os
import subprocess
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from click.testing import CliRunner

PROG = "python -m rankwise.cli"  # click's name for `python -m rankwise.cli`, in usage and --version lines


def env_changes(env: Mapping[str, str] | None) -> dict[str, str | None]:
    """A full environment (as given to subprocess) as changes to this process's (None: unset).

    >>> env_changes({**os.environ, "RANKWISE_X": "1"})["RANKWISE_X"]
    '1'
    """
    if env is None:
        return {}
    changes: dict[str, str | None] = {k: v for k, v in env.items() if os.environ.get(k) != v}
    changes.update({k: None for k in os.environ if k not in env})
    return changes


def run_cli(args: Sequence[Any], *, env: Mapping[str, str] | None = None,
            overrides: Mapping[str, str | None] | None = None, input: str | bytes | None = None,
            check: bool = False, capture_output: bool = True, text: bool = True,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    """``rankwise ARGS`` in-process, as ``subprocess.run([python, "-m", "rankwise.cli", *ARGS],
    capture_output=True, text=True, ...)`` would give it: ``env`` a full environment (as for
    subprocess), ``overrides`` changes (None unsets) to this process's; ``check`` raises
    CalledProcessError on a non-zero exit. ``capture_output``/``text`` must be true (what the tests'
    subprocess calls used); ``timeout`` is accepted and not enforced (an in-process call cannot be
    killed)."""
    from rankwise.cli import main

    if not (capture_output and text):
        raise ValueError("run_cli always captures stdout and stderr as text")
    argv = [str(a) for a in args]
    changes = {**env_changes(env), **dict(overrides or {})}
    result = CliRunner().invoke(main, argv, env=changes, input=input, prog_name=PROG, catch_exceptions=True)
    stderr, code = result.stderr, result.exit_code
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__)[1:])
        code = 1
    done = subprocess.CompletedProcess(argv, code, result.stdout, stderr)
    if check:
        done.check_returncode()
    return done
