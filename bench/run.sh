#!/usr/bin/env bash
# The benchmark suite (what `make bench` runs): builds what is missing, makes
# sure the Python extension in $JITGRAD_BUILD_DIR/python-venv matches the
# library, then runs bench/suite.py (jitgrad and PyTorch side by side, ratio
# tables, $JITGRAD_BUILD_DIR/bench/results.json, quick: results-quick.json)
# and, when matplotlib is importable, bench/chart.py (the chart next to it).
#   bash bench/run.sh                 full run (about 5-10 minutes)
#   BENCH_QUICK=1 bash bench/run.sh   smoke test (not a measurement)
# Environment: JITGRAD_BUILD_DIR (default ./build), JITGRAD_PYTHON (default
# /usr/bin/python3, the interpreter with PyTorch), BENCH_THREADS (e.g. "1,2").
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${JITGRAD_BUILD_DIR:-$ROOT/build}"
PY="${JITGRAD_PYTHON:-/usr/bin/python3}"
export JITGRAD_BUILD_DIR="$BUILD" JITGRAD_PYTHON="$PY"
export JITGRAD_CACHE_DIR="${JITGRAD_CACHE_DIR:-$BUILD/jg-cache}"

if [ ! -x "$BUILD/bench/roofline" ] || [ ! -f "$BUILD/libjitgrad.a" ]; then
    echo "== building ($BUILD/bench/roofline missing)"
    cmake -S "$ROOT" -B "$BUILD" >/dev/null
    cmake --build "$BUILD" -j"${JOBS:-2}"
fi

# The extension is rebuilt when the static library is newer than it.
venv="$BUILD/python-venv"
export JITGRAD_BENCH_PYTHON="$venv/bin/python"
stamp="$venv/.jitgrad-bench-stamp"
if [ ! -x "$venv/bin/python" ]; then
    "$PY" -m venv --system-site-packages "$venv"
fi
if [ ! -f "$stamp" ] || [ "$BUILD/libjitgrad.a" -nt "$stamp" ] ||
    ! "$venv/bin/python" -c 'import jitgrad' 2>/dev/null; then
    echo "== installing the Python extension into $venv"
    rm -rf "$ROOT/python/build"
    "$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation --no-deps \
        --force-reinstall "$ROOT/python"
    rm -rf "$ROOT/python/build"
    touch "$stamp"
fi

if [ "${BENCH_QUICK:-0}" != 0 ]; then
    export BENCH_RESULTS="${BENCH_RESULTS:-$BUILD/bench/results-quick.json}"
else
    export BENCH_RESULTS="${BENCH_RESULTS:-$BUILD/bench/results.json}"
fi
"$PY" "$ROOT/bench/suite.py"

if "$PY" -c 'import matplotlib' 2>/dev/null; then
    "$PY" "$ROOT/bench/chart.py" "$BENCH_RESULTS" "${BENCH_RESULTS%.json}.png" ||
        echo "# chart.py failed (rc=$?)"
else
    echo "# no chart: python3-matplotlib is not installed (make bench-chart installs it as root)"
fi
