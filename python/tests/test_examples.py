"""examples/train_regression.py runs unchanged under PyTorch and jitgrad;
from one checkpoint (written by torch.save, read by jitgrad.load) the two
libraries' losses agree step by step (issue 11's acceptance style)."""
import importlib.util
import os

import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "train_regression.py")


def load_example():
    spec = importlib.util.spec_from_file_location("train_regression", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_regression_example_losses_match_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    torch.manual_seed(0)  # the initialization (saved, then loaded by jitgrad)
    ex = load_example()
    ckpt = str(tmp_path / "init.pt")
    want = ex.train(torch, steps=40, save_init=ckpt, log=lambda s: None)
    got = ex.train(jitgrad, steps=40, init=ckpt, log=lambda s: None)
    assert len(got) == len(want) == 40
    for step, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-4 * abs(w), (step, g, w)


def test_regression_example_runs_without_torch(tmp_path):
    ex = load_example()
    ckpt = str(tmp_path / "init.pt")
    a = ex.train(jitgrad, steps=5, save_init=ckpt, log=lambda s: None)
    b = ex.train(jitgrad, steps=5, init=ckpt, log=lambda s: None)
    assert a == b  # one initialization, one data order: the same run
