"""An MLflow tracking URI checked before any work: one line for each way it cannot be logged to.

MLflow meets a bad tracking URI late and loudly: a file store raises (MLflow 3 put the file backend
in maintenance mode), an SQLite file that cannot be opened is retried for minutes, a refused server
is retried with backoff, a corrupt database or an unknown scheme ends in a long traceback.
:func:`check_tracking_uri` finds each of these in a few seconds, before anything is computed, and
says which it is in one line.

Example:
    >>> (
    ...     sqlite_path("sqlite:////tmp/m.db"),
    ...     sqlite_path("sqlite:///m.db?mode=rwc"),
    ...     sqlite_path("sqlite://"),
    ... )
    ('/tmp/m.db', 'm.db', '')
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankwise.errors import InputError

__all__ = ["check_tracking_uri", "sqlite_path", "PROBE_SECONDS", "import_mlflow", "borrowed_mlflow"]

#: seconds a server (or a locked database) gets to answer the check
PROBE_SECONDS = 3.0
_DATABASES = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}  # a server's TCP port when the URI gives none
_KNOWN = {"", "file", "sqlite", "http", "https", "databricks", "databricks-uc", "uc", *_DATABASES}
_SQLITE_HEADER = b"SQLite format 3\x00"


def _shown(uri: str) -> str:
    from rankwise.llm.client import mask_url

    return mask_url(uri)


def _fail(uri: str, problem: str) -> InputError:
    return InputError(f"MLflow tracking URI {_shown(uri)!r}: {problem}")


def sqlite_path(uri: str) -> str:
    """The database file of an ``sqlite://`` URI as SQLAlchemy reads it ('' or ':memory:': in
    memory)."""
    rest = uri[len("sqlite://"):].split("?", 1)[0]
    return urllib.parse.unquote(rest[1:] if rest.startswith("/") else rest)


def _schemes() -> set[str]:
    """The schemes this MLflow logs to (its tracking store registry: built-in and plugins)."""
    try:
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry

        return set(_tracking_store_registry._registry) | {"databricks-uc", "uc"}
    except (ImportError, AttributeError):  # another MLflow's internals: its documented schemes
        return set(_KNOWN)


def _file_store(uri: str, scheme: str) -> None:
    """A file store: refused as MLflow 3 refuses it, unless MLflow's own opt-out is set."""
    path = urllib.parse.unquote(urllib.parse.urlsplit(uri).path) if scheme == "file" else uri
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1"):
        if Path(path).exists() and not Path(path).is_dir():
            raise _fail(uri, "a file store is a folder, and this is a file")
        return
    db = Path(path.rstrip("/") or "mlruns").with_suffix(".db")
    raise _fail(uri, f"a file store (a folder of runs): MLflow 3 put the file backend in maintenance mode and "
                     f"refuses it; log to a database, e.g. --mlflow-uri {_shown(f'sqlite:///{db}')} (or set "
                     "MLFLOW_ALLOW_FILE_STORE=true)")


def _sqlite(uri: str) -> None:
    """The database file can be opened, is SQLite (or new, or empty) and takes a write."""
    name = sqlite_path(uri)
    if name in ("", ":memory:") or name.startswith("file:"):
        return
    try:
        _sqlite_file(uri, name)
    except OSError as exc:  # a name too long, a loop of links ...
        raise _fail(uri, f"cannot open {name}: {exc.strerror or exc}") from None


def _sqlite_file(uri: str, name: str) -> None:
    path = Path(name)
    if path.is_dir():
        raise _fail(uri, f"{name} is a folder, not a database file")
    if path.exists() and not path.is_file():
        raise _fail(uri, f"{name} is not a regular file (a device or a pipe), not a database")
    if not path.exists() and not path.parent.is_dir():
        why = "does not exist" if not path.parent.exists() else "is not a folder"
        raise _fail(uri, f"cannot create the database {name}: its folder {path.parent} {why}")
    created = not path.exists()
    if not created:
        try:
            with open(path, "rb") as fh:
                head = fh.read(len(_SQLITE_HEADER))
        except OSError as exc:
            raise _fail(uri, f"cannot open {name}: {exc.strerror or exc}") from None
        if head and head != _SQLITE_HEADER:
            raise _fail(uri, f"{name} is not an SQLite database (a corrupt or another kind of file)")
    try:
        _write_probe(path)
    except sqlite3.Error as exc:
        raise _fail(uri, _sqlite_problem(name, exc, created)) from None
    finally:
        if created:  # the probe's empty file: MLflow creates the database when it logs
            with contextlib.suppress(OSError):
                path.unlink()


def _write_probe(path: Path) -> None:
    """Read the schema, then write a table and roll it back: what logging a run needs of the file.
    """
    con = sqlite3.connect(path, timeout=PROBE_SECONDS, isolation_level=None)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute("CREATE TABLE rankwise_write_probe (x INTEGER)")
        finally:
            con.execute("ROLLBACK")
    finally:
        con.close()


def _sqlite_problem(name: str, exc: sqlite3.Error, created: bool) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return f"{name} is a corrupt SQLite database ({text})"
    if "locked" in text:
        return f"{name} is locked by another process (no write within {PROBE_SECONDS:g} s)"
    if "readonly" in text or "read-only" in text:
        return f"{name} cannot be written ({text}): a read-only file or folder"
    verb = "create" if created else "open"
    return f"cannot {verb} the database {name} for writing ({text})"


def _within(task, what: str, where: str, uri: str) -> None:
    """Run ``task`` (a connection) in a thread given :data:`PROBE_SECONDS` (a name lookup included).
    """
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            task()
            outcome.append(None)
        except Exception as exc:  # what the connection met: said below
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True, name="rankwise-mlflow-probe")
    worker.start()
    worker.join(PROBE_SECONDS + 0.5)
    if not outcome:
        raise _fail(uri, f"the {what} at {where} did not answer within {PROBE_SECONDS:g} s")
    exc = outcome[0]
    if exc is None:
        return
    exc = getattr(exc, "reason", exc)  # urllib's URLError wraps the socket's error
    if isinstance(exc, ConnectionRefusedError):
        why = "connection refused"
    elif isinstance(exc, TimeoutError) or "timed out" in str(exc):
        why = f"no answer within {PROBE_SECONDS:g} s"
    else:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    raise _fail(uri, f"cannot reach the {what} at {where}: {why}")


def _http_answer(uri: str) -> None:
    """Any HTTP answer of the server (its ``/health``, whatever the status); no answer raises."""
    import ssl
    import urllib.error
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # an answer is all that is asked
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_SECONDS, context=context).close()
    except urllib.error.HTTPError:
        return  # it answered


def _server(uri: str, scheme: str) -> None:
    parts = urllib.parse.urlsplit(uri)
    port = parts.port  # a bad port: refused by check_tracking_uri
    if not parts.hostname:
        raise _fail(uri, "names no host (e.g. http://127.0.0.1:5000)")
    if scheme in ("http", "https"):
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        where = f"{host}:{port or (443 if scheme == 'https' else 80)}"
        plain = urllib.parse.urlunsplit((scheme, where, parts.path, "", ""))  # no user or password in it
        _within(lambda: _http_answer(plain), "MLflow tracking server", where, uri)
    else:
        import socket

        address = (parts.hostname, port or _DATABASES[scheme])
        _within(lambda: socket.create_connection(address, timeout=PROBE_SECONDS).close(),
                f"{scheme} database server", f"{address[0]}:{address[1]}", uri)


def import_mlflow() -> Any:
    """MLflow itself, or an :class:`InputError` saying how to install it.

    Example:
        >>> import_mlflow().__name__
        'mlflow'
    """
    try:
        import mlflow
    except ImportError:
        raise InputError("MLflow is not installed: pip install 'rankwise[mlflow]'", field="mlflow") from None
    return mlflow


# MLflow's and its database migrations' loggers, whose INFO lines ("Creating initial MLflow database
# tables", "Context impl SQLiteImpl") a rankwise command would otherwise print on the caller's
# stderr
_CHATTY = ("mlflow", "alembic", "alembic.runtime.migration")


@contextlib.contextmanager
def borrowed_mlflow(mlflow: Any, tracking_uri: str | None, experiment: str | None) -> Iterator[None]:
    """Point MLflow at ``tracking_uri`` / ``experiment`` and quiet its INFO lines for the block;
    afterwards the caller's tracking URI, active experiment and logger levels are what they were.

    Example:
        >>> import mlflow
        >>> before = mlflow.get_tracking_uri()
        >>> with borrowed_mlflow(mlflow, "sqlite:////tmp/rankwise-doctest-borrow.db", None):
        ...     mlflow.get_tracking_uri()
        'sqlite:////tmp/rankwise-doctest-borrow.db'
        >>> mlflow.get_tracking_uri() == before
        True
    """
    import logging

    from mlflow.tracking import fluent
    from mlflow.tracking._tracking_service import utils

    uri_before = utils._tracking_uri  # noqa: SLF001 - MLflow keeps "set by the caller" only here
    env_before = os.environ.get("MLFLOW_TRACKING_URI")  # set_tracking_uri writes it too, for subprocesses
    experiment_before = fluent._active_experiment_id  # noqa: SLF001 - as above, for set_experiment
    levels = {name: logging.getLogger(name).level for name in _CHATTY}
    try:
        for name in _CHATTY:
            logging.getLogger(name).setLevel(logging.WARNING)
        if tracking_uri:
            mlflow.set_tracking_uri(tracking_uri)
        if experiment:
            mlflow.set_experiment(experiment)
        yield
    finally:
        if tracking_uri:
            mlflow.set_tracking_uri(uri_before)  # None: "not set" again (MLflow's env/default rule)
            if env_before is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = env_before
        if tracking_uri or experiment:
            fluent._active_experiment_id = experiment_before  # noqa: SLF001
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def check_tracking_uri(uri: str | None = None) -> str:
    """The tracking URI MLflow would log to (``uri``, else ``$MLFLOW_TRACKING_URI``, else MLflow's
    default), checked before any work; each way it cannot be logged to is an :class:`InputError` of
    one line: a file store (MLflow 3 refuses it: use ``sqlite:///PATH``), an SQLite file that cannot
    be created, opened or written, or is corrupt, a server that refuses or does not answer within
    :data:`PROBE_SECONDS`, a scheme MLflow does not know, MLflow not installed.

    Example:
        >>> check_tracking_uri("file:///tmp/mlruns")
        Traceback (most recent call last):
        ...
        rankwise.errors.InputError: <input>: MLflow tracking URI 'file:///tmp/mlruns': a file store (a folder of runs): MLflow 3 put the file backend in maintenance mode and refuses it; log to a database, e.g. --mlflow-uri sqlite:////tmp/mlruns.db (or set MLFLOW_ALLOW_FILE_STORE=true)
    """
    uri = str(uri) if uri else os.environ.get("MLFLOW_TRACKING_URI") or import_mlflow().get_tracking_uri()
    control = next((c for c in uri + urllib.parse.unquote(uri) if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:
        raise _fail(uri, f"holds a control character ({control!r})")
    if uri in ("databricks", "databricks-uc", "uc"):
        scheme = uri
    elif "://" in uri or uri.lower().startswith("file:"):
        scheme = uri.split(":", 1)[0].lower()
    else:
        scheme = ""  # a plain path: a file store
    try:
        urllib.parse.urlsplit(uri).port  # noqa: B018 - raises on a broken host or port
    except ValueError as exc:
        raise _fail(uri, f"is not a valid URI ({exc})") from None
    base = scheme.split("+", 1)[0]  # postgresql+psycopg2: the database's scheme
    if scheme in ("", "file"):
        _file_store(uri, scheme)
    elif scheme == "sqlite":
        _sqlite(uri)
    elif base in ("http", "https") or base in _DATABASES:
        _server(uri, base)
    elif scheme not in _schemes():
        known = ", ".join(sorted(s for s in _schemes() if s))
        raise _fail(uri, f"unknown scheme {scheme!r} (MLflow logs to: {known})")
    import_mlflow()
    return uri
