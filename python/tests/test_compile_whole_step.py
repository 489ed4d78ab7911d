"""The optimizer step compiled: opt.step() (and zero_grad(set_to_none=False))
inside jitgrad.compile updates parameters, optimizer state and .grad in
place; the compiled call traces those writes and applies them to the real
tensors after each call.  Twenty steps give losses, parameters, .grad and
state bitwise equal to the eager loop, on both backends.  backward()
inside the program is still a graph break (see test_compile_train_step.py)."""
import pytest

BACKENDS = ["interp", "c"]


def make(T, opt_name, **kw):
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 2))
    opt = getattr(T.optim, opt_name)(model.parameters(), lr=0.05, **kw)
    return model, opt


def train(T, opt_name, kw, backend=None, zero_in_step=False, fullgraph=True):
    model, opt = make(T, opt_name, **kw)

    def step():
        opt.step()
        if zero_in_step:
            opt.zero_grad(set_to_none=False)

    if backend:
        step = T.compile(step, backend=backend, fullgraph=fullgraph)
    T.manual_seed(1)
    x, y = T.randn(16, 4), T.randn(16, 2)
    losses = []
    for _ in range(20):
        loss = T.nn.functional.mse_loss(model(x), y)
        losses.append(loss.item())
        loss.backward()
        step()
        if not zero_in_step:
            opt.zero_grad(set_to_none=True)
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    grads = [None if p.grad is None else p.grad.numpy().tobytes() for p in model.parameters()]
    state = [
        {k: (v.numpy().tobytes() if isinstance(v, T.Tensor) else v) for k, v in opt.state[p].items()}
        for p in model.parameters()
    ]
    return losses, params, grads, state, step


CASES = [
    ("SGD", {}, 1, 0),
    ("SGD", {"momentum": 0.9, "weight_decay": 0.01}, 1, 1),  # the first step creates the buffers
    ("SGD", {"momentum": 0.9, "nesterov": True}, 1, 1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("zero_in_step", [False, True])
@pytest.mark.parametrize("opt_name,kw,entries,fallbacks", CASES)
def test_compiled_optimizer_step_matches_eager(jg, backend, zero_in_step, opt_name, kw, entries,
                                               fallbacks):
    ref = train(jg, opt_name, kw, zero_in_step=zero_in_step)
    got = train(jg, opt_name, kw, backend=backend, zero_in_step=zero_in_step)
    assert got[:4] == ref[:4]
    compiled = got[4]._jitgrad_compiled
    assert compiled.entries() == entries
    assert compiled.fallbacks() == fallbacks


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_adam_step_reads_its_count_and_runs_eagerly(jg, opt_name):
    # the bias corrections come from step.item(): a graph break, cached; the
    # calls run eagerly and train exactly as eager
    ref = train(jg, opt_name, {})
    got = train(jg, opt_name, {}, backend="interp", fullgraph=False)
    assert got[:4] == ref[:4]
    assert got[4]._jitgrad_compiled.fallbacks() == 20


def test_zero_grad_set_to_none_in_program_is_a_graph_break(jg):
    model, opt = make(jg, "SGD")
    model(jg.ones(2, 4)).sum().backward()
    f = jg.compile(lambda: opt.zero_grad(set_to_none=True), backend="interp")
    f()
    assert all(p.grad is None for p in model.parameters())
    model(jg.ones(2, 4)).sum().backward()
    f()  # the eager run clears them again (traced once, it would not)
    assert all(p.grad is None for p in model.parameters())
    g = jg.compile(lambda: opt.zero_grad(set_to_none=True), backend="interp", fullgraph=True)
    model(jg.ones(2, 4)).sum().backward()
    with pytest.raises(RuntimeError, match="assigning the .grad of a tensor captured"):
        g()
    assert all(p.grad is not None for p in model.parameters())


def test_buffer_update_in_program_is_written_back(jg):
    # a running statistic updated under no_grad, as BatchNorm's
    buf = jg.zeros(3)

    def f(x):
        with jg.no_grad():
            buf.mul_(0.9).add_(x.mean(0) * 0.1)
        return x * 2

    x = jg.randn(5, 3)
    cf = jg.compile(f, backend="interp", fullgraph=True)
    ref = jg.zeros(3)
    for _ in range(3):
        cf(x)
        ref.mul_(0.9).add_(x.mean(0) * 0.1)
    assert buf.numpy().tobytes() == ref.numpy().tobytes()
    assert buf._version == ref._version
    assert cf._jitgrad_compiled.entries() == 1
