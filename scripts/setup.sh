#!/usr/bin/env bash
# Set up rankwise's development environment in ./.venv (idempotent; re-runs only what changed).
#   scripts/setup.sh          Python environment with every extra (what `make demo` needs)
#   scripts/setup.sh --test   ... plus the headless Chromium the HTML-report tests drive and the Java
#                             runtime the Spark tests' local Spark needs
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.rankwise-installed

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  echo "setup: installing Python dependencies (first run takes a few minutes)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  # PyTorch CPU, pinned exactly: a looser pin pulls a multi-GB CUDA build.
  "$VENV/bin/python" -m pip install --quiet "torch==2.13.0"
  "$VENV/bin/python" -m pip install --quiet -e ".[all,dev]"
  echo "$want" > "$STAMP"
fi

if [ "${1:-}" = "--test" ] && ! { command -v cc >/dev/null 2>&1 && command -v make >/dev/null 2>&1; }; then
  # tests/test_trec_eval_binary.py builds trec_eval 10.0 from ../shared/external with make + a C compiler
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing gcc and make for the trec_eval binary test"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc make libc6-dev >/dev/null
  else
    echo "setup: gcc/make not found; install them (e.g. 'sudo apt-get install gcc make') for the trec_eval test" >&2
  fi
fi

if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium for the HTML report tests"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium not found; install it (e.g. 'sudo apt-get install chromium') for the browser tests" >&2
  fi
fi

if [ "${1:-}" = "--test" ] && ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's Java runtime for the Spark tests"
    apt-get update -qq >/dev/null
    jre=$(apt-cache search --names-only '^openjdk-(17|21)-jre-headless$' | cut -d' ' -f1 | sort | head -n1)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${jre:-default-jre-headless}" >/dev/null
  else
    echo "setup: java not found; install a Java runtime (e.g. 'sudo apt-get install openjdk-17-jre-headless')" \
      "for the Spark tests" >&2
  fi
fi
