"""hardswish and hardsigmoid as op-table rows with PyTorch's backward rows:
values, gradients and double backward equal PyTorch 1.13's, including at
the breakpoints -3 and 3 (a composed form had a second derivative of 1/3
instead of 0 at -3: fuzz seed 6130327), and compiled equal to eager
bitwise.  PyTorch's hardswish_backward differs between its vectorized
loop (x >= 3 passes g; NaN gives NaN) and the scalar loop over the
elements after the last full vector (x <= 3 gives 1.5 g; NaN passes g):
the special points come first in a long tensor, so PyTorch computes them
in the vectorized loop, whose rules jitgrad follows."""
import pytest

import jitgrad

torch = pytest.importorskip("torch")

POINTS = [-4.0, -3.5, -3.0, -2.999, -1.0, -0.0, 0.0, 0.5, 2.999, 3.0, 3.5, float("nan"),
          float("inf"), float("-inf")] + [0.25] * 50


def run(lib, name, dtype, vals):
    F = lib.nn.functional
    x = lib.tensor(vals, dtype=dtype, requires_grad=True)
    y = getattr(F, name)(x)
    w = lib.tensor([0.5 + 0.25 * i for i in range(len(vals))], dtype=dtype)
    (g,) = lib.autograd.grad((y * w).sum(), x, create_graph=True)
    try:
        (h,) = lib.autograd.grad((g * w).sum(), x, allow_unused=True)
    except RuntimeError as e:  # hardsigmoid's: not implemented in PyTorch 1.13
        return y.tolist(), g.tolist(), g.requires_grad, str(e).splitlines()[0]
    return y.tolist(), g.tolist(), g.requires_grad, None if h is None else h.tolist()


def same(a, b):
    return repr(a) == repr(b)


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_hard_activations_match_torch(name, dt):
    jy, jg, jrg, jh = run(jitgrad, name, getattr(jitgrad, dt), POINTS)
    ty, tg, trg, th = run(torch, name, getattr(torch, dt), POINTS)
    assert same(jy, ty)
    assert same(jg, tg)
    assert jrg == trg
    assert same(jh, th)


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid"])
def test_hard_activations_inplace_and_module(name):
    got = []
    for lib in (jitgrad, torch):
        x = lib.tensor(POINTS[:11])
        y = getattr(lib.nn.functional, name)(x.clone(), inplace=True)
        m = {"hardswish": lib.nn.Hardswish, "hardsigmoid": lib.nn.Hardsigmoid}[name]()
        got.append((y.tolist(), m(x).tolist()))
    assert same(got[0], got[1])


def test_hard_activations_int_input_refused():
    for name in ("hardswish", "hardsigmoid"):
        x = jitgrad.tensor([1, 2])
        with pytest.raises(RuntimeError, match=f"\"{name}_cpu\" not implemented for 'Long'"):
            getattr(jitgrad.nn.functional, name)(x)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_hard_activations_compiled_equal_eager(backend):
    def step(x):
        y = jitgrad.nn.functional.hardswish(x * 3.0) + jitgrad.nn.functional.hardsigmoid(x)
        (g,) = jitgrad.autograd.grad(y.sum(), x)
        return y, g

    x = jitgrad.linspace(-2.0, 2.0, 41).requires_grad_()
    ey, eg = step(x)
    cy, cg = jitgrad.compile(step, backend=backend, fullgraph=True)(x)
    assert same(ey.tolist(), cy.tolist())
    assert same(eg.tolist(), cg.tolist())
