#!/usr/bin/env bash
# Data-parallel step time at 1 and 2 processes, equal global batch, for the
# MLP and the transformer (make bench-dist; docs/performance.md,
# "Data-parallel training").  Prints a table; env BENCH_QUICK=1: few steps.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${JITGRAD_BUILD_DIR:-$root/build}
py=$build/python-venv/bin/python
bash "$root/scripts/test-python.sh" --run -c \
    'import jitgrad.distributed as d; assert d.is_available(), "built without MPI"'
flags=(--oversubscribe)
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader OPENBLAS_NUM_THREADS=1 JITGRAD_NUM_THREADS=1
steps=30
[ "${BENCH_QUICK:-0}" = 1 ] && steps=5
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for model in mlp transformer; do
    mpirun "${flags[@]}" -np 1 "$py" "$root/bench/dist/ddp_bench.py" $model \
        --steps $steps >>"$out"
    for mb in 25 0.25; do # one bucket; several (overlap)
        mpirun "${flags[@]}" -np 2 "$py" "$root/bench/dist/ddp_bench.py" $model \
            --steps $steps --bucket-mb $mb >>"$out"
    done
done
"$py" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
one = {r["model"]: r for r in rows if r["np"] == 1}
print("| model | params (MiB) | processes | buckets | step (ms) | speedup | efficiency | reduction "
      "span (ms) | exposed after backward (ms) | hidden | all-reduce on paper, 10 / 100 Gbit/s (ms) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    b = one[r["model"]]
    s = b["step_ms"] / r["step_ms"]
    n, nb = r["np"], r["param_bytes"]
    ring = 2 * (n - 1) / n * nb * 8  # bits a ring all-reduce moves per rank
    gath = (n - 1) * nb * 8          # bits the deterministic gather receives per rank
    paper = (f"ring {ring / 10e9 * 1e3:.2f} / {ring / 100e9 * 1e3:.3f}; "
             f"gather {gath / 10e9 * 1e3:.2f} / {gath / 100e9 * 1e3:.3f}")
    print(f"| {r['model']} | {nb / 2**20:.2f} | {n} | {r['buckets']} | {r['step_ms']:.2f} | {s:.2f} | "
          f"{s / n:.0%} | {r['reduce_span_ms']:.2f} | {r['reduce_wait_ms']:.2f} | "
          f"{r['hidden']:.0%} | {paper} |")
PY
