"""Where teams already work: a pytest plugin, MLflow, and a GitHub Action.

- :mod:`rankwise.integrations.testing` (face: :mod:`rankwise.testing`):
  :func:`assert_no_regression`, :func:`assert_retrieval`;
  :mod:`rankwise.integrations.pytest_plugin`: ``--rankwise-baseline``,
  ``--rankwise-update-baseline`` and fixtures;
- :mod:`rankwise.integrations.mlflow` (face: :mod:`rankwise.mlflow`): :func:`log` a result to
  MLflow, :func:`scorers` (rankwise metrics as MLflow GenAI scorers);
- :mod:`rankwise.integrations.github`: the GitHub Action's gate (job summary, outputs, HTML report).

Nothing here is imported until asked for (MLflow and pytest are heavy); this layer sits above
analysis, metrics and report, and nothing below imports it.

Example:
    >>> import rankwise.integrations as integrations
    >>> callable(integrations.assert_no_regression)
    True
"""

from rankwise._lazy import lazy_exports

_EXPORTS = {
    "assert_no_regression": ".testing", "assert_retrieval": ".testing", "RegressionError": ".testing",
    "log_to_mlflow": ".mlflow:log", "mlflow_scorers": ".mlflow:scorers",
    "github_gate": ".github",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
