"""examples/mnist_cnn.py (pytorch/examples' MNIST Net, Adadelta, StepLR,
nll_loss) runs unchanged under PyTorch and jitgrad; from one checkpoint
(torch.save, read by jitgrad.load) the losses of the first steps agree
(f32, rel 1e-4), with dropout off: its masks come from each library's own
generator."""
import importlib.util
import os

import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "mnist_cnn.py")


def load_example():
    spec = importlib.util.spec_from_file_location("mnist_cnn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mnist_cnn_losses_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)  # the initialization (saved, then loaded by jitgrad)
    ex = load_example()
    ckpt = str(tmp_path / "init.pt")
    kw = dict(steps=4, batch_size=16, n_train=64, n_test=16, dropout=False, log=lambda s: None)
    want = ex.train(torch, save_init=ckpt, **kw)
    got = ex.train(jitgrad, init=ckpt, **kw)
    assert len(got) == len(want) == 4
    for step, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-4 * abs(w), (step, g, w)


def test_mnist_cnn_epoch_runs_and_learns():
    """A whole (small) epoch with dropout, test pass and scheduler under
    jitgrad: the loss falls on the synthetic digits."""
    ex = load_example()
    jitgrad.manual_seed(1)
    lines = []
    losses = ex.train(jitgrad, epochs=2, n_train=256, n_test=64, batch_size=32,
                      log=lines.append)
    assert len(losses) == 16
    assert sum(losses[-4:]) < sum(losses[:4])
    assert any(s.startswith("Test set: Average loss") for s in lines)
