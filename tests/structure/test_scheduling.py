"""The suite's scheduling (tests/conftest.py): every group it names exists, and the Spark tests form
one group."""

from __future__ import annotations

from conftest import REPO, SLOWEST_FIRST, SPARK, WITH_THE_DOCS, group_of


def test_every_group_named_slowest_first_exists():
    stale = [name for name in SLOWEST_FIRST if name != "spark" and not (REPO / name).is_file()]
    stale += [name for name in WITH_THE_DOCS if not (REPO / name).is_file()]
    assert not stale, f"tests/conftest.py SLOWEST_FIRST names files that do not exist: {stale}"
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)


def test_spark_tests_share_one_group_and_the_rest_go_by_file():
    assert {group_of(n) for n in ("tests/spark/test_spark.py::test_a", "tests/spark/test_spark_cli.py::test_b[x]",
                                   "tests/docs/test_docs_commands.py::test_page_spark_commands_run_as_shown[README.md]")} \
        == {"spark"}
    assert group_of("tests/docs/test_docs_commands.py::test_page_commands_run_as_shown[README.md]") \
        == "tests/docs/test_docs_commands.py"
    assert group_of("tests/spark/test_spark_lazy.py::test_pyspark_is_imported_only_when_spark_is_used") \
        == "tests/spark/test_spark_lazy.py"
    assert group_of("src/rankwise/data/finite.py::rankwise.data.finite") == "src/rankwise/data/finite.py"
    assert all((REPO / p.split("::")[0]).is_file() for p in SPARK)


def test_files_loading_what_the_docs_load_run_with_the_docs():
    assert group_of("tests/retrieval/test_cross_encoder.py::test_x") == group_of("tests/workflows/test_demo.py::test_y") \
        == group_of("tests/docs/test_docs_commands.py::test_page_commands_run_as_shown[README.md]") \
        == "tests/docs/test_docs_commands.py"
    assert not set(WITH_THE_DOCS) & set(SLOWEST_FIRST)  # ordered by their group
