"""A whole training step (forward, backward, SGD step, zero_grad), eager and
compiled in each mode, for the MLP (784-256-256-10, batch 64) and a small
transformer block (pre-norm single-head attention and a GELU MLP, width 64,
sequence 32, batch 16).  The same script runs on PyTorch (--lib torch,
eager only), in its own process, as a user would run it.

  python bench/step_modes.py --lib jitgrad|torch --model mlp|block --threads N
      [--modes eager,default,reduce-overhead,max-autotune] [--steps 60] [--vary]

Prints `<lib> step_<model> mode=M threads=N us=<median wall us per step>
cpu_us=<median CPU us>` per mode; with --vary, `<lib> traces_<model> mode=M batches=partial|random
steps=100 traces=T eager_calls=E` instead: the graphs a compiled step traced
over 100 steps whose batch size changes (an epoch's partial last batch, or
a random size every step)."""
import argparse
import random
import statistics
import sys
import time


def build(T, model, batch, width=64, seq=32):
    nn = T.nn
    F = nn.functional
    T.manual_seed(0)
    if model == "mlp":
        net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                            nn.Linear(256, 10))
        params = list(net.parameters())

        def data(b):
            return T.randn(b, 784), T.randint(0, 10, (b,))

        def loss_of(x, y):
            return F.cross_entropy(net(x), y)
    else:
        d, t = width, seq
        ln1, ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        qkv, proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        fc1, fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        params = [p for m in (ln1, qkv, proj, ln2, fc1, fc2) for p in m.parameters()]
        scale = 1.0 / d ** 0.5

        def block(x):
            q, k, v = qkv(ln1(x)).split(d, dim=-1)
            att = F.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1)
            x = x + proj(att @ v)
            return x + fc2(F.gelu(fc1(ln2(x))))

        def data(b):
            return T.randn(b, t, d), T.randn(b, t, d)

        def loss_of(x, y):
            return F.mse_loss(block(x), y)

    opt = T.optim.SGD(params, lr=0.01, momentum=0.9)

    def step(x, y):
        loss = loss_of(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return step, data


def timed(step, x, y, steps, warmup):
    """Median wall and CPU (this process, all threads) microseconds per step:
    on a loaded machine the CPU time at 1 thread is the steadier figure."""
    for _ in range(warmup):
        step(x, y)
    wall, cpu = [], []
    for _ in range(steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step(x, y)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall) * 1e6, statistics.median(cpu) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=["jitgrad", "torch"], required=True)
    ap.add_argument("--model", choices=["mlp", "block"], required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--modes", default="eager,default,reduce-overhead,max-autotune")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--vary", action="store_true")
    ap.add_argument("--width", type=int, default=64, help="block: model width")
    ap.add_argument("--seq", type=int, default=32, help="block: sequence length")
    ap.add_argument("--batch", type=int, default=0, help="default 64 (mlp), 16 (block)")
    a = ap.parse_args()
    if a.lib == "torch":
        import torch as T
    else:
        import jitgrad as T
    T.set_num_threads(a.threads)
    batch = a.batch or (64 if a.model == "mlp" else 16)
    shape = {"width": a.width, "seq": a.seq}
    name = a.model if a.model == "mlp" else f"block_d{a.width}_t{a.seq}_b{batch}"
    modes = ["eager"] if a.lib == "torch" else a.modes.split(",")
    for mode in modes:
        step, data = build(T, a.model, batch, **shape)
        if mode != "eager":
            step = T.compile(step, fullgraph=True, mode=mode)
        if not a.vary:
            x, y = data(batch)
            us, cpu = timed(step, x, y, a.steps, warmup=5)
            print(f"{a.lib} step_{name} mode={mode} threads={a.threads} us={us:.1f} "
                  f"cpu_us={cpu:.1f}", flush=True)
            continue
        if mode == "eager":
            continue
        for kind in ("partial", "random"):
            step, data = build(T, a.model, batch, **shape)
            step = T.compile(step, fullgraph=True, mode=mode)
            rng = random.Random(0)
            n_data = 15 * batch + batch // 2 + 3  # an epoch: 15 full batches, then a partial one
            pos = 0
            for _ in range(100):
                if kind == "partial":
                    b = min(batch, n_data - pos)
                    pos = 0 if pos + b >= n_data else pos + b
                else:
                    b = rng.randint(batch // 4, batch)
                step(*data(b))
            c = step._jitgrad_compiled
            print(f"{a.lib} traces_{name} mode={mode} batches={kind} steps=100 "
                  f"traces={c.entries()} eager_calls={c.fallbacks()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
