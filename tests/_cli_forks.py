"""Run ``rankwise`` many times as real processes without paying the imports each time
(tests/cli/test_exit.py).

``python tests/_cli_forks.py ARGS_JSON RUNS OUTDIR``: one fresh interpreter imports the CLI (numpy,
pyarrow, click, the eval path) once, then forks ``RUNS`` children, two at a time; each child is the
``rankwise`` command line (``sys.argv``, ``main()`` with no arguments, as the console script calls
it), its stdout and stderr in ``OUTDIR/<n>.out`` / ``.err``. A child whose ``main()`` returned
instead of leaving the process would go through the interpreter's own teardown (where Arrow's thread
pools used to abort, rc -6); an ``atexit`` hook marks that in its stderr. Prints ``[[returncode,
"OUTDIR/<n>"], ...]`` as JSON.
"""

from __future__ import annotations

import atexit
import json
import os
import sys

TEARDOWN = "rankwise-test: interpreter teardown ran"


def _child(args: list[str], out: str) -> None:
    for fd, name in ((1, out + ".out"), (2, out + ".err")):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    atexit.register(lambda: print(TEARDOWN, file=sys.stderr, flush=True))
    sys.argv = ["rankwise", *args]
    from rankwise.cli import main

    main()
    sys.exit(0)  # main() must not return; if it does, leave as a process does: through the teardown


def run(args: list[str], runs: int, outdir: str) -> list[tuple[int, str]]:
    import rankwise.data.load  # noqa: F401
    import rankwise.metrics.engine  # noqa: F401
    from rankwise.cli import main  # noqa: F401  (imported once, before the forks)

    codes = []
    for i in range(0, runs, 2):
        children = []
        for j in range(i, min(i + 2, runs)):
            out = os.path.join(outdir, str(j))
            pid = os.fork()
            if pid == 0:
                _child(args, out)
            children.append((pid, out))
        for pid, out in children:
            codes.append((os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), out))
    return codes


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3])))
