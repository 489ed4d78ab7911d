#!/usr/bin/env bash
# Before/after figures in one run: the same workloads on a baseline checkout's
# build, on this checkout's build and on PyTorch, interleaved (rounds
# alternate between them), so that both sides see the same machine load.
#   bash bench/compare.sh BASE_ROOT [ROUNDS]
# BASE_ROOT: another checkout (git archive REV | tar -x -C DIR) built with
# cmake in BASE_ROOT/build; both builds need python-venv (bench/run.sh makes
# it).  Workloads: kernels.py's tanh and matmul_256x1024x1024 at 1 and 2
# threads; bench/chains' tanh chains (16 steps, fwd and fwd+bwd, eager /
# interp / c); the GPT training step eagerly (examples/gpt/train.py, default
# config, 30 steps, builtin attention, 1 thread).  Prints raw lines tagged
# "base" / "new" / "torch" and the round; take medians over rounds.
set -euo pipefail
B="$(cd "$1" && pwd)"
N="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
R="${2:-3}"
export JITGRAD_CACHE_DIR="${JITGRAD_CACHE_DIR:-$N/build/jg-cache}"
py_of() {
    case $1 in
    base) echo "$B/build/python-venv/bin/python" ;;
    new) echo "$N/build/python-venv/bin/python" ;;
    torch) echo "${JITGRAD_PYTHON:-/usr/bin/python3}" ;;
    esac
}
th() { env OMP_NUM_THREADS="$1" OPENBLAS_NUM_THREADS="$1" JITGRAD_NUM_THREADS="$1" "${@:2}"; }
echo "== start $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1 /proc/loadavg)"
for t in 1 2; do
    for r in $(seq "$R"); do
        for lib in base new torch; do
            l=jitgrad
            [ "$lib" = torch ] && l=torch
            th "$t" "$(py_of $lib)" "$N/bench/kernels.py" --lib "$l" --threads "$t" \
                --groups kernels --only tanh,matmul_256x1024x1024 | grep -v ' meta ' |
                sed "s/^/$lib r$r /"
        done
    done
done
for r in $(seq "$R"); do
    for lib in base new; do
        root=$N
        [ "$lib" = base ] && root=$B
        th 1 "$root/build/bench/chains" 100000 tanh | grep -E '^ *tanh' | sed "s/^/$lib r$r /"
    done
done
for r in $(seq "$R"); do
    for lib in base new torch; do
        extra=()
        [ "$lib" = torch ] && extra=(--torch)
        th 1 "$(py_of $lib)" "$N/examples/gpt/train.py" "${extra[@]}" --quiet --steps 30 \
            --threads 1 --compile none --attn builtin 2>&1 | tail -1 | sed "s/^/$lib r$r /"
    done
done
echo "== end $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1 /proc/loadavg)"
