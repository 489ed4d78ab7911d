"""The ratio chart of a bench/suite.py run (needs python3-matplotlib; the suite
itself does not).

    python3 bench/chart.py build/bench/results.json docs/performance.png

Left: every kernel's jitgrad/PyTorch time ratio at each thread count (below
the 1.0 line jitgrad is faster).  Right: the fused (a*b+c).relu().sum() and
the MLP SGD step against their bounds (time / bound, 1.0 = at the bound)."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        res = json.load(f)
    threads = res["meta"]["threads"]
    names = []
    for k in res["kernels"]:
        if k["name"] not in names:
            names.append(k["name"])
    ratio = {(k["name"], k["threads"]): k["ratio"] for k in res["kernels"]}

    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(13, 5.5), gridspec_kw={"width_ratios": [2.2, 1]}, constrained_layout=True
    )
    width = 0.8 / max(1, len(threads))
    for i, n in enumerate(threads):
        xs = [j + (i - (len(threads) - 1) / 2) * width for j in range(len(names))]
        ys = [ratio.get((name, n)) or float("nan") for name in names]
        ax.bar(xs, ys, width, label=f"{n} thread{'s' if n > 1 else ''}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("jitgrad time / PyTorch time (log scale, lower is better)")
    ax.set_title("Kernels, no grad, f32 (bench/kernels.py)")
    ax.legend()

    labels, groups = [], []
    for key, short in (
        ("fused", "fused 4M\nfwd+bwd"),
        ("fused_one_program", "fused 4M\none program"),
        ("mlp", "MLP step\nb64"),
    ):
        for e in res.get(key, []):
            if not e.get("bound_us"):
                continue
            labels.append(f"{short}\n{e['threads']}T")
            groups.append(
                [
                    (e.get(f) or float("nan")) / e["bound_us"]
                    for f in ("torch_py_us", "jitgrad_eager_us", "jitgrad_interp_us", "jitgrad_c_us")
                ]
            )
    impls = ["PyTorch", "jitgrad eager", "jitgrad interp", "jitgrad c"]
    w = 0.8 / len(impls)
    for i, impl in enumerate(impls):
        xs = [j + (i - (len(impls) - 1) / 2) * w for j in range(len(groups))]
        bx.bar(xs, [g[i] for g in groups], w, label=impl)
    bx.axhline(1.0, color="black", linewidth=0.8)
    bx.set_yscale("log")
    bx.set_xticks(range(len(labels)))
    bx.set_xticklabels(labels, fontsize=7)
    bx.set_ylabel("time / bound (log scale, lower is better)")
    bx.set_title("(a*b+c).relu().sum() vs memory, MLP vs sgemm", fontsize=10)
    bx.legend(fontsize=7)
    meta = res["meta"]
    fig.suptitle(
        f"jitgrad vs PyTorch, {meta['date']}, {meta['nproc']} cores ({meta['cpu']}), git {meta['git']}",
        fontsize=9,
    )
    fig.savefig(argv[2], dpi=90)
    print(f"chart: {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
