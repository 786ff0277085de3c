"""rankwise in MLflow: :func:`log` a result as a run, :func:`scorers` for ``mlflow.genai.evaluate``.

The face of :mod:`rankwise.integrations.mlflow` (MLflow itself is imported only when these run; this
module's name does not shadow the real ``mlflow``: every import here and there is absolute).

Example:
    >>> import rankwise.mlflow
    >>> rankwise.mlflow.mlflow_name("recall@100")
    'recall_at_100'
"""

from rankwise.integrations.mlflow import (
    MlflowLogError,
    case_from_trace,
    check_tracking_uri,
    log,
    mlflow_name,
    scorers,
)

__all__ = ["MlflowLogError", "case_from_trace", "check_tracking_uri", "log", "mlflow_name", "scorers"]
