"""Shared fixtures: where the shared test data lives."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from pathlib import Path

import pytest

from _jvm import jvm_options

# Under pytest-xdist (``make test``: as many workers as cores) each worker computes on one thread:
# PyTorch, FAISS (both through $RANKWISE_THREADS) and the BLAS under NumPy. With every core already
# running a worker, a second thread per worker only waits for a core and spins meanwhile (the
# README's page alone: 70 -> 64 CPU-seconds). The numbers do not move: the demo's 442 embeddings are
# bit-identical on one thread and on two. (Set before the workers import NumPy: this module is
# imported first, then the tests.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("RANKWISE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")


def _leave_now() -> None:
    """An xdist worker's last act: end the process without the interpreter's teardown. Its reports
    are with the controller by then (the channel closed before exit began), and the teardown only
    frees what the process is about to give back: 5-7 s at the end of every run with PyTorch,
    sentence-transformers, MLflow, LlamaIndex and Haystack loaded, with the controller waiting for
    it (``rankwise``'s own command line leaves the same way, cli/_base.py). Registered first, so it
    runs after every other exit handler."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


if os.environ.get("PYTEST_XDIST_WORKER"):
    atexit.register(_leave_now)

REPO = Path(__file__).resolve().parents[1]
# the public collections the suite reads (Cranfield and CISI in BEIR layout, trec_eval's test files)
# are carried in tests/fixtures; $RANKWISE_SHARED_DATA names another copy. Only trec_eval's source
# (to build the binary the conformance tests compare with) stays outside: $RANKWISE_TREC_EVAL_SRC,
# else ../shared/external/trec_eval-src.tar.gz.
SHARED_DATA = Path(os.environ.get("RANKWISE_SHARED_DATA") or REPO / "tests" / "fixtures")
TREC_EVAL_SRC = Path(os.environ.get("RANKWISE_TREC_EVAL_SRC")
                     or REPO.parent / "shared" / "external" / "trec_eval-src.tar.gz")


def need_trec_eval_source() -> Path:
    """trec_eval 10.0's source tarball, or the test's end: under CI a failure, elsewhere a skip
    saying how to get it (trec_eval's source is not carried in this repository)."""
    if TREC_EVAL_SRC.is_file():
        return TREC_EVAL_SRC
    message = (f"trec_eval 10.0's source not found at {TREC_EVAL_SRC}: set RANKWISE_TREC_EVAL_SRC to its tarball "
               "(https://github.com/usnistgov/trec_eval, tag v10.0)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``tests/fixtures`` (or $RANKWISE_SHARED_DATA): trec_eval's suite, Cranfield and CISI."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"test data not found at {SHARED_DATA} (tests/fixtures, or $RANKWISE_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="module")
def server():
    """A real Chat Completions server on loopback (tests/llm_server.py), one per test module."""
    from llm_server import running_server

    with running_server() as srv:
        yield srv


@pytest.fixture
def srv(server):
    """The module's LLM server, counters reset and faults cleared."""
    server.reset()
    server.configure(latency=0.0, slow_seconds=5.0, retry_after="1")
    return server


# The tests' JVMs: the client compiler only, the serial collector, and the class archive
# scripts/setup.sh --test writes (tests/_jvm.py says why).
TEST_JVM_OPTIONS = jvm_options()


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession (``local[2]``) for the whole run (one per xdist worker that runs Spark
    tests): test_spark.py, the in-process ``--engine spark`` CLI calls of test_spark_cli.py and the
    docs' Spark commands share it."""
    import rankwise.spark as rs

    s = rs.session("local[2]", conf={"spark.sql.shuffle.partitions": 3, "spark.ui.enabled": "false",
                                     "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "1g",
                                     "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS})
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture(scope="session", autouse=True)
def _private_caches(tmp_path_factory):
    """The embedding cache of this run in a temporary folder, not the user's ``~/.cache/rankwise``:
    no test sees an earlier run's embeddings. Under pytest-xdist the workers share it (the run's
    temporary root; SQLite in WAL mode, so concurrent writers wait), so a text the other worker
    embedded is not embedded again. (Not $RANKWISE_CACHE: it outranks a judge config file's cache,
    which test_llm_cli checks.)"""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent / "rankwise-cache"
        root.mkdir(exist_ok=True)
    else:
        root = tmp_path_factory.mktemp("rankwise-cache")
    saved = {k: os.environ.get(k) for k in ("RANKWISE_CACHE_DIR",)}
    os.environ.setdefault("RANKWISE_CACHE_DIR", str(root))
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value



# ---------------------------------------------------------------------------------- two workers,
# one finish `make test` runs `pytest -n 2 --dist loadgroup`, scheduled here: every test file is one
# group (one worker runs it whole, so a module's fixtures start once), except that the Spark tests
# form one group (one JVM per run, not one per worker), and the groups are handed out slowest first
# (measured with `--durations`), so that the two workers finish together rather than one idling
# while the other runs a long file last. (pytest-xdist's own loadgroup reads `xdist_group` marks by
# renaming node ids, which pytest 9.2 no longer allows.)
SLOWEST_FIRST = ["tests/docs/test_docs_commands.py", "spark", "tests/llm/test_local_llm.py", "tests/workflows/test_position_curve.py",
                 "tests/workflows/test_sweep.py", "tests/conformance/test_fuzz_inputs.py", "tests/data/test_traces.py", "tests/testsets/test_synth.py",
                 "tests/cli/test_exit.py", "tests/conformance/test_trec_eval_binary.py", "tests/llm/test_batch_api.py",
                 "tests/relevance/test_judge_faults.py", "tests/retrieval/test_llm_rerank.py", "tests/cli/test_sigterm.py",
                 "tests/cli/test_llm_cli.py", "tests/relevance/test_llm_judge.py", "tests/data/test_ranking.py",
                 "tests/cli/test_atomic_writes.py", "tests/cli/test_output_guard.py", "tests/relevance/test_utility.py"]
SPARK = ("tests/spark/test_spark.py", "tests/spark/test_spark_cli.py", "tests/docs/test_docs_commands.py::test_page_spark_commands")


# Files that load the same heavy libraries run with the docs' pages, on one worker: each would load
# them again on the other (sentence-transformers with PyTorch ~12 CPU-seconds, MLflow ~5, LlamaIndex
# and Haystack ~8), and the Kestrel chunks the README's demo embeds are then in the run's cache for
# the demo test and the others.
WITH_THE_DOCS = ("tests/retrieval/test_cross_encoder.py", "tests/retrieval/test_retrieval.py", "tests/workflows/test_demo.py",
                 "tests/retrieval/test_adapters_frameworks.py", "tests/integrations/test_integrations_mlflow.py",
                 "tests/integrations/test_integrations_docs.py")


def group_of(nodeid: str) -> str:
    """The group a test runs in: ``spark`` for the tests that start Spark, the docs' pages for the
    files that load what they load (``WITH_THE_DOCS``), else its file."""
    if nodeid.startswith(SPARK):
        return "spark"
    file = nodeid.split("::", 1)[0]
    return "tests/docs/test_docs_commands.py" if file in WITH_THE_DOCS else file


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The slowest groups first (a stable sort: a file's tests keep their order)."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: a run without pytest-xdist does not know the hook
def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: whole groups (``group_of``) to a worker, in collection order."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Groups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return Groups(config, log)
