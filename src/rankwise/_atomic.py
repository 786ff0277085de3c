"""Every file rankwise writes is written whole or not at all.

:func:`atomic_write` writes into a temporary file in the target's folder, flushes and fsyncs it,
then renames it over the target (``os.replace``: a reader, a crash or a signal sees the old file or
the new one, never half of one). On any failure the temporary file is removed and the old file is
left as it was. Ctrl-C and SIGTERM are deferred to the end of the write
(:func:`rankwise._signals.signals_deferred`) and then take effect: the command line exits 130 / 143
with the file complete. A target that is a symlink to a file is written through (the link stays); a
device or a pipe (``/dev/full``, ``/dev/stdout``) is written directly, as it cannot be replaced.
:func:`atomic_write_text` and :func:`atomic_write_bytes` are the one-call forms.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rankwise._signals import signals_deferred

__all__ = ["atomic_write", "atomic_write_text", "atomic_write_bytes", "TEMP_SUFFIX"]

TEMP_SUFFIX = ".rankwise-tmp"


@functools.cache
def _umask() -> int:
    """The process's umask (read once: setting it to read it is not thread-safe)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _target(path: Path) -> Path:
    """Where the bytes go: a symlink's file (the link is kept), else the path itself."""
    if path.is_symlink():
        return Path(os.path.realpath(path))
    return path


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO[Any]]:
    """A file object (``mode`` ``"w"`` or ``"wb"``) whose content replaces ``path`` when the block
    ends without an error (the folder must exist). Signals are deferred meanwhile.

    Example:
        >>> import tempfile, pathlib
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "records.jsonl"
        >>> with atomic_write(out) as fh:
        ...     _ = fh.write('{"id": "q1"}\\n')
        >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
        ('{"id": "q1"}\\n', ['records.jsonl'])
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write writes whole files (mode 'w' or 'wb'), not {mode!r}")
    binary = mode == "wb"
    with signals_deferred():
        try:
            st = os.stat(path)  # (through links)
        except OSError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):  # a device or a pipe: nothing to replace
            with open(path, mode, **({} if binary else {"encoding": encoding, "newline": newline})) as fh:
                yield fh
            return
        target = _target(Path(path))
        folder = target.parent
        import tempfile

        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=folder)
        try:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
            with open(fd, mode, **({} if binary else {"encoding": encoding, "newline": newline})) as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _sync_folder(folder)


def _sync_folder(folder: Path) -> None:
    """The rename itself on disk (best effort: some file systems cannot open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically; returns the path.

    Example:
        >>> import tempfile, pathlib
        >>> p = atomic_write_text(pathlib.Path(tempfile.mkdtemp()) / "sweep.json", "{}\\n")
        >>> p.read_text()
        '{}\\n'
    """
    with atomic_write(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; returns the path.

    Example:
        >>> import tempfile, pathlib
        >>> atomic_write_bytes(
        ...     pathlib.Path(tempfile.mkdtemp()) / "plot.png", b"\\x89PNG"
        ... ).read_bytes()
        b'\\x89PNG'
    """
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    return Path(path)
