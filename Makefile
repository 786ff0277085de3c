# rankwise: the two commands of the quick start, and a few more.
.PHONY: setup demo test lint bench

setup:
	@scripts/setup.sh

demo: setup
	.venv/bin/rankwise demo

# the suite on $(TEST_WORKERS) processes (pytest-xdist), each test file whole on one worker
TEST_WORKERS ?= 2
test:
	@scripts/setup.sh --test
	.venv/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile
	.venv/bin/ruff check src tests benchmarks

lint: setup
	.venv/bin/ruff check src tests benchmarks

bench: setup
	.venv/bin/python benchmarks/metrics_vs_peers.py
