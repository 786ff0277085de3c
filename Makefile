# rankwise: the two commands of the quick start, and a few more.
.PHONY: setup demo demo-llm test lint bench

setup:
	@scripts/setup.sh

# (PYTHONDONTWRITEBYTECODE= : bytecode kept, as Python does by default, where the environment turned it off)
demo: setup
	PYTHONDONTWRITEBYTECODE= .venv/bin/rankwise demo

# the LLM judge with no API key: a local llama.cpp server with Gemma 3 270M judges a slice of the demo's set
# (the first run builds llama-cpp-python once for this machine: 10+ minutes on 2 cores)
demo-llm: setup
	@scripts/setup.sh --local-llm
	PYTHONDONTWRITEBYTECODE= .venv/bin/rankwise demo --judge local

# the suite on $(TEST_WORKERS) processes (pytest-xdist): each test file whole on one worker, the Spark tests
# together on one, the files loading PyTorch / MLflow / LlamaIndex with the docs' pages on one, the slowest first,
# one compute thread per worker (tests/conftest.py); bytecode cached, as Python does by default, so the suite's
# many `rankwise` processes do not each compile the package again; the Spark tests' JVMs read the class archive
# `scripts/setup.sh --test` writes (tests/_jvm.py)
TEST_WORKERS ?= 2
test:
	@scripts/setup.sh --test
	PYTHONDONTWRITEBYTECODE= .venv/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup
	.venv/bin/ruff check src tests benchmarks examples conftest.py

lint: setup
	.venv/bin/ruff check src tests benchmarks examples conftest.py

bench: setup
	.venv/bin/python benchmarks/metrics_vs_peers.py
