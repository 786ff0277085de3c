"""Line-by-line text reading with precise error locations, shared by the file readers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rankwise.errors import InputError


def read_bytes(path: str | Path) -> bytes:
    """Whole file as bytes; a missing, unreadable or empty file is an :class:`InputError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", source=p) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", source=p) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", source=p) from None
    if not data.strip():
        raise InputError("file is empty", source=p)
    return data


def iter_lines(data: bytes, source: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, decoded line)``; bytes that are not UTF-8 raise an error naming the line."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            yield number, raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"bytes that are not UTF-8 at column {exc.start + 1}", source=source, line=number
            ) from None


def parse_float(text: str, *, source, line: int, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not a number: {text!r}", source=source, line=line, field=field) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InputError(f"not a finite number: {text!r}", source=source, line=line, field=field)
    return value


def parse_int(text: str, *, source, line: int, field: str) -> int:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not an integer: {text!r}", source=source, line=line, field=field) from None
    if value != value or value != int(value):
        raise InputError(f"not an integer: {text!r}", source=source, line=line, field=field)
    return int(value)


def iter_json_lines(path: str | Path, *, objects_only: bool = True) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, parsed value)`` for each non-blank line of a JSON Lines file.

    Undecodable bytes, invalid JSON and (with ``objects_only``) non-objects raise an
    :class:`InputError` naming the file and line.
    """
    import json

    for number, line in iter_lines(read_bytes(path), path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", source=path, line=number) from None
        if objects_only and not isinstance(obj, dict):
            raise InputError("expected a JSON object", source=path, line=number)
        yield number, obj
