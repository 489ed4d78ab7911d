"""Compiled programs with many outputs and writes: a whole training step
of a 30-layer MLP (60 parameters; each step writes every parameter, its
.grad and its momentum buffer) and of examples/gpt's GPT (a tiny config,
28 parameters) runs as one compiled graph, bitwise equal to eager, and a
function returning 100 tensors compiles."""
import importlib.util
import os

import pytest

BACKENDS = ["interp", "c"]
LAYERS, WIDTH, STEPS = 30, 6, 10


def mlp_train(T, backend=None):
    T.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [T.nn.Linear(WIDTH, WIDTH), T.nn.Tanh()]
    model = T.nn.Sequential(*layers)
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        loss = T.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    if backend:
        step = T.compile(step, backend=backend, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(4, WIDTH), T.randn(4, WIDTH)
    losses = [step(x, y).detach().numpy().tobytes() for _ in range(STEPS)]
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    grads = [None if p.grad is None else p.grad.numpy().tobytes() for p in model.parameters()]
    bufs = [opt.state[p]["momentum_buffer"].numpy().tobytes() for p in model.parameters()]
    return (losses, params, grads, bufs), step


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_step_of_30_layer_mlp_is_one_graph(jg, backend):
    ref, _ = mlp_train(jg)
    got, step = mlp_train(jg, backend)
    assert len(got[1]) == 2 * LAYERS
    assert got == ref
    c = step._jitgrad_compiled
    # the first call creates the momentum buffers (eager, once); every
    # later one runs the single traced graph, no break
    assert c.entries() == 1
    assert c.fallbacks() == 1
    assert "graph break" not in c.graph(0)


MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "gpt",
                     "model.py")


def gpt_train(T, attn, backend=None):
    spec = importlib.util.spec_from_file_location("jitgrad_example_gpt_model", MODEL)
    M = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(M)
    cfg = M.GPTConfig(vocab_size=32, block_size=8, n_layer=2, n_head=2, n_embd=16, attn=attn)
    GPT, _ = M.build(T)
    T.manual_seed(0)
    model = GPT(cfg)
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(idx, tgt):
        _, loss = model(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    if backend:
        step = T.compile(step, backend=backend, fullgraph=True)
    T.manual_seed(1)
    idx = (T.rand(2, cfg.block_size) * cfg.vocab_size).long()
    tgt = (T.rand(2, cfg.block_size) * cfg.vocab_size).long()
    losses = [step(idx, tgt).detach().numpy().tobytes() for _ in range(STEPS)]
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    return (losses, params), step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attn", ["builtin", "custom"])
def test_whole_step_of_gpt_is_one_graph(jg, backend, attn):
    ref, _ = gpt_train(jg, attn)
    got, step = gpt_train(jg, attn, backend)
    assert len(got[1]) > 16
    assert got == ref
    assert step._jitgrad_compiled.entries() == 1
    assert step._jitgrad_compiled.fallbacks() == 1  # the first step makes the buffers


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_returning_100_tensors(jg, backend):
    def f(x):
        return [(x * (k + 1)).tanh() + k for k in range(100)]

    cf = jg.compile(f, backend=backend, fullgraph=True)
    for seed in range(2):
        jg.manual_seed(seed)
        x = jg.randn(3, requires_grad=True)
        xc = x.detach().clone().requires_grad_(True)
        ref, got = f(x), cf(xc)
        assert isinstance(got, list) and len(got) == 100
        assert [t.detach().numpy().tobytes() for t in got] == [
            t.detach().numpy().tobytes() for t in ref
        ]
        sum(r.sum() for r in ref[::7]).backward()
        sum(g.sum() for g in got[::7]).backward()
        assert xc.grad.numpy().tobytes() == x.grad.numpy().tobytes()
    assert cf._jitgrad_compiled.entries() == 1
    assert cf._jitgrad_compiled.fallbacks() == 0


class Box:
    def __init__(self, ts):
        self.ts = ts


def test_custom_function_reaching_too_many_tensors_names_the_bound(jg):
    # a custom Function keeps its own bound on traced slots (arguments plus
    # tensors reached through an object): past it, the break says so
    class Total(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x, box):
            out = x
            for t in box.ts:
                out = out + t
            return out

        @staticmethod
        def backward(ctx, g):
            return g, None

    def f(x):
        return Total.apply(x, Box([x * k for k in range(70)]))

    x = jg.randn(3)
    with pytest.raises(RuntimeError, match="Total.forward uses more than 64 traced tensors"):
        jg.compile(f, backend="interp", fullgraph=True)(x)
    # without fullgraph: eager, with eager's result
    got = jg.compile(f, backend="interp")(x)
    assert got.numpy().tobytes() == f(x).numpy().tobytes()


def test_returned_tensor_room_has_a_clear_bound(jg):
    # the outputs array is sized before the function runs: 4096 distinct
    # tensors fit, one more is a clear error (no overflow); one tensor
    # returned in many places is one output, the same object in each
    x = jg.randn(2)
    got = jg.compile(lambda x: [x * 2] * 5000, backend="interp", fullgraph=True)(x)
    assert len(got) == 5000 and all(g is got[0] for g in got)
    assert got[4999].tolist() == (x * 2).tolist()
    rows = jg.compile(lambda x, n: list((x * 2).expand(n, 2)), backend="interp", fullgraph=True)
    got = rows(x, 4096)
    assert len(got) == 4096 and got[4095].tolist() == (x * 2).tolist()
    with pytest.raises(RuntimeError, match="a compiled function returns at most 4096 tensors"):
        rows(x, 4097)
