"""A whole training step (forward, backward, optimizer step) under
jitgrad.compile: backward is traced into the program's graph, the step's
writes are mutations applied after each call; the first call (which
creates the momentum buffers) runs eagerly.  autograd.grad inside a program
is traced too (test_compile_autograd_grad.py), except w.r.t. a value and one
it is computed from: a graph break."""
import pytest


def make(T):
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 2))
    opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        loss = T.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    return model, step


def train(T, compiled, **kw):
    model, step = make(T)
    if compiled:
        step = T.compile(step, backend="interp", **kw)
    T.manual_seed(1)
    x, y = T.randn(16, 4), T.randn(16, 2)
    losses = [step(x, y).item() for _ in range(4)]
    return losses, [p.detach().tolist() for p in model.parameters()], step


def test_train_step_with_backward_is_compiled(jg):
    ref_losses, ref_params, _ = train(jg, False)
    losses, params, step = train(jg, True)
    assert losses == ref_losses and params == ref_params
    assert step._jitgrad_compiled.fallbacks() == 1  # the first step creates the buffers
    assert step._jitgrad_compiled.entries() == 1


def test_autograd_grad_inside_program_is_traced(jg):
    w = jg.tensor([2.0, 3.0], requires_grad=True)

    def f(x):
        (g,) = jg.autograd.grad((w * x).sum(), [w])
        return g * 2

    x = jg.tensor([1.0, 5.0])
    cf = jg.compile(f, backend="interp", fullgraph=True)
    assert cf(x).tolist() == f(x).tolist() == [2.0, 10.0]
    assert cf._jitgrad_compiled.fallbacks() == 0


def test_train_step_fullgraph(jg):
    ref_losses, ref_params, _ = train(jg, False)
    losses, params, step = train(jg, True, fullgraph=True)
    assert losses == ref_losses and params == ref_params
    assert step._jitgrad_compiled.entries() == 1


def test_autograd_grad_of_value_and_ancestor_inside_program_is_traced(jg):
    # (it was a graph break): one graph, the results eager's
    w = jg.tensor([2.0, 3.0], requires_grad=True)

    def f(x):
        h = w * x
        g, gw = jg.autograd.grad(h.sum(), [h, w])
        return g * 2, gw

    x = jg.tensor([1.0, 5.0])
    cf = jg.compile(f, backend="interp", fullgraph=True)
    got, want = cf(x), f(x)
    assert [t.tolist() for t in got] == [t.tolist() for t in want] == [[2.0, 2.0], [1.0, 5.0]]
    assert cf._jitgrad_compiled.fallbacks() == 0
