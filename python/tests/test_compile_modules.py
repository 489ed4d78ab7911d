"""compile of nn.Module programs: compile(module) gives PyTorch 2's
OptimizedModule, parameters deep in a module tree are guarded by identity
(rebinding one traces again), embedding traces without reading its
indices, and compiled training equals eager bitwise."""
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.nn as nn
import jitgrad.nn.functional as F

BACKENDS = ["interp", "c"]


def backend_or_skip(backend):
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C backend")
    return backend


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc = nn.Linear(d, d)
        self.act = nn.GELU()

    def forward(self, x):
        return x + self.act(self.fc(self.ln(x)))


class Net(nn.Module):
    def __init__(self, vocab=11, d=8, n=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.body = nn.ModuleDict(dict(blocks=nn.ModuleList([Block(d) for _ in range(n)])))
        self.head = nn.Linear(d, vocab)
        self.scale = 1.0

    def forward(self, idx, targets):
        x = self.emb(idx)
        for b in self.body.blocks:
            x = b(x)
        logits = self.head(x) * self.scale
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                               ignore_index=-1)

    def describe(self):
        return f"Net with {len(self.body.blocks)} blocks"


def data(seed=0):
    rng = np.random.default_rng(seed)
    x = jitgrad.from_numpy(rng.integers(0, 11, (3, 5)))
    y = rng.integers(0, 11, (3, 5))
    y[0, 0] = -1
    return x, jitgrad.from_numpy(y)


def test_embedding_traces_without_graph_break():
    # the index range check is skipped for traced indices without touching
    # their values (which used to record a graph break)
    w = jitgrad.randn(10, 4, requires_grad=True)
    idx = jitgrad.tensor([[1, 2], [3, 9]])
    fn = jitgrad.compile(lambda i: F.embedding(i, w).sum(), backend="interp", fullgraph=True)
    fn(idx).backward()
    g = w.grad.clone()
    w.grad = None
    F.embedding(idx, w).sum().backward()
    assert np.array_equal(g.numpy(), w.grad.numpy())
    assert fn._jitgrad_compiled.fallbacks() == 0


def test_compile_sees_rebound_parameter_deep_in_module():
    jitgrad.manual_seed(0)
    m = Net()
    fn = jitgrad.compile(m.__call__, backend="interp", fullgraph=True)
    x, y = data()
    assert fn(x, y).item() == m(x, y).item()
    # a parameter six modules deep (model, ModuleDict, ModuleList, Block,
    # Linear) replaced by another tensor: the program must read the new one
    m.body.blocks[1].fc.weight = nn.Parameter(jitgrad.zeros(8, 8))
    want = m(x, y).item()
    assert fn(x, y).item() == want
    m.body.blocks[0].ln.bias = nn.Parameter(jitgrad.ones(8))
    assert fn(x, y).item() == m(x, y).item() != want
    assert fn._jitgrad_compiled.entries() == 3


def test_compile_warns_when_scope_walk_runs_out():
    big = list(range(70000))
    w = jitgrad.ones(3)

    def f(x):
        return x * w + len(big)

    fn = jitgrad.compile(f, backend="interp")
    with pytest.warns(UserWarning, match="reaches more than 65536 objects"):
        fn(jitgrad.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn(jitgrad.ones(3))  # once per compiled function


def test_compile_module_is_an_optimized_module():
    jitgrad.manual_seed(0)
    m = Net()
    om = jitgrad.compile(m, backend="interp")
    assert isinstance(om, nn.Module) and type(om).__name__ == "OptimizedModule"
    assert om._orig_mod is m
    assert [id(p) for p in om.parameters()] == [id(p) for p in m.parameters()]
    assert list(om.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    assert om.describe() == "Net with 2 blocks" and om.scale == 1.0  # the original's
    assert om.body is m.body
    om.eval()
    assert not m.training and not m.body.blocks[0].training
    om.train()
    assert m.training
    assert repr(om).startswith("OptimizedModule(\n  (_orig_mod): Net(")
    # a non-module passes through as before
    assert callable(jitgrad.compile(lambda t: t + 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_module_training_equals_eager(backend):
    backend_or_skip(backend)
    jitgrad.manual_seed(0)
    eager = Net()
    twin = Net()
    twin.load_state_dict(eager.state_dict())
    om = jitgrad.compile(twin, backend=backend, fullgraph=True)
    opts = [jitgrad.optim.AdamW(mm.parameters(), lr=1e-2) for mm in (eager, om)]
    for step in range(3):
        x, y = data(step)
        losses = []
        for mm, opt in zip((eager, om), opts):
            loss = mm(x, y)
            loss.backward()
            losses.append(loss.item())
        assert losses[0] == losses[1], step
        for (n, a), b in zip(eager.named_parameters(), twin.parameters()):
            assert np.array_equal(a.grad.numpy(), b.grad.numpy()), (step, n)
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)
    om.eval()  # another trace (training is baked in), same values
    with jitgrad.no_grad():
        assert om(x, y).item() == eager.eval()(x, y).item()
    assert om.forward._jitgrad_compiled.fallbacks() == 0


def test_compile_scope_walk_stops_in_library_code():
    # the walk follows helper functions a few calls deep only: jitgrad's own
    # Python code (save -> pickling -> ...) would otherwise fill the budget
    def f(x):
        if x is None:
            jitgrad.save(x, None)  # named, never called
        return F.gelu(x) * 2

    fn = jitgrad.compile(f, backend="interp")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = fn(jitgrad.ones(3))
    assert y.tolist() == (F.gelu(jitgrad.ones(3)) * 2).tolist()


def test_recompile_log_names_the_whole_path_of_a_deep_parameter(monkeypatch, capfd):
    monkeypatch.setenv("JITGRAD_LOG", "recompiles")
    jitgrad.manual_seed(0)
    m = Net()
    fn = jitgrad.compile(m.__call__, backend="interp")
    x, y = data()
    fn(x, y)
    capfd.readouterr()
    m.body.blocks[1].fc.weight = nn.Parameter(jitgrad.zeros(8, 8))
    fn(x, y)
    err = capfd.readouterr().err
    assert ("captured tensors changed: self.body.blocks[1].fc.weight is a different tensor"
            in err)
