"""A folder nobody can write into, root included, for the tests of unwritable outputs: a non-root
run takes the write bits away (mode 0555); a root run, which writes through any mode, bind-mounts
the folder onto itself read-only (the kernel refuses every write with EROFS), so these tests run
where the suite runs — as root in CI — instead of being skipped there."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def read_only_folder(folder: Path) -> Iterator[Path]:
    """``folder`` (created) unwritable for the block, writable again after it."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            yield folder
        finally:
            folder.chmod(0o755)
        return
    for args in (["mount", "--bind", str(folder), str(folder)], ["mount", "-o", "remount,bind,ro", str(folder)]):
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode:
            subprocess.run(["umount", str(folder)], capture_output=True)
            pytest.fail(f"root cannot make {folder} read-only ({' '.join(args)}: {done.stderr.strip()}); "
                        "the unwritable-output tests need a read-only bind mount when run as root")
    try:
        probe = folder / ".probe"
        with pytest.raises(OSError):
            probe.write_text("x")
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True, check=True)
