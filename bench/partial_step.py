"""A training step that logs loss.item() mid-step, compiled without fullgraph:
it runs as two graphs around the read (docs/compiler.md, "Graph breaks").
Median ms per step of the MLP of kernels.py's mlp group (784-256-256-10,
batch 64, SGD) three ways: eager (what such a compiled step ran before it
could be split); compiled with the read inside the step (in pieces: the
trace runs at every call, then the two cached graphs); compiled as one
graph with the read after the call.

    build/python-venv/bin/python bench/partial_step.py [--backend interp|c]
"""
import argparse
import statistics
import time

import jitgrad as T

STEPS = 40


def make():
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(784, 256), T.nn.ReLU(), T.nn.Linear(256, 256),
                            T.nn.ReLU(), T.nn.Linear(256, 10))
    opt = T.optim.SGD(model.parameters(), lr=0.01)
    return model, opt


def step_fn(model, opt, read_inside):
    def step(x, y):
        loss = T.nn.functional.cross_entropy(model(x), y)
        if read_inside:
            step.last = loss.item()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    return step


def timed(step, x, y, read_after):
    times = []
    for i in range(STEPS + 3):
        t = time.perf_counter()
        loss = step(x, y)
        if read_after:
            loss.item()
        if i >= 3:  # (first calls trace and compile)
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="c", choices=["interp", "c"])
    args = ap.parse_args()
    T.manual_seed(1)
    x, y = T.randn(64, 784), T.randint(0, 10, (64,))
    model, opt = make()
    eager = timed(step_fn(model, opt, True), x, y, False)
    model, opt = make()
    pieces = T.compile(step_fn(model, opt, True), backend=args.backend)
    ms_pieces = timed(pieces, x, y, False)
    model, opt = make()
    whole = T.compile(step_fn(model, opt, False), backend=args.backend)
    ms_whole = timed(whole, x, y, True)
    c, w = pieces._jitgrad_compiled, whole._jitgrad_compiled
    print(f"jitgrad partial_step backend={args.backend} eager_ms={eager:.3f} "
          f"pieces_ms={ms_pieces:.3f} whole_ms={ms_whole:.3f} "
          f"graphs_per_step={c.graphs_run() / (STEPS + 3):.2f} fallbacks={c.fallbacks()} "
          f"whole_graphs={w.graphs_run()} whole_fallbacks={w.fallbacks()}")


if __name__ == "__main__":
    main()
