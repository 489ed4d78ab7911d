"""examples/char_rnn.py (a character-level LSTM language model: Embedding,
2-layer nn.LSTM with batch_first, hidden state carried and detached between
steps, cross_entropy, clip_grad_norm_, Adam) runs unchanged under PyTorch
and jitgrad; from one checkpoint the losses of the first steps agree (f32,
rel 1e-4)."""
import importlib.util
import os
import subprocess
import sys

import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "char_rnn.py")
SMALL = dict(steps=6, batch_size=4, bptt=12, emsize=8, nhid=16, limit=3000, log=lambda s: None)


def load_example():
    spec = importlib.util.spec_from_file_location("char_rnn", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _text(tmp_path):
    """GPL-3's text where Debian ships it, else a stand-in."""
    ex = load_example()
    if os.path.exists(ex.DEFAULT_TEXT):
        return ex.DEFAULT_TEXT
    path = tmp_path / "text.txt"
    path.write_text("the quick brown fox jumps over the lazy dog. " * 80)
    return str(path)


@pytest.mark.parametrize("first", ["torch", "jitgrad"])
def test_char_rnn_losses_match_torch(tmp_path, first):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    ex = load_example()
    ckpt = str(tmp_path / "init.pt")
    libs = {"torch": torch, "jitgrad": jitgrad}
    other = "jitgrad" if first == "torch" else "torch"
    text = _text(tmp_path)
    a = ex.train(libs[first], text, save_init=ckpt, **SMALL)
    b = ex.train(libs[other], text, init=ckpt, **SMALL)
    assert len(a) == len(b) == SMALL["steps"]
    for step, (g, w) in enumerate(zip(a, b)):
        assert abs(g - w) <= 1e-4 * abs(w), (step, g, w)


def test_char_rnn_learns_and_samples(tmp_path):
    ex = load_example()
    jitgrad.manual_seed(0)
    lines = []
    kw = dict(SMALL, steps=40, log=lines.append, samples=30, log_interval=100)
    losses = ex.train(jitgrad, _text(tmp_path), **kw)
    assert sum(losses[-5:]) < sum(losses[:5])
    assert lines[-1].startswith("The ") and len(lines[-1]) == 34


def test_char_rnn_script_runs(tmp_path):
    r = subprocess.run([sys.executable, EXAMPLE, "--text", _text(tmp_path), "--steps", "2",
                        "--limit", "2000", "--nhid", "16", "--sample", "10",
                        "--log-interval", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "step     1 | loss" in r.stdout
