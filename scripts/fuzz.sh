#!/usr/bin/env bash
# The differential fuzzer (fuzz/fuzz.py, docs/fuzzing.md) with the Python
# extension of the CMake build, in the venv scripts/test-python.sh makes.
#   scripts/fuzz.sh run -n 1000 --seed 0 --jobs 2      random programs
#   scripts/fuzz.sh minimize SEED -o repro.py          shrink a failure
#   scripts/fuzz.sh --install ...                      reinstall the extension first
#   env: JITGRAD_BUILD_DIR (default build/), JITGRAD_PYTHON (default /usr/bin/python3)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${JITGRAD_BUILD_DIR:-$root/build}
python=${JITGRAD_PYTHON:-/usr/bin/python3}
venv=$build/python-venv

install=0
if [ "${1:-}" = "--install" ]; then
    install=1
    shift
fi
if [ ! -f "$build/libjitgrad.a" ]; then
    echo "fuzz: $build/libjitgrad.a not found; run make first" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --system-site-packages "$venv"
    install=1
fi
if [ $install = 1 ] || ! "$venv/bin/python" -c 'import jitgrad' 2>/dev/null; then
    export JITGRAD_BUILD_DIR=$build
    rm -rf "$root/python/build"
    "$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation --no-deps \
        --force-reinstall "$root/python"
    rm -rf "$root/python/build"
fi
# compiled graphs of random programs get a cache of their own
export JITGRAD_CACHE_DIR=${JITGRAD_CACHE_DIR:-$build/jg-fuzz-cache}
exec "$venv/bin/python" "$root/fuzz/fuzz.py" "$@"
