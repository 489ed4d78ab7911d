"""examples/gpt (a GPT-2-style byte-level model trained with AdamW, in plain
PyTorch API): from one initialization, jitgrad eager follows PyTorch 1.13
step by step, compiled training (interp and c) equals eager bitwise, and the
custom attention Function called with k in the key and the value slot
trains as the builtin attention does.  A short configuration."""
import importlib.util
import os

import numpy as np
import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "gpt", "train.py"))
SMALL = ["--steps", "6", "--batch", "2", "--block", "16", "--layers", "2", "--heads", "2",
         "--width", "32", "--lr", "1e-3", "--quiet"]


def train_module():
    spec = importlib.util.spec_from_file_location("jitgrad_example_gpt_train", TRAIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    """One initialization for every run (made by jitgrad: PyTorch loads it)."""
    path = str(tmp_path_factory.mktemp("gpt") / "init.pt")
    train_module().main(SMALL + ["--steps", "0", "--compile", "none", "--save", path])
    return path


def run(init, *extra, lib="jitgrad"):
    argv = SMALL + ["--init", init] + list(extra) + (["--torch"] if lib == "torch" else [])
    losses, model = train_module().main(argv)
    params = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    return losses, params


def backends():
    return ["interp"] + (["c"] if jitgrad.HAS_COMPILER else [])


@pytest.mark.parametrize("attn", ["builtin", "custom"])
def test_gpt_eager_follows_torch(init, attn):
    pytest.importorskip("torch")
    got, _ = run(init, "--attn", attn, "--compile", "none")
    want, _ = run(init, "--attn", attn, lib="torch")
    assert len(got) == 6
    for step, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= 1e-5 * abs(b), (step, a, b)
    assert got[-1] < got[0]


@pytest.mark.parametrize("scope", ["step", "model"])
@pytest.mark.parametrize("attn", ["builtin", "custom"])
@pytest.mark.parametrize("backend", backends())
def test_gpt_compiled_equals_eager_bitwise(init, attn, backend, scope):
    """--compile-scope step: forward, backward, AdamW and zero_grad as one
    graph; model: compile(model)."""
    eager, pe = run(init, "--attn", attn, "--compile", "none")
    comp, pc = run(init, "--attn", attn, "--compile", backend, "--compile-scope", scope)
    assert comp == eager
    assert pe.keys() == pc.keys()
    for k in pe:
        assert np.array_equal(pe[k], pc[k]), k


@pytest.mark.parametrize("compile_as", ["none"] + backends())
def test_gpt_custom_shared_kv_trains_as_builtin(init, compile_as):
    """k in two slots: its gradient is the key slot's plus the value slot's;
    a compiler that kept one slot would train a different model."""
    builtin, pb = run(init, "--attn", "builtin", "--compile", compile_as)
    custom, pc = run(init, "--attn", "custom", "--compile", compile_as)
    np.testing.assert_allclose(custom, builtin, rtol=1e-5)
    for k in pb:
        np.testing.assert_allclose(pc[k], pb[k], rtol=1e-4, atol=1e-6, err_msg=k)
