"""Text reading shared by every file reader: one definition of a file and a line, precise error
locations.

A text input is UTF-8 (a byte-order mark at the start is dropped); lines end in LF, CRLF or CR;
bytes that are not UTF-8 are an error naming the line and column. Numbers are ASCII decimal: a score
is a finite float (``1``, ``-0.5``, ``1e3``), a grade a decimal integer within int64 (``2``, ``-1``,
``2.0``).
"""

from __future__ import annotations

import contextlib
import csv
import mmap
import os
import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankwise.data.compiled import HAS_CR, HAS_HIGH, byte_census
from rankwise.errors import InputError

BOM = b"\xef\xbb\xbf"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INT = re.compile(r"[+-]?[0-9]+(?:\.0*)?")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def read_bytes(path: str | Path) -> bytes:
    """Whole file as bytes; a missing, unreadable or empty file, or one of blank lines only (no
    rows), is an :class:`InputError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise open_error(exc, p) from None
    if not data or data == BOM:
        raise InputError("file is empty", source=p)
    if not _NON_BLANK.search(data, len(BOM) if data.startswith(BOM) else 0):  # (strip() would copy it)
        raise InputError("file has no rows: only blank lines", source=p)
    return data


_NON_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")  # what bytes.strip() keeps
MAP_AT_LEAST = 1 << 22  # bytes from which a file is memory-mapped rather than copied (read_lines)


def read_lines(path: str | Path, normalize=None) -> bytes | mmap.mmap:
    r""":func:`normalize_lines` of :func:`read_bytes`, with the same checks and errors, but a large
    file that needs no change (ASCII, LF line ends, no byte-order mark) is memory-mapped read-only
    instead of copied: Arrow's parser reads the pages straight from the OS cache.

    The result supports what the readers use of bytes: slicing (to bytes), ``find``, ``len`` and
    the buffer protocol. A file that cannot be mapped (a pipe, a special file) is read. As with any
    memory-mapped reader, a file another process truncates while it is parsed ends the process (the
    map is released once parsed: a fraction of a second); a file that only grows is read as it was.
    ``normalize``: what to do to the bytes of a file read, instead of :func:`normalize_lines`.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp(), "run.trec")
        >>> _ = path.write_bytes(b"q1 Q0 d1 1 2.5 s\r\n")
        >>> bytes(read_lines(path))
        b'q1 Q0 d1 1 2.5 s\n'
    """
    normalize = normalize or normalize_lines
    mapped = _map(path)
    if mapped is None:
        return normalize(read_bytes(path), path)
    mapped.census = byte_census(mapped)  # (one pass; the readers' checks of the bytes read it too)
    if mapped.census is not None:
        needs_change = bool(mapped.census & (HAS_CR | HAS_HIGH))
    else:
        import numpy as np

        needs_change = mapped.find(b"\r") >= 0 or np.frombuffer(mapped, np.uint8).max() >= 0x80
    if mapped[:len(BOM)] == BOM or needs_change or not _NON_BLANK.search(mapped):
        mapped.close()  # anything to check or change: the copying path, its errors and its words
        return normalize(read_bytes(path), path)
    return mapped


class MappedFile(mmap.mmap):
    """A read-only map of a file, with the flags of its :func:`~rankwise.data.compiled.byte_census`
    (``census``; None where the extension was not built)."""

    census: int | None = None


def release(data: bytes | mmap.mmap) -> bytes | None:
    """Unmap what :func:`read_lines` mapped, once the parse has copied what it keeps: None (read
    the file again if it is needed); bytes are kept as they are (a pipe cannot be read twice).
    A map a view still holds is left to the collector."""
    if not isinstance(data, mmap.mmap):
        return data
    with contextlib.suppress(BufferError):
        data.close()
    return None


def _map(path: str | Path) -> MappedFile | None:
    """A read-only map of a regular file of at least :data:`MAP_AT_LEAST` bytes, else None. A file
    that is not regular is never opened here: opening a named pipe and closing it unread would lose
    what its writer sends, and leave the reader that follows waiting."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size < MAP_AT_LEAST:
                return None
            return MappedFile(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None  # read_bytes names the problem


def open_error(exc: OSError, path: str | Path) -> InputError:
    """The one-line error for a file that cannot be opened or read (missing, a directory, a symlink
    loop ...).

    Example:
        >>> str(open_error(FileNotFoundError(2, "No such file or directory"), "run.trec"))
        'run.trec: file not found'
    """
    if isinstance(exc, FileNotFoundError):
        return InputError("file not found", source=path)
    if isinstance(exc, IsADirectoryError):
        return InputError("is a directory, expected a file", source=path)
    return InputError(f"cannot read file: {exc.strerror or exc}", source=path)


def _line_of(data: bytes, offset: int) -> tuple[int, int]:
    """(1-based line, 1-based byte column) of ``offset``, lines ending in LF, CRLF or CR."""
    prefix = data[:offset]
    line = prefix.count(b"\n") + prefix.count(b"\r") - prefix.count(b"\r\n") + 1
    start = max(prefix.rfind(b"\n"), prefix.rfind(b"\r")) + 1
    return line, offset - start + 1


def check_utf8(data: bytes, source: str | Path, *, first_line: int = 1, bom: bool = True) -> bytes:
    """``data`` without a leading byte-order mark; bytes that are not UTF-8 raise an error naming
    the line.

    For a piece of a file (whole lines, read in parts): ``first_line`` is the number of its first
    line, and ``bom=False`` keeps a mark at its start (only the file's first bytes may hold one to
    drop).
    """
    if bom and data.startswith(BOM):
        data = data[len(BOM):]
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line, column = _line_of(data, exc.start)
            raise InputError(f"bytes that are not UTF-8 at column {column}", source=source,
                             line=line + first_line - 1) from None
    return data


def decode_text(data: bytes, source: str | Path) -> str:
    """The text of a file (BOM dropped, line endings untouched); bytes that are not UTF-8 name their
    line."""
    return check_utf8(data, source).decode("utf-8")


def normalize_lines(data: bytes, source: str | Path, *, first_line: int = 1, bom: bool = True) -> bytes:
    """:func:`check_utf8`, then CRLF and CR line endings turned into LF (line numbers unchanged)."""
    data = check_utf8(data, source, first_line=first_line, bom=bom)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return data


def first_line(text: str) -> str:
    """The first non-blank line of ``text`` (lines end in LF, CRLF or CR)."""
    return next((line for line in re.split(r"\r\n|\r|\n", text) if line.strip()), "")


def iter_lines(data: bytes, source: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, decoded line)``; bytes that are not UTF-8 raise an error naming the
    line."""
    data = normalize_lines(data, source)
    for number, raw in enumerate(data.split(b"\n"), start=1):
        yield number, raw.decode("utf-8")


def parse_float(text: str, *, source, line: int | None, field: str) -> float:
    """A finite decimal number (``1``, ``-0.5``, ``1e3``); anything else names the line and field.

    Example:
        >>> parse_float("1e3", source="run", line=1, field="score")
        1000.0
    """
    if not _FLOAT.fullmatch(text):
        raise InputError(f"not a number: {_clip(text)!r}", source=source, line=line, field=field)
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise InputError(f"not a finite number (beyond the float range): {_clip(text)!r}",
                         source=source, line=line, field=field)
    return value


def parse_int(text: str, *, source, line: int | None, field: str) -> int:
    """A decimal integer within int64 (``2``, ``-1``, ``+3``, ``2.0``); anything else names the line
    and field.

    Example:
        >>> parse_int("2.0", source="qrels", line=1, field="relevance")
        2
    """
    if not _INT.fullmatch(text):
        raise InputError(f"not an integer: {_clip(text)!r}", source=source, line=line, field=field)
    value = int(text.split(".", 1)[0])
    if not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"integer out of range (beyond 64 bits): {_clip(text)!r}", source=source, line=line,
                         field=field)
    return value


def _clip(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def check_int_range(value: int, *, source, line: int | None, field: str) -> int:
    """``value`` if it fits int64, else an error naming the line and field."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise InputError(f"integer out of range (beyond 64 bits): {_clip(str(value))}", source=source,
                         line=line, field=field)
    return value


def json_id(value: Any, *, source, line: int | None, field: str) -> str:
    """An id from JSON: a string, or an integer (written in decimal); anything else is an error.

    Example:
        >>> json_id(7, source="run.jsonl", line=1, field="doc_id")
        '7'
    """
    if isinstance(value, str):
        if not value:
            raise InputError("empty id", source=source, line=line, field=field)
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    kind = "null" if value is None else {bool: "a boolean", float: "a float", list: "a list",
                                          dict: "an object"}.get(type(value), type(value).__name__)
    raise InputError(f"an id must be a string or an integer, got {kind}", source=source, line=line, field=field)


def json_loads(text: str, *, source, line: int | None):
    """``json.loads`` whose failures (bad JSON, nesting too deep, lone surrogates) name the line."""
    import json

    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", source=source,
                         line=exc.lineno if line is None else line) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", source=source, line=line) from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        check_surrogates(obj, source=source, line=line)
    return obj


def check_surrogates(obj: Any, *, source, line) -> None:
    """Refuse strings holding a lone surrogate (a ``\\ud800`` escape that is not half of a pair): no
    file or Arrow array can hold them."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InputError(f"a lone surrogate \\u{ord(item[exc.start]):04x} is not text",
                                 source=source, line=line) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def iter_json_lines(path: str | Path, *, objects_only: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` for each non-blank line of a JSON Lines file.

    Undecodable bytes, invalid JSON and (with ``objects_only``) non-objects raise an
    :class:`InputError` naming the file and line.
    """
    for number, line in iter_lines(read_bytes(path), path):
        if not line.strip():
            continue
        obj = json_loads(line, source=path, line=number)
        if objects_only and not isinstance(obj, dict):
            raise InputError("expected a JSON object", source=path, line=number)
        yield number, obj


def csv_reader(text: str, delimiter: str):
    """A :func:`csv.reader` over decoded text: CR, LF and CRLF end rows, fields of any length."""
    import io

    if csv.field_size_limit() < sys.maxsize // 2:
        csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=False)


def iter_csv_rows(text: str, delimiter: str, *, source) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(line where the row starts, fields)`` for every row, blank rows included; csv errors
    name the line."""
    reader = csv_reader(text, delimiter)
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"not valid CSV: {exc}", source=source, line=start) from None
        yield start, fields
        start = reader.line_num + 1
