#!/usr/bin/env bash
# Runs every C test executable of a build (BUILD/tests/test_*) under
# valgrind memcheck and fails if any reports an error: reads of
# uninitialised memory in the release build, whose allocation caches hand
# out recycled blocks that the sanitizer build (caches off) never sees.
# Leaks are the sanitizer build's job (--leak-check=no here).
#   scripts/memcheck.sh [build-dir]        (what `make test-memcheck` runs)
#   env: JOBS (parallel runs, default 2)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
jobs=${JOBS:-2}

if ! command -v valgrind >/dev/null 2>&1; then
    echo "memcheck: valgrind not found; scripts/deps.sh test installs it" >&2
    exit 1
fi
shopt -s nullglob
tests=("$build"/tests/test_*)
if [ ${#tests[@]} -eq 0 ]; then
    echo "memcheck: no test executables in $build/tests (build first)" >&2
    exit 1
fi

# JITGRAD_MEMCHECK: tests with heavy arithmetic run the same code paths on
# less work here (uninitialised reads do not depend on the sizes)
export OPENBLAS_NUM_THREADS=1 JITGRAD_CACHE_DIR="$build/jg-cache" JITGRAD_MEMCHECK=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# one test: its log goes to $logs/<name>.log, a failure leaves <name>.fail
run_one() {
    local t=$1 name args=()
    name=$(basename "$t")
    case $name in test_dlopen | test_isa_clones) args=("$build/libjitgrad.so") ;; esac
    if (cd "$build" && valgrind --error-exitcode=9 -q --leak-check=no "$t" "${args[@]}") \
        >"$logs/$name.log" 2>&1; then
        echo "memcheck: $name ok"
    else
        echo "memcheck: $name FAILED"
        touch "$logs/$name.fail"
    fi
}
export -f run_one
export build logs
printf '%s\n' "${tests[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}

failed=0
for f in "$logs"/*.fail; do
    name=$(basename "$f" .fail)
    echo "== memcheck: $name" >&2
    tail -n 60 "$logs/$name.log" >&2
    failed=1
done
if [ $failed -ne 0 ]; then
    exit 1
fi
echo "memcheck: ${#tests[@]} test programs clean"
