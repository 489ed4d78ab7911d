#!/usr/bin/env bash
# The data-parallel tests (ctest test_dist): tests/dist/dist_check under
# mpirun with 1, 2 and 3 ranks (--oversubscribe: more ranks than cores is
# fine here), as root or not.
#   tests/dist/run.sh <build>/tests <mpiexec>   (mpiexec "" = MPI not found)
set -uo pipefail
dir=$1
mpiexec=${2:-}
if [ -z "$mpiexec" ] || [ ! -x "$dir/dist_check" ]; then
    echo "test_dist: SKIPPED: MPI not found at configure time (scripts/deps.sh test installs" \
        "libopenmpi-dev openmpi-bin; then reconfigure)"
    exit 77
fi
args=(--oversubscribe)
[ "$(id -u)" = 0 ] && args+=(--allow-run-as-root)
# no ssh/rsh probing, no network interfaces beyond the machine; sanitizer
# builds: Open MPI's own allocations are not ours to report
export OMPI_MCA_plm=isolated OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
export OPENBLAS_NUM_THREADS=1
fail=0
run() { # run <np> <expect: ok|fail> <args...>
    local np=$1 expect=$2 out rc
    shift 2
    out=$(timeout 120 "$mpiexec" "${args[@]}" -np "$np" "$dir/dist_check" "$@" 2>&1)
    rc=$?
    if { [ "$expect" = ok ] && [ $rc -ne 0 ]; } || { [ "$expect" = fail ] && [ $rc -eq 0 ]; } ||
        [ $rc -eq 124 ]; then
        echo "test_dist: FAILED: -np $np dist_check $* (exit $rc)"
        echo "$out" | tail -40
        fail=1
    else
        echo "test_dist: ok: -np $np dist_check $* (exit $rc)"
        echo "$out" | grep -E "^np|timed out" | head -3
    fi
    LAST_OUT=$out
}
for np in 1 2 3; do
    run $np ok api
    run $np ok train 64
    run $np ok train 0
    run $np ok unused
done
run 4 ok train 64
run 2 ok train 64 mpi
run 2 ok fail 1
run 3 ok fail 1
run 2 ok fail 2
# a rank that stalls: the others give up after the timeout with a clear
# message (and mpirun ends every rank)
JITGRAD_DIST_TIMEOUT=3 run 2 fail hang
if ! grep -q "timed out after 3 s" <<<"$LAST_OUT"; then
    echo "test_dist: FAILED: the waiting rank did not report its timeout"
    echo "$LAST_OUT" | tail -20
    fail=1
fi
exit $fail
