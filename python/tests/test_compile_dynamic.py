"""Dynamic shapes: a dim whose size changes between calls (the batch) is
traced at its first two sizes, then every size runs from one template
(PyTorch's "automatic dynamic"); dynamic=True from the first call,
dynamic=False per size.  Results are bitwise eager's for every size, on
both backends: a function, a whole training step over an epoch with a
partial last batch (MLP and a small transformer block), and a program that
branches on x.shape[0]."""
import os
import subprocess
import sys
import textwrap

import pytest

BACKENDS = ["interp", "c"]
SIZES = [64, 64, 17, 64, 33, 5]


def backends(jg):
    return [b for b in BACKENDS if b == "interp" or jg.HAS_COMPILER]


def mlp(T):
    T.manual_seed(0)
    return T.nn.Sequential(T.nn.Linear(6, 16), T.nn.ReLU(), T.nn.Linear(16, 3))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dynamic,traces", [(None, 2), (False, 4)])
def test_batch_sizes_trace_twice(jg, backend, dynamic, traces):
    if backend not in backends(jg):
        pytest.skip("no C compiler")
    model = mlp(jg)

    def f(x, y):
        return jg.nn.functional.mse_loss(model(x), y)

    cf = jg.compile(f, backend=backend, dynamic=dynamic)
    jg.manual_seed(1)
    for b in SIZES:
        x, y = jg.randn(b, 6), jg.randn(b, 3)
        want = f(x, y)
        want.backward()
        gw = [p.grad.detach().numpy().tobytes() for p in model.parameters()]
        model.zero_grad()
        got = cf(x, y)
        assert got.detach().numpy().tobytes() == want.detach().numpy().tobytes()
        got.backward()
        assert [p.grad.detach().numpy().tobytes() for p in model.parameters()] == gw
        model.zero_grad()
    compiled = cf._jitgrad_compiled
    assert compiled.entries() == traces
    assert compiled.fallbacks() == 0


def test_dynamic_true_traces_once(jg):
    model = mlp(jg)
    cf = jg.compile(lambda x: model(x).sum(dim=1), backend="interp", dynamic=True)
    jg.manual_seed(2)
    for b in [64, 17, 33, 5]:
        x = jg.randn(b, 6)
        assert cf(x).detach().numpy().tobytes() == model(x).sum(dim=1).detach().numpy().tobytes()
    assert cf._jitgrad_compiled.entries() == 1


def test_dynamic_bad_value(jg):
    with pytest.raises(TypeError, match="dynamic must be None, True or False, not str"):
        jg.compile(lambda x: x, dynamic="yes")


def block(T, d=8, heads=2):
    class Block(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = T.nn.LayerNorm(d)
            self.qkv = T.nn.Linear(d, 3 * d)
            self.proj = T.nn.Linear(d, d)
            self.ln2 = T.nn.LayerNorm(d)
            self.fc = T.nn.Linear(d, 4 * d)
            self.out = T.nn.Linear(4 * d, d)

        def forward(self, x):
            B, L, C = x.shape  # sizes read in Python, used in views
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q = q.view(B, L, heads, C // heads).transpose(1, 2)
            k = k.view(B, L, heads, C // heads).transpose(1, 2)
            v = v.view(B, L, heads, C // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // heads) ** 0.5)
            att = att.softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, L, C)
            x = x + self.proj(y)
            return x + self.out(T.nn.functional.gelu(self.fc(self.ln2(x))))

    T.manual_seed(0)
    return Block()


def epoch_losses(T, make, shape, backend, sizes=(40, 45, 37), batch=16):
    model = make(T)
    opt = T.optim.SGD(model.parameters(), lr=0.05)

    def step(x, y):
        loss = T.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if backend:
        step = T.compile(step, backend=backend)
    T.manual_seed(3)
    losses = []
    for n in sizes:  # epochs over 40, 45, 37 samples: last batches 8, 13, 5
        X, Y = T.randn(n, *shape), T.randn(n, *shape[:-1], 3 if make is mlp else shape[-1])
        for at in range(0, n, batch):
            x, y = X[at:at + batch].contiguous(), Y[at:at + batch].contiguous()
            losses.append(step(x, y).detach().numpy().tobytes())
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    return losses, params, step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("which", ["mlp", "block"])
def test_training_epoch_with_partial_batch(jg, backend, which):
    if backend not in backends(jg):
        pytest.skip("no C compiler")
    make, shape = (mlp, (6,)) if which == "mlp" else (block, (5, 8))
    ref = epoch_losses(jg, make, shape, None)
    got = epoch_losses(jg, make, shape, backend)
    assert got[:2] == ref[:2]
    compiled = got[2]._jitgrad_compiled
    # 16; 16 again, since the first traced step stored state['momentum_buffer']
    # = None (Python state the key holds); then 8 makes the batch dynamic: 13
    # and 5 reuse it
    assert compiled.entries() == 3
    assert compiled.fallbacks() == 0


@pytest.mark.parametrize("sizes,traces", [
    ([64, 17, 33, 5, 64, 17], 4),  # the first change crosses the branch
    ([64, 33, 10, 5, 48], 5),  # 64 and 33 take one arm: the same graph, still per size
])
def test_python_branch_on_size_stays_correct(jg, sizes, traces):
    def f(x):
        if x.shape[0] > 20:
            return x * 2
        return x.exp() + 1

    cf = jg.compile(f, backend="interp")
    jg.manual_seed(4)
    for b in sizes:
        x = jg.randn(b, 3)
        assert cf(x).detach().numpy().tobytes() == f(x).detach().numpy().tobytes()
    assert cf._jitgrad_compiled.entries() == traces


def test_size_comparisons_with_one_result_stay_dynamic(jg):
    def f(x, y):
        assert x.shape[0] == y.size(0)  # the same for every size
        if x.numel() > x.shape[0] and min(x.shape[0], 2 * x.shape[0]) >= 2:
            return (x * y).sum(dim=1)
        return x

    cf = jg.compile(f, backend="interp")
    jg.manual_seed(5)
    for b in [64, 17, 33, 5]:
        x, y = jg.randn(b, 3), jg.randn(b, 3)
        assert cf(x, y).detach().numpy().tobytes() == f(x, y).detach().numpy().tobytes()
    assert cf._jitgrad_compiled.entries() == 2


def test_sizes_used_as_numbers_stay_static(jg):
    # x * B takes B as a float: the library cannot follow it, so per size
    cf = jg.compile(lambda x: x * x.shape[0], backend="interp")
    for b in [64, 17, 33]:
        x = jg.ones(b, 2)
        assert cf(x).detach().numpy().tobytes() == (x * b).detach().numpy().tobytes()
    assert cf._jitgrad_compiled.entries() == 3


def run_logged(src):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                       text=True, env={**os.environ, "JITGRAD_LOG": "recompiles"})
    assert p.returncode == 0, p.stderr
    return p.stdout, [line for line in p.stderr.splitlines() if line.startswith("jitgrad:")]


def test_recompile_log_names_the_dynamic_dim():
    _, log = run_logged("""
        import jitgrad as torch
        lin = torch.nn.Linear(3, 2)
        f = torch.compile(lambda x: lin(x).relu(), backend="interp")
        for b in [64, 64, 17, 33]:
            f(torch.ones(b, 3))
    """)
    assert "jitgrad: dim 0 of x went dynamic (64 -> 17)" in log, log
    assert sum(line.startswith("jitgrad: recompiling") for line in log) == 1, log
    _, log = run_logged("""
        import jitgrad as torch
        lin = torch.nn.Linear(3, 2)
        f = torch.compile(lambda x: lin(x).relu(), backend="interp", dynamic=True)
        for b in [64, 17, 33]:
            f(torch.ones(b, 3))
    """)
    assert "jitgrad: dim 0 of x went dynamic (64, traced again at 65)" in log, log
    assert not any(line.startswith("jitgrad: recompiling") for line in log), log
    _, log = run_logged("""
        import jitgrad as torch
        f = torch.compile(lambda scale, batch: batch["x"] * 2 + batch["y"], backend="interp")
        for b in [8, 5]:
            f(2, {"x": torch.ones(b, 3), "y": torch.ones(b, 3)})
    """)
    assert ("jitgrad: dim 0 of batch['x'], dim 0 of batch['y'] went dynamic (8 -> 5)" in log), log


def test_recompile_log_says_why_dims_stay_static():
    _, log = run_logged("""
        import jitgrad as torch
        f = torch.compile(lambda x: x * (x.shape[0] // 2), backend="interp")  # float(B // 2)
        for b in [64, 17]:
            f(torch.ones(b, 3))
    """)
    assert ("jitgrad: input sizes of entry 1 stay static: the program used a size that changed "
            "(32 -> 8) in a way the library cannot follow (len(), float(), /)") in log, log


def test_custom_functions_go_dynamic(jg):
    class Sq(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    cf = jg.compile(lambda x: Sq.apply(x).sum(dim=1), backend="interp")
    jg.manual_seed(6)
    for b in [8, 5, 3, 7]:
        x = jg.randn(b, 2, requires_grad=True)
        want = Sq.apply(x).sum(dim=1)
        got = cf(x)
        assert got.detach().numpy().tobytes() == want.detach().numpy().tobytes()
        (gw,) = jg.autograd.grad(want.sum(), [x])
        (gg,) = jg.autograd.grad(got.sum(), [x])
        assert gg.numpy().tobytes() == gw.numpy().tobytes()
    assert cf._jitgrad_compiled.entries() == 2  # (more: test_compile_dynamic_custom.py)


def test_one_object_for_every_size(jg, tmp_path, monkeypatch):
    """The generated C takes sizes as parameters: in a fresh cache, a
    dynamic training step compiles its graphs at the first call only, and
    every later batch size loads those objects; bitwise eager's."""
    if not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    objects = lambda: sorted(p.name for p in tmp_path.glob("*.so"))  # noqa: E731
    losses, params = {}, {}
    for backend in [None, "c"]:
        model = block(jg)
        opt = jg.optim.SGD(model.parameters(), lr=0.05)

        def step(x, y):
            loss = jg.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        if backend:
            step = jg.compile(step, backend=backend)
        jg.manual_seed(4)
        losses[backend] = []
        for i, b in enumerate([12, 7, 30, 2, 9, 7]):
            x, y = jg.randn(b, 5, 8), jg.randn(b, 5, 8)
            losses[backend].append(step(x, y).detach().numpy().tobytes())
            if backend and i == 0:
                first = objects()
        params[backend] = [p.detach().numpy().tobytes() for p in model.parameters()]
    assert first and objects() == first
    # 12; 7 (momentum_buffer was None at the first trace, see above), 30
    # makes the batch dynamic; 2, 9 and 7 reuse it
    assert step._jitgrad_compiled.entries() == 3
    assert losses["c"] == losses[None]
    assert params["c"] == params[None]


def gpt(T, V=11, C=16, H=2, Bk=12):
    """A nanoGPT-style forward: token and position embeddings (arange(L)),
    causal attention written out with sizes read in Python, GELU MLP."""
    F = T.nn.functional

    class GPT(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = T.nn.Embedding(V, C), T.nn.Embedding(Bk, C)
            self.ln_1, self.ln_2, self.ln_f = T.nn.LayerNorm(C), T.nn.LayerNorm(C), T.nn.LayerNorm(C)
            self.c_attn, self.c_proj = T.nn.Linear(C, 3 * C), T.nn.Linear(C, C)
            self.fc, self.out = T.nn.Linear(C, 4 * C), T.nn.Linear(4 * C, C)
            self.head = T.nn.Linear(C, V, bias=False)
            self.register_buffer("mask", T.ones(Bk, Bk).tril().view(1, 1, Bk, Bk))

        def forward(self, idx, targets):
            B, L = idx.shape
            x = self.wte(idx) + self.wpe(T.arange(0, L))
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, L, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
            att = att.masked_fill(self.mask[:, :, :L, :L] == 0, float("-inf")).softmax(dim=-1)
            x = x + self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, L, C))
            x = x + self.out(F.gelu(self.fc(self.ln_2(x))))
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.view(B * L, V), targets.view(B * L))

    T.manual_seed(0)
    return GPT()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sizes,traces", [
    ([(2, 8), (2, 5), (3, 8), (4, 6), (2, 2), (5, 11), (3, 8)], 3),  # L, then B: a symbol each
    ([(2, 8), (3, 5), (4, 6), (2, 2), (5, 11)], 2),  # both at once: one more trace between
])
def test_gpt_batch_and_length_vary(jg, backend, sizes, traces):
    """B and L change: after the traces that tell them apart, every (B, L)
    runs from one entry; loss and every gradient bitwise eager's."""
    if backend not in backends(jg):
        pytest.skip("no C compiler")
    model = gpt(jg)
    cf = jg.compile(model, backend=backend)
    jg.manual_seed(1)
    for b, n in sizes:
        idx, tgt = jg.randint(0, 11, (b, n)), jg.randint(0, 11, (b, n))
        want = model(idx, tgt)
        want.backward()
        grads = [p.grad.numpy().tobytes() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        got = cf(idx, tgt)
        assert got.detach().numpy().tobytes() == want.detach().numpy().tobytes(), (b, n)
        got.backward()
        assert [p.grad.numpy().tobytes() for p in model.parameters()] == grads, (b, n)
        model.zero_grad(set_to_none=True)
    compiled = cf.forward._jitgrad_compiled
    assert compiled.entries() == traces
    assert compiled.fallbacks() == 0
