"""Trains the byte-level GPT of model.py with AdamW, in plain PyTorch API.

    python3 examples/gpt/train.py                    # jitgrad, compiled
    python3 examples/gpt/train.py --torch            # PyTorch (no compile in 1.13)
    python3 examples/gpt/train.py --attn custom      # custom Function, k in two slots

--compile none|default|interp|c compiles the whole training step (forward,
loss.backward(), AdamW's step, zero_grad) as one graph; --compile-scope
model compiles only the model's forward.

Data: the bytes of --data (default /usr/share/common-licenses/GPL-3), each
masked to 7 bits (vocabulary 128), the first 90% for training.  Batches are
drawn by a SplitMix64 generator seeded with --seed (train.c has the same), so
every run sees the same data order.  --init loads a state_dict saved by torch.save / jitgrad.save, --save
writes one; from the same --init both libraries train the same model.
Prints every step's loss, the validation loss at the end, the median
ms/step, and with --sample N, N sampled bytes."""
import argparse
import importlib.util
import os
import statistics
import time


def _model_module():
    # by path: another "model" module may be imported already
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.py")
    spec = importlib.util.spec_from_file_location("jitgrad_example_gpt_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--torch", action="store_true", help="run on PyTorch instead of jitgrad")
    p.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--block", type=int, default=64, help="context length T")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--attn", choices=["builtin", "custom"], default="builtin")
    p.add_argument("--compile", choices=["none", "default", "interp", "c"], default="default",
                   help="torch.compile backend (skipped where the library has no compile)")
    p.add_argument("--compile-scope", choices=["step", "model"], default="step",
                   help="compile the whole training step (forward, backward, AdamW, zero_grad) "
                        "or only the model")
    p.add_argument("--threads", type=int, default=0, help="0: the library's default")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--init", help="state_dict to start from")
    p.add_argument("--save", help="write the final state_dict here")
    p.add_argument("--sample", type=int, default=0, help="bytes to sample after training")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    p.add_argument("--exact", action="store_true",
                   help="print losses as %%.9g (tells float32 values apart), not %%.6f")
    return p.parse_args(argv)


def load_data(path, vocab):
    with open(path, "rb") as f:
        data = [b % vocab for b in f.read()]
    n = int(0.9 * len(data))
    return data[:n], data[n:]


class SplitMix64:
    """The batch order's generator: tiny, and the same in train.c, so the
    Python and C programs (and both libraries) read the same batches."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        """A number in [0, n) (modulo bias is irrelevant here)."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return (z ^ (z >> 31)) % n


def batches(data, batch, block, rng):
    while True:
        starts = [rng.below(len(data) - block - 1) for _ in range(batch)]
        yield ([data[s:s + block] for s in starts], [data[s + 1:s + block + 1] for s in starts])


def main(argv=None):
    args = parse(argv)
    if args.torch:
        import torch
    else:
        import jitgrad as torch
    M = _model_module()
    GPTConfig, build = M.GPTConfig, M.build

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = GPTConfig(vocab_size=128, block_size=args.block, n_layer=args.layers,
                    n_head=args.heads, n_embd=args.width, attn=args.attn)
    GPT, _ = build(torch)
    model = GPT(cfg)
    if args.init:
        model.load_state_dict(torch.load(args.init))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)
    run = model
    compiled = args.compile != "none" and hasattr(torch, "compile")
    backend = None if args.compile == "default" else args.compile
    if compiled and args.compile_scope == "model":
        run = torch.compile(model, backend=backend)

    def train_step(x, y):
        _, loss = run(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if compiled and args.compile_scope == "step":
        train_step = torch.compile(train_step, backend=backend)
    train, val = load_data(args.data, cfg.vocab_size)
    it = batches(train, args.batch, args.block, SplitMix64(args.seed))
    losses, times = [], []
    fmt = ".9g" if args.exact else ".6f"
    for step in range(args.steps):
        xs, ys = next(it)
        x = torch.tensor(xs, dtype=torch.long)
        y = torch.tensor(ys, dtype=torch.long)
        t0 = time.perf_counter()
        loss = train_step(x, y)
        lv = loss.item()
        times.append(time.perf_counter() - t0)
        losses.append(lv)
        if not args.quiet:
            print(f"step {step}: loss {lv:{fmt}}", flush=True)
    with torch.no_grad():
        vx, vy = next(batches(val, args.batch, args.block, SplitMix64(args.seed + 1)))
        _, vloss = model(torch.tensor(vx, dtype=torch.long), torch.tensor(vy, dtype=torch.long))
    if not losses:  # --steps 0: only --save (an initialization for both libraries)
        if args.save:
            torch.save(model.state_dict(), args.save)
        return losses, model
    steady = times[1:] or times
    print(f"{'torch' if args.torch else 'jitgrad'} attn={args.attn} compile={args.compile}: "
          f"{args.steps} steps, final loss {losses[-1]:{fmt}}, val loss {vloss.item():{fmt}}, "
          f"median {1000 * statistics.median(steady):.2f} ms/step")
    if args.save:
        torch.save(model.state_dict(), args.save)
    if args.sample:
        model.eval()
        torch.manual_seed(args.seed)  # a fresh generator: train.c draws the same bytes
        idx = torch.tensor([[ord("\n")]], dtype=torch.long)
        with torch.no_grad():
            for _ in range(args.sample):
                logits, _ = model(idx[:, -cfg.block_size:])
                probs = logits[:, -1, :].softmax(dim=-1)
                idx = torch.cat([idx, torch.multinomial(probs, 1)], dim=1)
        print(bytes(idx[0].tolist()[1:]).decode("ascii", errors="replace"))
    return losses, model


if __name__ == "__main__":
    main()
