"""Compiled gradients that differed from eager in the last bits (fuzz seeds
100206, 104321, 150492, 165347, 180508 of a 10^5-program run).

Class: the layout of compiled outputs. Eager gives an elementwise result of
strided operands their dim order (PyTorch's TensorIterator rule); compiled
outputs were row-major. A later `contiguous()` then was a copy after eager
and the value itself after the compiled call, so autograd summed the
gradient contributions in another order. Compiled outputs (and traced
values) now carry eager's layout."""
import pytest

import jitgrad as jg

BACKENDS = ["interp"] + (["c"] if jg.HAS_COMPILER else [])

B1 = [[1.614, 0.479], [0.816, 0.462]]
W = [[-0.625, 0.625], [0.125, -0.375]]


def program(x1):
    v1 = x1.contiguous()
    v3 = x1 * x1 + 0.5
    return v3, v1


def run(T, first, second):
    """first(b1.t()), then second() on its first output; the gradient of b1."""
    b1 = T.tensor(B1, dtype=T.float32).requires_grad_(True)
    w = T.tensor(W, dtype=T.float32)
    x = first(b1.t())[0]
    o = second(x)
    loss = (o[0] * w).sum() + (o[1] * w).sum()
    (g,) = T.autograd.grad(loss, [b1])
    return x, g


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_output_keeps_eager_layout(backend):
    f = jg.compile(program, backend=backend)
    a = jg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).t()
    for got, want in zip(f(a), program(a)):
        assert got.stride() == want.stride()
        assert got.is_contiguous() == want.is_contiguous()
        assert got.tolist() == want.tolist()
    # the layout decides contiguous() and view() inside the graph as in eager
    g = jg.compile(lambda x: (x * 2).contiguous().view(6), backend=backend)
    assert g(a).tolist() == (a * 2).contiguous().view(6).tolist()
    with pytest.raises(RuntimeError):
        jg.compile(lambda x: (x * 2).view(6), backend=backend)(a)
    with pytest.raises(RuntimeError):
        (a * 2).view(6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_order_after_strided_output(backend, torch):
    x_e, g_e = run(jg, program, program)
    f = jg.compile(program, backend=backend)
    x_c, g_c = run(jg, f, f)
    assert x_c.stride() == x_e.stride()
    assert repr(g_c.tolist()) == repr(g_e.tolist())  # bitwise
    _, g_t = run(torch, program, program)
    assert repr(g_e.tolist()) == repr(g_t.tolist())
