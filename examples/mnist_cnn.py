"""pytorch/examples' mnist/main.py: the same Net (two convolutions, max
pooling, dropout, two linear layers, log_softmax), nll_loss, Adadelta and
StepLR, written in plain PyTorch API.  The same file runs under PyTorch:
only the import differs.

    python3 examples/mnist_cnn.py                 # jitgrad, synthetic digits
    python3 examples/mnist_cnn.py --torch         # PyTorch
    python3 examples/mnist_cnn.py --data DIR      # real MNIST: DIR holds the four
                                                  # train/t10k idx files (.gz or not)
    ... --save-init w.pt / --init w.pt            # one initialization for both

Without --data the images are synthetic (no download is possible): noise
plus a bright square whose position is the label, made by NumPy from a
fixed seed, so both libraries see the same pixels and the same batch order
(the epoch's shuffle is a NumPy permutation too).  It prints the loss every
--log-interval steps and each epoch's test loss and accuracy;
python/tests/test_mnist_cnn.py runs a few steps under both libraries from
one checkpoint and compares the losses."""
import argparse
import gzip
import os

import numpy as np

MEAN, STD = 0.1307, 0.3081  # the reference's Normalize((0.1307,), (0.3081,))


def build(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            output = F.log_softmax(x, dim=1)
            return output

    return Net()


def synthetic(n, seed):
    """n images [n, 1, 28, 28] in [0, 1] and labels: a 6x6 square at one of
    ten places (the label) over uniform noise."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, size=n)
    images = rng.uniform(0.0, 0.3, size=(n, 1, 28, 28))
    for i, c in enumerate(labels):
        r, q = 3 + (c // 5) * 13, 1 + (c % 5) * 5
        images[i, 0, r:r + 6, q:q + 6] = 1.0
    return images.astype(np.float32), labels.astype(np.int64)


def _idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def mnist(directory, train):
    """Real MNIST from its idx files, as [n, 1, 28, 28] float32 in [0, 1]."""
    stem = "train" if train else "t10k"
    found = {}
    for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
        for name in (f"{stem}-{kind}", f"{stem}-{kind}.gz"):
            if os.path.exists(os.path.join(directory, name)):
                found[kind] = os.path.join(directory, name)
        if kind not in found:
            raise SystemExit(f"mnist_cnn: {stem}-{kind}[.gz] not found in {directory}")
    images = _idx(found["images-idx3-ubyte"]).astype(np.float32)[:, None] / 255.0
    return images, _idx(found["labels-idx1-ubyte"]).astype(np.int64)


def batches(torch, images, labels, batch_size, perm=None):
    """(data, target) batches, normalized as the reference's transform."""
    if perm is not None:
        images, labels = images[perm], labels[perm]
    for i in range(0, len(labels), batch_size):
        x = (images[i:i + batch_size] - np.float32(MEAN)) / np.float32(STD)
        yield torch.tensor(x), torch.tensor(labels[i:i + batch_size])


def train(torch, steps=None, epochs=1, init=None, save_init=None, data=None, n_train=2048,
          n_test=512, batch_size=64, test_batch_size=1000, lr=1.0, gamma=0.7, seed=1,
          dropout=True, log_interval=10, log=print):
    """The reference's main(): returns the training losses of every step.
    steps: stop after that many steps (None: run the epochs).  dropout=False
    sets both dropout layers' p to 0 (their masks come from each library's
    own generator, so runs that are compared turn them off)."""
    F = torch.nn.functional
    if data:
        tr, te = mnist(data, True), mnist(data, False)
    else:
        tr, te = synthetic(n_train, seed), synthetic(n_test, seed + 1)
    model = build(torch)
    if init:
        model.load_state_dict(torch.load(init))
    if save_init:
        torch.save(model.state_dict(), save_init)
    if not dropout:
        model.dropout1.p = model.dropout2.p = 0.0
    optimizer = torch.optim.Adadelta(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=gamma)
    rng = np.random.RandomState(seed + 2)
    losses = []
    for epoch in range(1, epochs + 1):
        model.train()
        perm = rng.permutation(len(tr[1]))
        for batch_idx, (x, target) in enumerate(batches(torch, *tr, batch_size, perm)):
            optimizer.zero_grad()
            output = model(x)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if batch_idx % log_interval == 0:
                log(f"Train Epoch: {epoch} [{batch_idx * batch_size}/{len(tr[1])}]\t"
                    f"Loss: {losses[-1]:.6f}")
            if steps is not None and len(losses) == steps:
                return losses
        model.eval()
        test_loss, correct = 0.0, 0
        with torch.no_grad():
            for x, target in batches(torch, *te, test_batch_size):
                output = model(x)
                test_loss += F.nll_loss(output, target, reduction="sum").item()
                pred = output.argmax(dim=1, keepdim=True)
                correct += pred.eq(target.view_as(pred)).sum().item()
        n = len(te[1])
        log(f"Test set: Average loss: {test_loss / n:.4f}, Accuracy: {correct}/{n} "
            f"({100.0 * correct / n:.0f}%)")
        scheduler.step()
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch", action="store_true", help="run under PyTorch")
    p.add_argument("--data", help="directory of the real MNIST idx files")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps", type=int, help="stop after this many training steps")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1.0)
    p.add_argument("--gamma", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--init", help="load the initial weights from this checkpoint")
    p.add_argument("--save-init", help="save the initial weights to this checkpoint")
    args = p.parse_args(argv)
    if args.torch:
        import torch
    else:
        import jitgrad as torch
    torch.manual_seed(args.seed)
    train(torch, args.steps, args.epochs, args.init, args.save_init, args.data,
          batch_size=args.batch_size, lr=args.lr, gamma=args.gamma, seed=args.seed,
          log_interval=args.log_interval)


if __name__ == "__main__":
    main()
