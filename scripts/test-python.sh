#!/usr/bin/env bash
# Builds the Python extension against the CMake build and runs its pytest
# suite, in a venv under the build directory (reused between runs).
#   scripts/test-python.sh [pytest args] [test_x.py ...]   (files under python/tests:
#                                                    only those; none: the whole suite)
#   scripts/test-python.sh --run script.py [args]   (the same venv, runs a script
#                                                    from the repository root)
#   env: JITGRAD_BUILD_DIR (default build/), JITGRAD_PYTHON (default /usr/bin/python3)
# Offline: pip installs with --no-index --no-build-isolation, using Debian's
# setuptools/wheel/pytest/numpy (and python3-torch, when present, as the
# reference the comparison tests check against; without it they skip).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${JITGRAD_BUILD_DIR:-$root/build}
python=${JITGRAD_PYTHON:-/usr/bin/python3}
venv=$build/python-venv

if [ ! -f "$build/libjitgrad.a" ]; then
    echo "test-python: $build/libjitgrad.a not found; run make first" >&2
    exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --system-site-packages "$venv"
fi
export JITGRAD_BUILD_DIR=$build
export JITGRAD_WERROR=1 # the project's own builds treat warnings as errors
export JITGRAD_CACHE_DIR=${JITGRAD_CACHE_DIR:-$build/jg-cache}
# a fresh build every time: the static library may have changed
rm -rf "$root/python/build"
"$venv/bin/python" -m pip install --quiet --no-index --no-build-isolation --no-deps \
    --force-reinstall "$root/python"
rm -rf "$root/python/build"
if [ "${1:-}" = --run ]; then
    shift
    cd "$root"
    exec "$venv/bin/python" "$@"
fi
cd "$root/python/tests"
# Test files or folders among the arguments (test_x.py, test_x.py::name):
# run those; otherwise the whole suite.
for a in "$@"; do
    case "$a" in
    -*) ;;
    *) if [ -e "${a%%::*}" ]; then
        exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
    fi ;;
    esac
done
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .
