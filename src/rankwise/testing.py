"""Assertions for tests: :func:`assert_no_regression` (the gate as an assertion) and
:func:`assert_retrieval`.

The face of :mod:`rankwise.integrations.testing`; the pytest plugin (``--rankwise-baseline``,
``--rankwise-update-baseline``) is :mod:`rankwise.integrations.pytest_plugin`.

Example:
    >>> from rankwise.testing import assert_no_regression
    >>> qrels = {"q1": {"a": 1}}
    >>> assert_no_regression({"q1": ["a"]}, {"q1": ["a"]}, "P@1", qrels=qrels).passed
    True
"""

from rankwise.integrations.testing import RegressionError, assert_no_regression, assert_retrieval

__all__ = ["RegressionError", "assert_no_regression", "assert_retrieval"]
