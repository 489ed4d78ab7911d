"""examples/chargpt (a nanoGPT-style character GPT) under PyTorch and jitgrad:
from one initialization the two libraries' training losses agree (issue 11's
acceptance style), generation samples valid tokens, and train.py / sample.py
run as scripts with checkpoints read across the two libraries."""
import importlib.util
import math
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
CHARGPT = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "chargpt"))


def load_model(lib):
    """model.py bound to `lib` (it imports `torch` from the _lib shim)."""
    shim = types.ModuleType("_lib")
    shim.torch = lib
    saved = sys.modules.get("_lib")
    sys.modules["_lib"] = shim
    try:
        spec = importlib.util.spec_from_file_location(f"chargpt_model_{lib.__name__}",
                                                      os.path.join(CHARGPT, "model.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved is None:
            del sys.modules["_lib"]
        else:
            sys.modules["_lib"] = saved
    return mod


CFG = dict(block_size=16, vocab_size=23, n_layer=2, n_head=2, n_embd=16, dropout=0.0)


def twin_models(torch, flash, bias):
    """A torch GPT and a jitgrad GPT with the torch one's weights."""
    tm_mod, jm_mod = load_model(torch), load_model(jitgrad)
    torch.manual_seed(0)
    tmodel = tm_mod.GPT(tm_mod.GPTConfig(bias=bias, **CFG))
    if flash:
        jmodel = jm_mod.GPT(jm_mod.GPTConfig(bias=bias, **CFG))
    else:  # the explicit-mask path, as under a library without sdpa
        sdpa = jitgrad.nn.functional.scaled_dot_product_attention
        del jitgrad.nn.functional.scaled_dot_product_attention
        try:
            jmodel = jm_mod.GPT(jm_mod.GPTConfig(bias=bias, **CFG))
        finally:
            jitgrad.nn.functional.scaled_dot_product_attention = sdpa
    assert all(b.attn.flash == flash for b in jmodel.transformer.h)
    assert not any(b.attn.flash for b in tmodel.transformer.h)  # 1.13 has no sdpa
    sd = {k: jitgrad.tensor(v.numpy()) for k, v in tmodel.state_dict().items()}
    jmodel.load_state_dict(sd)
    return tmodel, jmodel


def batches(n, b=4, t=12, seed=0):
    """Windows of a periodic token stream (learnable: the next token follows
    from the last two), a few targets set to the ignored -1."""
    rng = np.random.default_rng(seed)
    stream = (np.arange(400) * 7 + np.arange(400) // 3) % CFG["vocab_size"]
    out = []
    for _ in range(n):
        ix = rng.integers(0, len(stream) - t - 1, b)
        x = np.stack([stream[i:i + t] for i in ix])
        y = np.stack([stream[i + 1:i + 1 + t] for i in ix])
        y[0, :3] = -1
        out.append((x, y))
    return out


def train(torch, model, data, lr=1e-2, warmup=5):
    opt = model.configure_optimizers(0.1, lr, (0.9, 0.95), "cpu")
    losses = []
    for it, (x, y) in enumerate(data):
        for group in opt.param_groups:
            group["lr"] = lr * min(1.0, (it + 1) / warmup) * (0.5 + 0.5 * math.cos(it / 40))
        _, loss = model(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("flash,bias", [(True, True), (False, False)])
def test_chargpt_losses_match_torch(flash, bias):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    tmodel, jmodel = twin_models(torch, flash, bias)
    # weight tying survives loading: one parameter, counted once
    assert jmodel.transformer.wte.weight is jmodel.lm_head.weight
    assert jmodel.get_num_params() == tmodel.get_num_params()
    assert len(list(jmodel.parameters())) == len(list(tmodel.parameters()))
    data = batches(20)
    want = train(torch, tmodel, data)
    got = train(jitgrad, jmodel, data)
    assert len(got) == 20
    for step, (g, w) in enumerate(zip(got, want)):
        assert abs(g - w) <= 1e-4 * abs(w), (step, g, w)
    assert got[-1] < got[0]
    # the final weights too (tied ones included); loose: the key bias gets
    # gradients that are rounding noise (softmax ignores a shift of all
    # scores), which Adam scales up to full steps
    tsd = tmodel.state_dict()
    for k, v in jmodel.state_dict().items():
        np.testing.assert_allclose(v.numpy(), tsd[k].numpy(), rtol=1e-3, atol=1e-3, err_msg=k)


def test_chargpt_generate_top_k():
    torch = pytest.importorskip("torch")
    tmodel, jmodel = twin_models(torch, True, True)
    tmodel.eval()
    jmodel.eval()
    prompt = [[1, 2, 3], [4, 5, 6]]
    jitgrad.manual_seed(0)
    out = jmodel.generate(jitgrad.tensor(prompt), 20, temperature=0.8, top_k=5)
    assert out.dtype == jitgrad.int64 and out.shape == (2, 23)
    ids = out.tolist()
    assert [r[:3] for r in ids] == prompt
    # every sampled token is among the 5 likeliest after its prefix (the
    # context window slides past block_size=16)
    with jitgrad.no_grad():
        for t in range(3, 23):
            ctx = out[:, max(0, t - CFG["block_size"]):t]
            logits, loss = jmodel(ctx)
            assert loss is None and logits.shape == (2, 1, CFG["vocab_size"])
            top = jitgrad.topk(logits[:, -1, :], 5).indices.tolist()
            for r in range(2):
                assert ids[r][t] in top[r], (r, t)
    # top_k=1 is greedy: the same tokens as PyTorch's model
    jg = jmodel.generate(jitgrad.tensor(prompt), 20, top_k=1).tolist()
    tg = tmodel.generate(torch.tensor(prompt), 20, top_k=1).tolist()
    assert jg == tg
    assert not jmodel.training and jitgrad.is_grad_enabled()


def run(script, *args, cwd):
    env = dict(os.environ)
    env.pop("CHARGPT_LIB", None)
    p = subprocess.run([sys.executable, os.path.join(CHARGPT, script), *args], cwd=cwd,
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_chargpt_scripts_and_checkpoints_across_libraries(tmp_path):
    out = str(tmp_path / "out")
    small = ["--max_iters=4", "--eval_interval=2", "--eval_iters=2", "--batch_size=4",
             "--gradient_accumulation_steps=2",
             "--block_size=16", f"--out_dir={out}"]
    log = run("train.py", *small, cwd=str(tmp_path))
    assert "step 4: train loss" in log
    ckpt = os.path.join(out, "ckpt.pt")
    text = run("sample.py", f"--out_dir={out}", "--num_samples=1", "--max_new_tokens=20",
               "--start=Shall ", cwd=str(tmp_path))
    assert text.startswith("Shall ") and len(text.split("\n---")[0]) >= 26

    ck = jitgrad.load(ckpt)
    assert ck["iter_num"] == 4 and ck["config"]["max_iters"] == 4
    assert set(ck) == {"model", "optimizer", "model_args", "iter_num", "best_val_loss",
                       "config"}
    torch = pytest.importorskip("torch")
    # torch reads jitgrad's checkpoint: model and optimizer state
    tck = torch.load(ckpt)
    tm_mod = load_model(torch)
    tmodel = tm_mod.GPT(tm_mod.GPTConfig(**tck["model_args"]))
    tmodel.load_state_dict(tck["model"])
    topt = tmodel.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cpu")
    topt.load_state_dict(tck["optimizer"])
    jm_mod = load_model(jitgrad)
    jmodel = jm_mod.GPT(jm_mod.GPTConfig(**ck["model_args"]))
    jmodel.load_state_dict(ck["model"])
    x = [[0, 1, 2, 3, 4, 5, 6, 7]]
    tl = tmodel.eval()(torch.tensor(x))[0].detach().numpy()
    jl = jmodel.eval()(jitgrad.tensor(x))[0].detach().numpy()
    np.testing.assert_allclose(jl, tl, rtol=1e-5, atol=1e-6)
    # and the reverse: PyTorch resumes from jitgrad's file and writes its
    # own, which jitgrad resumes from and samples with
    run("train.py", "--lib=torch", "--init_from=resume", *small[1:], "--max_iters=6",
        cwd=str(tmp_path))
    assert jitgrad.load(ckpt)["iter_num"] == 6
    log = run("train.py", "--init_from=resume", *small[1:], "--max_iters=8", cwd=str(tmp_path))
    assert "step 8: train loss" in log and jitgrad.load(ckpt)["iter_num"] == 8
    run("sample.py", f"--out_dir={out}", "--num_samples=1", "--max_new_tokens=10",
        cwd=str(tmp_path))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_chargpt_compiled_training_equals_eager(backend):
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C backend")
    M = load_model(jitgrad)
    jitgrad.manual_seed(0)
    eager = M.GPT(M.GPTConfig(**CFG))
    twin = M.GPT(M.GPTConfig(**CFG))
    twin.load_state_dict(eager.state_dict())
    model = jitgrad.compile(twin, backend=backend, fullgraph=True)  # nanoGPT's compile=True
    assert list(model.state_dict()) == ["_orig_mod." + k for k in eager.state_dict()]
    opts = [m.configure_optimizers(0.1, 1e-2, (0.9, 0.95), "cpu") for m in (eager, model)]
    for step, (x, y) in enumerate(batches(3)):
        x, y = jitgrad.from_numpy(x), jitgrad.from_numpy(y)
        losses = []
        for m, opt in zip((eager, model), opts):
            _, loss = m(x, y)
            loss.backward()
            jitgrad.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            losses.append(loss.item())
        assert losses[0] == losses[1], step
        for (n, a), b in zip(eager.named_parameters(), twin.parameters()):
            assert np.array_equal(a.grad.numpy(), b.grad.numpy()), (step, n)
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)
    for a, b in zip(eager.parameters(), twin.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    model.eval()
    eager.eval()
    jitgrad.manual_seed(1)
    got = model.generate(jitgrad.tensor([[1, 2]]), 5, top_k=1).tolist()
    assert got == eager.generate(jitgrad.tensor([[1, 2]]), 5, top_k=1).tolist()


def test_cuda_amp_is_disabled_as_in_torch_without_cuda():
    torch = pytest.importorskip("torch")
    for T in (torch, jitgrad):
        with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
            on = T.cuda.amp.GradScaler()
        off = T.cuda.amp.GradScaler(enabled=False)
        for s in (on, off):
            assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
            p = T.nn.Parameter(T.ones(2))
            opt = T.optim.SGD([p], lr=0.5)
            loss = (p * 3).sum()
            assert s.scale(loss) is loss
            loss.backward()
            s.unscale_(opt)
            assert s.step(opt) is None
            s.update()
            s.load_state_dict({})
            assert p.tolist() == [-0.5, -0.5]
        with pytest.warns(UserWarning, match="CUDA is not available. Disabling"):
            with T.cuda.amp.autocast():
                assert (T.ones(2) * 2).dtype == T.float32


@pytest.mark.parametrize("flash", [True, False])
def test_chargpt_crop_block_size(flash):
    torch = pytest.importorskip("torch")
    tmodel, jmodel = twin_models(torch, flash, True)
    for m in (tmodel, jmodel):
        m.crop_block_size(8)
        m.eval()
    assert isinstance(jmodel.transformer.wpe.weight, jitgrad.nn.Parameter)
    assert jmodel.transformer.wpe.weight.shape == (8, CFG["n_embd"])
    assert jmodel.get_num_params(False) == tmodel.get_num_params(False)
    x = [[3, 1, 4, 1, 5, 9, 2, 6]]
    tl = tmodel(torch.tensor(x))[0].detach().numpy()
    jl = jmodel(jitgrad.tensor(x))[0].detach().numpy()
    np.testing.assert_allclose(jl, tl, rtol=1e-5, atol=1e-6)
    with pytest.raises(AssertionError, match="longer than the block size 8"):
        jmodel(jitgrad.tensor([x[0] + [0]]))
