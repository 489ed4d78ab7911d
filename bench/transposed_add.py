"""A binary op with a transposed operand: x.add_(w.t()) (a transposed
gradient added into .grad) and x + w.t(), 256x784 f32, 1 thread.  Prints
the median CPU microseconds per call over 7 batches of 200 calls.

  scripts/test-python.sh --run bench/transposed_add.py [--lib jitgrad|torch]"""
import argparse
import importlib
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default="jitgrad")
    T = importlib.import_module(ap.parse_args().lib)
    T.set_num_threads(1)
    x = T.randn(256, 784)
    w = T.randn(784, 256).t()
    for name, f in [("add_inplace_transposed_256x784", lambda: x.add_(w)),
                    ("add_transposed_256x784", lambda: T.add(x, w))]:
        for _ in range(20):
            f()
        ts = []
        for _ in range(7):
            c0 = time.process_time()
            for _ in range(200):
                f()
            ts.append((time.process_time() - c0) / 200 * 1e6)
        print(f"{T.__name__} {name} cpu_us={statistics.median(ts):.1f}")


if __name__ == "__main__":
    main()
