"""A compiled call is one autograd node for many eager nodes: an input that
only an unreached output of the call depends on is not part of the backward,
so custom functions before it do not run and autograd.grad reports None for
what lies behind it, as in eager mode and PyTorch (fuzz seed 20983)."""
import pytest

import jitgrad as jg

BACKENDS = ["interp"] + (["c"] if jg.HAS_COMPILER else [])


def make(T):
    class Ident(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return b

        @staticmethod
        def backward(ctx, g):
            return g, g

    def fn(x, y):
        return Ident.apply(y, y), x * y
    return Ident, fn


def run(T, compiled=None):
    Ident, fn = make(T)
    f = compiled(fn) if compiled else fn
    a = T.ones(2, requires_grad=True)
    b = T.tensor([2.0, 3.0], requires_grad=True)
    out0 = f(a, b)  # out0[0] depends on b through Ident
    c = T.tensor([0.5, 4.0], requires_grad=True)
    out1 = f(out0[0], c)  # out0[0] feeds only out1[1]
    gs = T.autograd.grad(out1[0].sum(), [a, b, c], allow_unused=True)
    return [None if g is None else g.tolist() for g in gs]


def test_eager_matches_torch():
    torch = pytest.importorskip("torch")
    assert run(jg) == run(torch) == [None, None, [2.0, 2.0]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unreached_output_input_gets_none_compiled(backend):
    assert run(jg, lambda f: jg.compile(f, backend=backend)) == run(jg)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_leaves_grad_of_unreached_side_none(backend):
    Ident, fn = make(jg)
    f = jg.compile(fn, backend=backend)
    a = jg.ones(2, requires_grad=True)
    b = jg.tensor([2.0, 3.0], requires_grad=True)
    o = f(a, b)
    o2 = f(o[0], jg.ones(2, requires_grad=True))
    o2[0].sum().backward()
    assert a.grad is None and b.grad is None
