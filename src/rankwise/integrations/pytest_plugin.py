"""rankwise's pytest plugin (entry point ``pytest11``): baseline options, fixtures, and a summary
line.

Options: ``--rankwise-baseline PATH`` (the default baseline of
:func:`rankwise.testing.assert_no_regression`, and the ``rankwise_baseline`` fixture) and
``--rankwise-update-baseline`` (accept the candidate as the new baseline on purpose: the assertion
writes it and passes; the session's summary lists what was written). Fixtures: ``rankwise_baseline``
(the path, or None), ``rankwise_update_baseline`` (bool).

Example:
    >>> import rankwise.integrations.pytest_plugin as plugin
    >>> callable(plugin.pytest_addoption) and callable(plugin.pytest_terminal_summary)
    True
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rankwise.integrations._session import accepted_baselines, session_defaults


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rankwise", "rankwise retrieval regression checks")
    group.addoption("--rankwise-baseline", default=None, metavar="PATH",
                    help="Baseline of rankwise.testing.assert_no_regression: a saved result (.json), run, "
                         "or RAG records file.")
    group.addoption("--rankwise-update-baseline", action="store_true", default=False,
                    help="Accept the candidate as the new baseline on purpose: write it and pass.")


def pytest_configure(config: pytest.Config) -> None:
    baseline = config.getoption("--rankwise-baseline", default=None)
    session_defaults.clear()
    update = config.getoption("--rankwise-update-baseline", default=False)
    if update and baseline is not None:  # the update target, checked before any test runs (one line, usage error)
        from rankwise._outputs import check_outputs
        from rankwise.errors import InputError

        try:
            check_outputs({"--rankwise-baseline": baseline}, force=True)
        except InputError as exc:
            raise pytest.UsageError(f"rankwise: {exc}") from None
    if baseline is not None:
        session_defaults["baseline"] = str(_absolute(baseline))
    if update:
        session_defaults["update"] = True
    accepted_baselines.clear()


def pytest_unconfigure(config: pytest.Config) -> None:
    session_defaults.clear()


@pytest.fixture
def rankwise_baseline(pytestconfig: pytest.Config) -> Path | None:
    """The ``--rankwise-baseline`` path (absolute), or None when not given."""
    value = pytestconfig.getoption("--rankwise-baseline", default=None)
    return None if value is None else _absolute(value)


def _absolute(path: str) -> Path:
    """``path`` made absolute, symlinks resolved where they lead somewhere (a loop: left as it is,
    for the reader's or the output guard's one-line error)."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(path))


@pytest.fixture
def rankwise_update_baseline(pytestconfig: pytest.Config) -> bool:
    """True under ``--rankwise-update-baseline``."""
    return bool(pytestconfig.getoption("--rankwise-update-baseline", default=False))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A test failed by rankwise's bad-input error (a baseline that is not UTF-8, nested too deeply,
    missing ...) is reported as its one line, not as a traceback through rankwise's code. A
    regression (:class:`~rankwise.errors.RegressionError`, an ``AssertionError``) is a failed
    assertion: pytest reports it as one."""
    outcome = yield
    from rankwise.errors import RankwiseError

    report = outcome.get_result()
    error = call.excinfo.value if call.excinfo is not None else None
    if report.failed and isinstance(error, RankwiseError) and not isinstance(error, AssertionError):
        report.longrepr = f"rankwise: error: {' '.join(str(call.excinfo.value).splitlines())}"


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if accepted_baselines:
        terminalreporter.section("rankwise")
        for path, origin in accepted_baselines:
            terminalreporter.write_line(f"rankwise: accepted a new baseline on purpose: wrote {path} from {origin}")
