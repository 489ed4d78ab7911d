"""Compiled programs that failed where eager works: a backward for fewer
outputs than the full one, programs without tensor outputs, and the error a
graph break's eager run raises."""
import pytest

import jitgrad as jg

BACKENDS = ["interp"] + (["c"] if jg.HAS_COMPILER else [])


class TwoOpaque(jg.autograd.Function):
    """Two outputs; reading a value in forward makes the traced call opaque."""

    @staticmethod
    def forward(ctx, x):
        s = float(x.detach().sum())
        return x * 2.0, x * s

    @staticmethod
    def backward(ctx, g0, g1):
        return g0 * 2.0 + g1


class NoGrad(jg.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y * 1.0

    @staticmethod
    def backward(ctx, g):
        return None


@pytest.mark.parametrize("backend", BACKENDS)
def test_opaque_output_reached_without_gradient(backend):
    # the compiled output is reached by backward but gets no gradient: the
    # opaque call's backward still runs on zeros for BOTH its outputs,
    # reading the history of the one the program does not return
    def f(x):
        a, _ = TwoOpaque.apply(x)
        return a

    g = jg.compile(f, backend=backend)
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    NoGrad.apply(g(x)).sum().backward()
    assert x.grad is not None and x.grad.tolist() == [0.0, 0.0]  # PyTorch: zeros
    x.grad = None
    g(x).sum().backward()  # the full backward still works after the partial one
    assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", [None, 2.5, ("a", 1), ()])
def test_no_tensor_outputs_returns_the_value(backend, value):
    g = jg.compile(lambda: value, backend=backend)
    assert g() == value and g() == value


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_step_without_outputs(backend):
    p = jg.tensor([1.0, 2.0, 3.0])

    def step(p, d):
        p.sub_(d * 0.5)  # returns nothing

    g = jg.compile(step, backend=backend, fullgraph=True)
    d = jg.tensor([2.0, 2.0, 4.0])
    v = p._version
    assert g(p, d) is None and g(p, d) is None
    assert p.tolist() == [-1.0, 0.0, -1.0]
    assert p._version > v


@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_update_without_outputs(backend):
    x = jg.tensor([1.0, 2.0])
    g = jg.compile(lambda: (x.add_(jg.ones(2)), None)[1], backend=backend)
    assert g() is None
    assert x.tolist() == [2.0, 3.0]
    assert g() is None
    assert x.tolist() == [3.0, 4.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_graph_break_eager_error_is_its_own(backend, capfd):
    # the trace breaks (an in-place op on a captured tensor); the eager run
    # then fails: its error is raised, not the break's, and x is as eager
    # leaves it
    x = jg.tensor([1.0, 2.0])

    def f():
        x.add_(jg.ones(2))
        return x + jg.ones(3)

    g = jg.compile(f, backend=backend)
    for want in ([2.0, 3.0], [3.0, 4.0]):
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            g()
        assert x.tolist() == want
    capfd.readouterr()
