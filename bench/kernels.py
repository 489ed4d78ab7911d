"""Kernel timings measured as a user would: the same script for jitgrad and
PyTorch (`import <lib> as torch`), f32, no grad unless the workload says
otherwise.

    python3 bench/kernels.py --lib torch   --threads 1
    build/python-venv/bin/python bench/kernels.py --lib jitgrad --threads 2
    ... --groups kernels,fused,mlp   --only relu,tanh   --quick

Groups:
  kernels  the issue's kernel table, forward only under no_grad
  fused    (a*b+c).relu().sum() forward + backward, 4M f32 leaves
  mlp      784-256-256-10 MLP, batch 64: forward, cross_entropy, backward and
           a plain SGD update (p -= lr * p.grad under no_grad)

Method: warm-up, then BATCHES batches of N calls (N calibrated so a batch
lasts about TARGET_BATCH_S); the figure is the median over batches of batch
time / N (time.perf_counter).  --quick: 3 short batches (smoke test only).

Output, one line per figure (bench/suite.py reads them):
  <lib> <workload> us=<median> threads=<n> min_us=.. max_us=.. iters_per_batch=.. batches=..
plus one `<lib> meta ...` line saying which thread control was available.
Thread count: <lib>.set_num_threads(n) when the module has it (else
thread_control=n/a); the caller also sets OMP/OPENBLAS/JITGRAD_NUM_THREADS."""

import argparse
import importlib
import os
import sys
import time

E1M = 1 << 20  # elements of the 1M kernels
SQ = 1024  # the 1024x1024 kernels
FUSED_N = 4 << 20  # (a*b+c).relu().sum() elements
MLP = (64, 784, 256, 256, 10)  # batch, in, hidden, hidden, classes
LR = 0.01


def measure(fn, batches, target):
    for _ in range(2):
        fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target / 4 or n >= (1 << 20):
            per = dt / n
            n = int(target / per) if per > 0 else n
            break
        n *= 2
    n = max(n, 1)
    per = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    per.sort()
    return per[len(per) // 2], per[0], per[-1], n


def kernel_workloads(torch):
    """name -> zero-argument callable (run under no_grad by the caller)."""
    torch.manual_seed(0)
    v = torch.randn(E1M)
    w = torch.randn(E1M)
    m = torch.randn(SQ, SQ)
    a256 = torch.randn(256, SQ)
    return {
        "add": lambda: v + w,
        "mul_scalar": lambda: v * 1.5,
        "matmul_256x1024x1024": lambda: torch.matmul(a256, m),
        "max_dim1_1024x1024": lambda: m.max(dim=1),
        "relu": lambda: torch.relu(v),
        "tanh": lambda: torch.tanh(v),
        "sum_all": lambda: v.sum(),
        "sigmoid": lambda: torch.sigmoid(v),
        "exp": lambda: torch.exp(v),
        "sum_dim0_1024x1024": lambda: m.sum(dim=0),
        "sum_dim1_1024x1024": lambda: m.sum(dim=1),
        "softmax_dim1_1024x1024": lambda: torch.softmax(m, dim=1),
        "log_softmax_dim1_1024x1024": lambda: torch.log_softmax(m, dim=1),
        "t_contiguous_1024x1024": lambda: m.t().contiguous(),
    }


def fused_workload(torch):
    torch.manual_seed(1)
    a, b, c = (torch.randn(FUSED_N, requires_grad=True) for _ in range(3))

    def step():
        (a * b + c).relu().sum().backward()
        a.grad = b.grad = c.grad = None

    return {"fused_relu_4M_fwd_bwd": step}


def mlp_workload(torch):
    torch.manual_seed(2)
    bsz, d0, d1, d2, d3 = MLP
    x = torch.randn(bsz, d0)
    target = torch.tensor([i % d3 for i in range(bsz)])
    params = []
    for fan_in, fan_out in ((d0, d1), (d1, d2), (d2, d3)):
        params.append((torch.randn(fan_in, fan_out) * (fan_in**-0.5)).requires_grad_())
        params.append(torch.zeros(fan_out).requires_grad_())
    w1, b1, w2, b2, w3, b3 = params

    def step():
        h = torch.relu(torch.matmul(x, w1) + b1)
        h = torch.relu(torch.matmul(h, w2) + b2)
        logits = torch.matmul(h, w3) + b3
        loss = torch.nn.functional.cross_entropy(logits, target)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= LR * p.grad
                p.grad = None

    return {"mlp_784_256_256_10_b64_sgd_step": step}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="module to import as torch (jitgrad or torch)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--groups", default="kernels", help="comma list of kernels,fused,mlp")
    ap.add_argument("--only", default="", help="comma list of workload names")
    ap.add_argument("--quick", action="store_true", help="3 short batches (smoke test)")
    args = ap.parse_args(argv)

    try:
        torch = importlib.import_module(args.lib)
    except ImportError as e:
        print(f"# kernels.py: cannot import {args.lib} ({e}); skipped", flush=True)
        return 0
    control = "n/a"
    if hasattr(torch, "set_num_threads"):
        torch.set_num_threads(args.threads)
        control = "set_num_threads"
    got = torch.get_num_threads() if hasattr(torch, "get_num_threads") else -1
    print(
        f"{args.lib} meta threads={args.threads} get_num_threads={got} thread_control={control} "
        f"version={getattr(torch, '__version__', '?')} pid={os.getpid()}",
        flush=True,
    )
    batches, target = (3, 0.002) if args.quick else (15, 0.02)
    only = set(filter(None, args.only.split(",")))
    makers = {"kernels": kernel_workloads, "fused": fused_workload, "mlp": mlp_workload}
    for group in filter(None, args.groups.split(",")):
        if group not in makers:
            ap.error(f"unknown group {group!r}")
        work = makers[group](torch)
        for name, fn in work.items():
            if only and name not in only:
                continue
            if group == "kernels":
                def run(fn=fn):
                    with torch.no_grad():
                        fn()
            else:
                run = fn
            med, lo, hi, n = measure(run, batches, target)
            print(
                f"{args.lib} {name} us={med * 1e6:.4g} threads={args.threads} "
                f"min_us={lo * 1e6:.4g} max_us={hi * 1e6:.4g} iters_per_batch={n} "
                f"batches={batches}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
