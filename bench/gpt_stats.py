"""The GPT example's training step on jitgrad, measured from the inside:
median ms/step (wall clock, and the process's CPU time, which on a machine
shared with other work follows the load less), tokens/s, the peak bytes of
tensor data during the steady steps (jitgrad.max_memory_allocated), and how
many graphs were traced and how many calls ran eagerly (graph breaks) over
the run.  Modes: eager; compile(model) on interp / c (backward and AdamW
outside the program); the whole step (forward, backward, AdamW, zero_grad)
compiled on c.  --vary makes every 10th batch one or (alternately) two
samples smaller (the last partial batch of an epoch, over and over: three
batch sizes in all): how many traces a changing batch size costs.  --attn custom runs the model's attention as its custom
autograd.Function (SharedKVAttention.apply(q, k, k, scale)), which goes
dynamic like the rest.

  build/python-venv/bin/python bench/gpt_stats.py [--steps 100] [--vary] [--attn custom]

Prints one line per mode: `gpt_stats mode=... ms=... cpu_ms=... tokens_per_s=...
peak_MB=... graphs=... eager_calls=...` (bench/suite.py reads them)."""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import jitgrad as torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_mode(mode, args, train, M):
    torch.manual_seed(1337)
    cfg = M.GPTConfig(vocab_size=128, block_size=args.block, n_layer=args.layers,
                      n_head=args.heads, n_embd=args.width, attn=args.attn)
    GPT, _ = M.build(torch)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    fwd = model if mode in ("eager", "step-c") else torch.compile(model, backend=mode)

    def step(x, y):
        _, loss = fwd(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    run = torch.compile(step, backend="c") if mode == "step-c" else step
    data, _ = train.load_data(args.data, 128)
    it = train.batches(data, args.batch, args.block, train.SplitMix64(1337))
    times, cpu, tokens = [], [], 0
    for i in range(args.steps):
        xs, ys = next(it)
        if args.vary and i % 10 == 9:  # one sample short, then two: three sizes in all
            cut = 1 + (i // 10) % 2
            xs, ys = xs[:-cut], ys[:-cut]
        x, y = torch.tensor(xs, dtype=torch.long), torch.tensor(ys, dtype=torch.long)
        if i == 2:  # steady state from here: compiled, optimizer state made
            torch.reset_peak_memory_stats()
            base = torch.memory_allocated()
        t0, c0 = time.perf_counter(), time.process_time()
        run(x, y).item()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if i >= 2:
            tokens += len(xs) * args.block
    steady = times[2:]
    ms = 1000 * statistics.median(steady)
    comp = {"eager": None, "step-c": getattr(run, "_jitgrad_compiled", None)}.get(
        mode, getattr(fwd.forward, "_jitgrad_compiled", None))
    graphs = comp.entries() if comp else 0
    eager_calls = comp.fallbacks() if comp else 0
    cpu_ms = 1000 * statistics.median(cpu[2:])
    print(f"gpt_stats mode={mode} vary={int(args.vary)} attn={args.attn} steps={args.steps} "
          f"ms={ms:.3f} "
          f"cpu_ms={cpu_ms:.3f} "
          f"tokens_per_s={tokens / sum(steady):.0f} "
          f"peak_MB={(torch.max_memory_allocated() - base) / 2**20:.2f} graphs={graphs} "
          f"eager_calls={eager_calls}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--block", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--vary", action="store_true")
    p.add_argument("--attn", default="builtin", choices=["builtin", "custom"])
    p.add_argument("--modes", default="eager,interp,c,step-c")
    args = p.parse_args()
    train = load("jitgrad_bench_gpt_train", "examples/gpt/train.py")
    M = load("jitgrad_bench_gpt_model", "examples/gpt/model.py")
    for mode in args.modes.split(","):
        if mode in ("c", "step-c") and not torch.HAS_COMPILER:
            continue
        run_mode(mode, args, train, M)


if __name__ == "__main__":
    sys.exit(main())
