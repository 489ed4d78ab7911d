#!/usr/bin/env bash
# Eager-mode benchmark: jitgrad (bench/eager_ops.c) against PyTorch
# (bench/torch_eager.py) and a plain-C memory-bandwidth reference, then a
# table of ratios.  Also runs build/bench/compile_overhead when it exists.
#   bash bench/run.sh            (what `make bench` runs)
# Environment: JITGRAD_BUILD_DIR (default ./build), JITGRAD_PYTHON (default
# /usr/bin/python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${JITGRAD_BUILD_DIR:-$ROOT/build}"
PY="${JITGRAD_PYTHON:-/usr/bin/python3}"
export OPENBLAS_NUM_THREADS=1 # single threaded everywhere, like torch below

if [ ! -x "$BUILD/bench/eager_ops" ]; then
    echo "== building ($BUILD/bench/eager_ops missing)"
    make -C "$ROOT" build
fi

OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "== $BUILD/bench/eager_ops"
"$BUILD/bench/eager_ops" | tee -a "$OUT"

echo "== $PY bench/torch_eager.py"
if [ -x "$PY" ] || command -v "$PY" >/dev/null 2>&1; then
    "$PY" "$ROOT/bench/torch_eager.py" | tee -a "$OUT" || echo "# torch_eager.py failed (rc=$?)"
else
    echo "# $PY not found; PyTorch comparison skipped"
fi

if [ -x "$BUILD/bench/compile_overhead" ]; then
    echo "== $BUILD/bench/compile_overhead"
    (cd "$BUILD" && "$BUILD/bench/compile_overhead") || echo "# compile_overhead failed (rc=$?)"
fi

# The table: medians, jitgrad/torch, and the 1M case against the bandwidth
# bound.  Lines are `<impl> <workload> <head>=<value> ...`.
echo
awk '
function head(line,   f) { split(line, f, "="); return f[2] + 0 }
$1 == "jitgrad" || $1 == "torch" || $1 == "cref" {
    split($3, kv, "="); unit[$2] = kv[1]; val[$1, $2] = kv[2] + 0; seen[$2] = 1
    if (!($2 in order)) { order[$2] = ++n; names[n] = $2 }
}
END {
    printf "%-28s %-10s %12s %12s %14s\n", "workload", "unit", "jitgrad", "torch", "jitgrad/torch"
    for (i = 1; i <= n; i++) {
        w = names[i]
        if (!(("jitgrad", w) in val)) continue
        j = val["jitgrad", w]
        if (("torch", w) in val) {
            t = val["torch", w]
            printf "%-28s %-10s %12.4g %12.4g %14.3f\n", w, unit[w], j, t, (t > 0 ? j / t : 0)
        } else {
            printf "%-28s %-10s %12.4g %12s %14s\n", w, unit[w], j, "-", "-"
        }
    }
    big = "qkk_f32x1048576"
    if ((("jitgrad", big) in val) && (("cref", big "_bound") in val)) {
        printf "\n%s forward+backward against plain C (7 reads + 5 writes = 48 MiB of traffic):\n", big
        printf "  %-34s %10.4g us\n", "jitgrad", val["jitgrad", big]
        if (("torch", big) in val)
            printf "  %-34s %10.4g us\n", "torch", val["torch", big]
        printf "  %-34s %10.4g us  (jitgrad / it = %.2f)\n", "C loops, one per op (cref)",
               val["cref", big "_loops"], val["jitgrad", big] / val["cref", big "_loops"]
        printf "  %-34s %10.4g us  (jitgrad / it = %.2f)\n", "bandwidth bound (bytes / best GB/s)",
               val["cref", big "_bound"], val["jitgrad", big] / val["cref", big "_bound"]
    }
    if (("jitgrad", "chain100_f32x16") in val)
        printf "\nchain target: < 0.5 us per op; jitgrad %.3g us per op (%s)\n",
               val["jitgrad", "chain100_f32x16"],
               (val["jitgrad", "chain100_f32x16"] < 0.5 ? "met" : "missed")
}' "$OUT"
