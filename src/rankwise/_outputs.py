"""Output files: checked before any work, so a command never writes over its input or a stranger's
file.

Every command that writes files (``eval-rag/judge --records``, ``compare --html/--plot``, ``run
--out``, ``demo --out`` ...) calls :func:`check_outputs` first. It refuses, with a one-line
:class:`InputError`:

* an output that is one of the inputs (same path or same file, symlinks resolved), or that lies
  inside an input folder (a corpus of .txt files), even with ``--force``;
* two outputs on one path, an output that is a directory, a read-only file, a folder we cannot
  create or write, a symlink that loops or points nowhere (on the path itself or a folder of it: a
  dangling link's target is never created), a path under ``/proc`` or ``/sys``
  (:func:`check_target`);
* an existing file that is not recognisably ours, unless ``force``. Ours: an empty file, an HTML
  report (generator tag), a PNG with our ``Software`` tag, per-case records, a chunks file, a RAG
  test set written by ``run --rag-out``, a demo summary, a ``sweep.json``, a position curve, a test
  set written by ``synth`` / ``import-testset`` / ``pool`` (its rows carry our ``provenance``), a
  Ragas or DeepEval export, and a run whose ``.chunks.jsonl`` sibling is ours.

OS errors while writing (a full disk) are turned into the same one-line error by the writers and, as
a last resort, by the CLI. The writing itself is :mod:`rankwise._atomic`'s: whole or not at all.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from rankwise.errors import InputError

__all__ = ["check_outputs", "check_output_folder", "check_target", "check_plot_path", "is_our_output", "HTML_GENERATOR",
           "PNG_SOFTWARE", "PLOT_TYPES"]

HTML_GENERATOR = '<meta name="generator" content="rankwise">'
PNG_SOFTWARE = "rankwise"
_HTML_PREFIX = b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
_CHUNK_KEYS = {"id", "doc_id", "start", "end", "text"}
_CONTEXT_KEYS = {"id", "text", "doc_id", "start", "end", "score"}
_CALL_KEYS = {"position", "query", "span_id", "trace_id", "meta", "chunks"}
_RAGAS_EXPORT_KEYS = {"id", "user_input", "reference", "reference_contexts", "reference_context_ids"}  # export-testset --to ragas
LABEL_SHEET_HEADER = b"system,query_id,rank,chunk_id,question,chunk_text,verdict,type,reason,annotator"
_CURVE_KEYS = {"accuracy", "counts", "intervals", "weights", "fits"}
_PROVENANCE_MARKS = ("plan", "imported_from", "pooled")  # synth / import-testset / pool
_EVALUATION_KEYS = {"context.span_id", "document_position", "label", "score", "explanation", "annotation_name",
                    "annotator_kind"}  # export-verdicts (data/traces/evaluations.EVALUATION_COLUMNS)


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # a symlink loop is no file: reading it gives the one-line error
        return False


def _inside(path: Path, folder: Path) -> bool:
    """``path`` (symlinks resolved) is ``folder`` or lies somewhere under it."""
    try:
        return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        return False


def _ours_by_rows(head: bytes) -> bool:
    """JSON Lines whose rows show they are ours: a test set we wrote (synth, import-testset, pool:
    our ``provenance``), its rejected samples, a Ragas export."""
    for line in head.split(b"\n")[:200]:
        try:
            obj = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, dict):
            continue
        if set(obj) in (_RAGAS_EXPORT_KEYS, _RAGAS_EXPORT_KEYS - {"id"}) or "pool_judged" in obj:
            return True
        prov = obj.get("provenance")
        if isinstance(prov, dict) and any(mark in prov for mark in _PROVENANCE_MARKS):
            return True
    return False


def _first_json_line(head: bytes):
    line = next((x for x in head.split(b"\n") if x.strip()), b"")
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def is_our_output(path: str | os.PathLike) -> bool:
    """True when ``path`` is empty or recognisably a file rankwise wrote (so rewriting it loses
    nothing).

    Example:
        >>> is_our_output("README.md")  # doctest: +SKIP
        False
    """
    p = Path(path)
    try:
        if not p.is_file():
            return False
        size = p.stat().st_size
        if size == 0:
            return True
        with open(p, "rb") as fh:
            head = fh.read(1 << 16)
            tail = b""
            if (head.startswith(_HTML_PREFIX) or head.startswith(b"PAR1")) and size > len(head):
                fh.seek(max(0, size - (1 << 18)))
                tail = fh.read()
    except OSError:
        return False
    if head.startswith(b"<!DOCTYPE html>"):
        return HTML_GENERATOR.encode() in head or (head.startswith(_HTML_PREFIX) and b'id="doc-texts"' in head + tail)
    if head.startswith(b"PAR1"):  # export-verdicts --phoenix X.parquet: its columns are named in the footer
        footer = (head + tail)[-(1 << 18):]
        return all(key.encode() in footer for key in _EVALUATION_KEYS)
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return b"Software\x00" + PNG_SOFTWARE.encode() in head
    if head.startswith(b'{\n  "generator": "rankwise'):
        return True  # sweep.json
    if head.startswith(b"{"):
        obj = _first_json_line(head)
        if not isinstance(obj, dict):
            try:  # a whole JSON document (demo summary) longer than one line
                obj = json.loads(head) if size <= len(head) else None
            except (ValueError, RecursionError):
                obj = None
        if isinstance(obj, dict):
            if "id" in obj and isinstance(obj.get("chunks"), list):
                return True  # per-case records
            if set(obj) == _CHUNK_KEYS:
                return True  # chunks written by `rankwise run`
            if set(obj) == _EVALUATION_KEYS:
                return True  # document evaluations written by `rankwise export-verdicts`
            contexts = obj.get("retrieved_contexts")
            if isinstance(contexts, list) and contexts and all(
                    isinstance(c, dict) and set(c) == _CONTEXT_KEYS for c in contexts):
                return True  # `rankwise run --rag-out`
            calls = obj.get("calls")
            if "retrieved_contexts" not in obj and isinstance(calls, list) and calls and all(
                    isinstance(c, dict) and set(c) <= _CALL_KEYS and isinstance(c.get("chunks"), list)
                    and all(isinstance(x, dict) and set(x) == _CONTEXT_KEYS for x in c["chunks"]) for c in calls):
                return True  # a test set with retrieval calls (import-traces, write_trace_testset)
            if {"settings", "winner", "mean"} <= set(obj):
                return True  # demo summary.json
            if set(obj) >= _CURVE_KEYS:
                return True  # position-curve --out
        if _ours_by_rows(head):
            return True
    if head.startswith(b"[") and b'"reference_spans"' in head and b'"expected_output"' in head:
        return True  # export-testset --to deepeval
    if head.startswith(LABEL_SHEET_HEADER):
        return True  # sample-labels (analysis/label_sample.SHEET_COLUMNS)
    chunks = p.with_name(p.name + ".chunks.jsonl")
    return chunks.is_file() and is_our_output(chunks)  # a run written by `rankwise run` with its chunks


_SYSTEM_TREES = ("/proc", "/sys")  # the kernel's files: nothing written there is a file


def _refuse_link(path: Path, option: str) -> None:
    """A looping symlink, or one pointing nowhere, on the way to ``path`` (the path itself or a
    folder of it)."""
    for p in (path, *path.parents):
        try:
            os.stat(p)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError("is a symlink loop (links pointing back to each other); give another path or "
                                 "remove the links", source=path, field=option) from None
            if os.path.islink(p):
                where = "" if p == path else f" (its folder {p})"
                raise InputError(f"is a symlink{where} to {os.readlink(p)}, which does not exist; rankwise does "
                                 f"not write through a dangling link: give the file itself or remove the link",
                                 source=path, field=option) from None
            continue
        return  # the nearest existing part: its own checks follow


def _refuse_system(path: Path, option: str) -> str:
    """``path`` (as given, or with its links resolved) must not lie under /proc or /sys; a device or
    a pipe reached through them (``/dev/stdout``) is written as it is. Returns the resolved path."""
    real = os.path.realpath(path)
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode) and not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        special = False
    for tree in _SYSTEM_TREES:
        for where in (os.path.abspath(path), None if special else real):
            if where is not None and (where == tree or where.startswith(tree + "/")):
                raise InputError(f"is under {tree} (the kernel's files, not a place to write); give a path "
                                 f"elsewhere", source=path, field=option)
    return real


def check_target(path: str | os.PathLike, option: str) -> None:
    """Refuse (one-line :class:`InputError` naming ``option``) a path no file can be written to: a
    looping or dangling symlink, a directory, a read-only file or folder, a path under ``/proc`` or
    ``/sys``.

    Example:
        >>> check_target("/proc/self/report.html", "--html")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        rankwise.errors.InputError: /proc/self/report.html: option --html: is under /proc ...
    """
    path = Path(path)
    _refuse_link(path, option)
    real = _refuse_system(path, option)
    if path.is_dir():
        raise InputError("is a directory; give a file name", source=path, field=option)
    if path.is_file() and not os.access(path, os.W_OK):
        raise InputError("is read-only; make it writable or give another file", source=path, field=option)
    _check_folder(Path(real) if path.is_symlink() else path, option)


def _check_folder(path: Path, option: str) -> None:
    """The nearest existing folder of ``path`` must be a folder we may write in."""
    parent = path.parent if str(path.parent) else Path(".")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise InputError(f"cannot write here: {probe} is not a folder", source=path, field=option)
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"cannot write here: no permission to write in {probe}", source=path, field=option)


def check_outputs(outputs: Mapping[str, str | os.PathLike | None],
                  inputs: Iterable[str | os.PathLike | None] = (), *, force: bool = False) -> None:
    """Refuse (one-line :class:`InputError`) outputs that would overwrite an input, a directory, a
    file that is not ours (unless ``force``), or that go where we cannot write.

    ``outputs`` maps the option (``--html``) to its path; ``None`` paths are skipped.

    Example:
        >>> check_outputs({"--html": "report.html"}, ["qrels.txt", "run.trec"])  # doctest: +SKIP
    """
    ins = [Path(p) for p in inputs if p is not None]
    seen: dict[Path, str] = {}
    for option, value in outputs.items():
        if value is None:
            continue
        path = Path(value)
        _refuse_link(path, option)
        for src in ins:
            if _same(path, src):
                raise InputError(f"{option} would write over the input {src}; choose another file",
                                 source=path, field=option)
            if _inside(path, src):
                raise InputError(f"{option} would write into the input folder {src}; choose a file outside it",
                                 source=path, field=option)
        key = path.resolve()
        if key in seen:
            raise InputError(f"{option} and {seen[key]} name the same file", source=path, field=option)
        seen[key] = option
        check_target(path, option)
        if path.exists() and not force and not is_our_output(path):
            raise InputError("exists and is not a rankwise output; pass --force to overwrite it",
                             source=path, field=option)


def check_output_folder(folder: str | os.PathLike, option: str, files: Iterable[str | os.PathLike],
                        inputs: Iterable[str | os.PathLike | None] = (), *, force: bool = False) -> None:
    """An output folder (``demo --out``, ``sweep --out``): not a file, not an input, not inside an
    input folder; then :func:`check_outputs` on the ``files`` in it we would rewrite.

    Example:
        >>> check_output_folder("rankwise-sweep", "--out", [], ["corpus/"])  # doctest: +SKIP
    """
    path = Path(folder)
    _refuse_link(path, option)
    _refuse_system(path, option)
    if path.exists() and not path.is_dir():
        raise InputError("exists and is not a folder", source=path, field=option)
    _check_folder(path / "file", option)  # the folder, or the nearest one it would be created in
    for src in (Path(p) for p in inputs if p is not None):
        if _same(path, src) or _inside(path, src):
            raise InputError(f"{option} would write into a folder holding the input {src}; choose another "
                             f"folder", source=path, field=option)
    check_outputs({f"{option} ({Path(p).name})": p for p in files if os.path.lexists(p)}, inputs, force=force)


PLOT_TYPES = (".png",)


def check_plot_path(path: str | os.PathLike | None, option: str = "--plot") -> None:
    """A plot goes to a PNG file: any other type is refused (one line naming ``option``) before any
    work.

    Example:
        >>> check_plot_path("curve.png")
        >>> check_plot_path("curve.txt")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        rankwise.errors.InputError: curve.txt: field '--plot': unsupported image type '.txt'; ...
    """
    if path is None:
        return
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_TYPES:
        raise InputError(f"unsupported image type {suffix or '(no extension)'!r}; {option} writes "
                         f"{', '.join(t.lstrip('.').upper() for t in PLOT_TYPES)} images: give a name ending in "
                         f"{' or '.join(PLOT_TYPES)}", source=path, field=option)
