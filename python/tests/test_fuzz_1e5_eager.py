"""Eager jitgrad against PyTorch 1.13 on the ops where the 10^5-program fuzz
run found a difference in value (semantics, not rounding): each test names
the op and the fuzz seed that found it."""
import random

import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")


def bits(t, dt):
    return np.array(t.detach().tolist(), dtype=dt)


def same_bits(a, b):
    """Equal values, NaN where NaN, and the same sign of zero."""
    return np.array_equal(a, b, equal_nan=True) and np.array_equal(
        np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)])
    )


def values(n=2000):
    rng = random.Random(122818)
    v = [round(rng.uniform(-2.0, 2.0), 3) for _ in range(n)]
    v += [rng.uniform(-1e3, 1e3) for _ in range(n)]
    return v + [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-30, 3e38]


def test_pow_scalar_2_is_x_times_x_seed122818():
    # fuzz 122818: (C1 ** 2 != C1 * C1) was True at -1.439 (libm pow off by one ulp)
    x = jitgrad.tensor([[-0.985], [-1.216], [-1.439]], dtype=jitgrad.float32)
    assert (x**2 != x * x).tolist() == [[False], [False], [False]]


@pytest.mark.parametrize("e", [2, 3, -2, 0.5, -0.5, -1, 1, 0])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_pow_scalar_special_exponents_bitwise_torch_seed122818(e, dt):
    nd = np.float32 if dt == "float32" else np.float64
    v = values()
    j = jitgrad.tensor(v, dtype=getattr(jitgrad, dt)) ** e
    t = torch.tensor(v, dtype=getattr(torch, dt)) ** e
    assert same_bits(bits(j, nd), bits(t, nd))


def test_pow_scalar_2_grad_bitwise_torch_seed122818():
    v = values(500)[:1000]
    xj = jitgrad.tensor(v, dtype=jitgrad.float32, requires_grad=True)
    xt = torch.tensor(v, dtype=torch.float32, requires_grad=True)
    for x, T in ((xj, jitgrad), (xt, torch)):
        ((x**3) * T.tensor(v, dtype=T.float32)).sum().backward()
    assert same_bits(bits(xj.grad, np.float32), bits(xt.grad, np.float32))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pow_scalar_compiled_equals_eager_seed122818(backend):
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C compiler")

    def f(x):
        return x**2 + x**-0.5 + x**3 + x**-2 + x**-1 + x**0.5 + x**1.7

    v = [abs(a) + 0.01 for a in values(200)[:400]]
    xe = jitgrad.tensor(v, dtype=jitgrad.float32, requires_grad=True)
    xc = jitgrad.tensor(v, dtype=jitgrad.float32, requires_grad=True)
    ye, yc = f(xe), jitgrad.compile(f, backend=backend)(xc)
    ye.sum().backward()
    yc.sum().backward()
    assert repr(ye.tolist()) == repr(yc.tolist())
    assert repr(xe.grad.tolist()) == repr(xc.grad.tolist())
