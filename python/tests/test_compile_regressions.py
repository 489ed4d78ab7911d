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
