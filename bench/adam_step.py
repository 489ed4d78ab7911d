"""AdamW's step alone on the GPT example's parameters (examples/gpt/model.py,
train.py's default config), every gradient random: the optimizer's share of
the eager GPT step.  Runs on jitgrad or PyTorch (`import <lib> as torch`).

    JITGRAD_OPTIM_FUSED=0|1 build/python-venv/bin/python bench/adam_step.py
    python3 bench/adam_step.py --lib torch

One untimed step creates the state; then STEPS timed opt.step() calls
(time.perf_counter).  Prints the parameter count, the best and the median
step in ms.
"""
import argparse
import importlib.util
import os
import time

STEPS = 30


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", choices=["jitgrad", "torch"], default="jitgrad")
    ap.add_argument("--threads", type=int, default=0, help="0: the library's default")
    args = ap.parse_args()
    torch = importlib.import_module(args.lib)
    if args.threads:
        torch.set_num_threads(args.threads)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "gpt_model", os.path.join(root, "examples", "gpt", "model.py"))
    model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(model)
    torch.manual_seed(0)
    cfg = model.GPTConfig(vocab_size=128, block_size=64, n_layer=4, n_head=4, n_embd=128,
                          attn="builtin")
    gpt_class, _ = model.build(torch)
    params = list(gpt_class(cfg).parameters())
    for p in params:
        p.grad = torch.randn(p.shape)
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    opt.step()
    times = []
    for _ in range(STEPS):
        t = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t)
    times.sort()
    n = sum(p.numel() for p in params)
    print(f"{args.lib} adamw_step params={n} tensors={len(params)} "
          f"min_ms={times[0] * 1e3:.3f} median_ms={times[len(times) // 2] * 1e3:.3f}")


if __name__ == "__main__":
    main()
