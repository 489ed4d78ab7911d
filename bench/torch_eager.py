"""The workloads of bench/eager_ops.c in PyTorch eager mode, same method and
output format (`torch <workload> key=value ...`).  Run with /usr/bin/python3
(Debian's python3-torch); prints a message and exits 0 when torch is missing.

Method: warm-up, then 15 batches of N iterations (N calibrated so a batch
lasts about 20 ms) timed with time.perf_counter() (CLOCK_MONOTONIC on Linux);
the figure is the median over batches of batch time / N.  One intra-op
thread (torch.set_num_threads(1)), as jitgrad runs single threaded."""

import sys
import time

BATCHES = 15
TARGET_BATCH_S = 0.02
CHAIN_LEN = 100
SMALL_N = 16
LARGE_N = 1 << 20

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"# torch_eager: PyTorch not available ({e}); skipped")
    sys.exit(0)


def measure(fn):
    for _ in range(3):
        fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= TARGET_BATCH_S / 4 or n >= (1 << 24):
            per = dt / n
            n = int(TARGET_BATCH_S / per) if per > 0 else n
            break
        n *= 2
    n = max(n, 3)
    per = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    per.sort()
    return per[BATCHES // 2], per[0], per[-1], n


def report(name, head, head_val, t):
    med, lo, hi, n = t
    print(
        f"torch {name} {head}={head_val:.4g} iter_us={med * 1e6:.4g} "
        f"min_us={lo * 1e6:.4g} max_us={hi * 1e6:.4g} iters_per_batch={n} "
        f"batches={BATCHES}",
        flush=True,
    )


def chain_forward(x):
    # 100 ops cycling add_scalar, mul_scalar, tanh, mul(y, x), then sum
    y = x
    for i in range(CHAIN_LEN):
        r = i % 4
        if r == 0:
            y = y + 0.5
        elif r == 1:
            y = y * 0.75
        elif r == 2:
            y = torch.tanh(y)
        else:
            y = y * x
    return y.sum()


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    print(f"# torch {torch.__version__} threads={torch.get_num_threads()}", flush=True)

    x = torch.rand(SMALL_N, requires_grad=True)

    def chain_fwd_bwd():
        chain_forward(x).backward()
        x.grad = None

    def chain_fwd_only():
        chain_forward(x)

    def chain_fwd_nograd():
        with torch.no_grad():
            chain_forward(x)

    t = measure(chain_fwd_bwd)
    report("chain100_f32x16", "per_op_us", t[0] * 1e6 / CHAIN_LEN, t)
    t = measure(chain_fwd_only)
    report("chain100_f32x16_fwd", "per_op_us", t[0] * 1e6 / CHAIN_LEN, t)
    t = measure(chain_fwd_nograd)
    report("chain100_f32x16_nograd", "per_op_us", t[0] * 1e6 / CHAIN_LEN, t)

    for n in (SMALL_N, LARGE_N):
        q = torch.randn(n, requires_grad=True)
        k = torch.randn(n, requires_grad=True)

        def fwd_bwd():
            (q * (k + k)).sum().backward()
            q.grad = None
            k.grad = None

        def fwd_nograd():
            with torch.no_grad():
                (q * (k + k)).sum()

        t = measure(fwd_bwd)
        report(f"qkk_f32x{n}", "us", t[0] * 1e6, t)
        t = measure(fwd_nograd)
        report(f"qkk_f32x{n}_nograd", "us", t[0] * 1e6, t)


if __name__ == "__main__":
    main()
