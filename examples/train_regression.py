"""Fits sin(x) with a small MLP, written the way PyTorch's tutorials write
training loops (nn.Module, nn.MSELoss, optim.Adam, a DataLoader).  The same
file runs under PyTorch: only the import differs.

    python3 examples/train_regression.py            # jitgrad
    python3 examples/train_regression.py --torch    # PyTorch
    ... --save-init w.pt / --init w.pt              # one initialization for both

It prints the loss of every step; python/tests/test_examples.py runs it
under both libraries from one checkpoint and compares the losses."""
import argparse
import math


def build(torch):
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 1))

        def forward(self, x):
            return self.body(x).flatten()

    return MLP()


def data(torch, n=256):
    x = torch.linspace(-math.pi, math.pi, n)
    feats = torch.stack([x, x ** 2 / 4, x ** 3 / 16], 1)
    return torch.utils.data.TensorDataset(feats, torch.sin(x))


def train(torch, steps=20, init=None, save_init=None, lr=3e-3, log=print):
    model = build(torch)
    if init:
        model.load_state_dict(torch.load(init))
    if save_init:
        torch.save(model.state_dict(), save_init)
    loader = torch.utils.data.DataLoader(data(torch), batch_size=32, shuffle=False)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = torch.nn.MSELoss()
    losses, step = [], 0
    while step < steps:
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            log(f"step {step:3d}  loss {losses[-1]:.6f}")
            step += 1
            if step == steps:
                break
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch", action="store_true", help="run under PyTorch")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--init", help="load the initial weights from this checkpoint")
    p.add_argument("--save-init", help="save the initial weights to this checkpoint")
    args = p.parse_args(argv)
    if args.torch:
        import torch
    else:
        import jitgrad as torch
    train(torch, args.steps, args.init, args.save_init)


if __name__ == "__main__":
    main()
