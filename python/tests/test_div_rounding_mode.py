"""Tensor.div / torch.div / divide / div_ with rounding_mode='trunc' and
'floor' against PyTorch 1.13: values and dtypes (integers stay integers),
zero gradients of float results, errors, and compiled == eager."""

import math

import pytest

import jitgrad as jg

torch = pytest.importorskip("torch")

A_F = [5.0, -7.0, 0.5, -0.0, 7.5, -1e30, math.inf, -math.inf, math.nan, 3.0]
B_F = [2.0, -3.0, 0.25, 1.0, -2.5, 3.0, 2.0, -0.5, 1.0, 0.0]
A_I = [5, -7, 9, -9, 0, 7, -1, 6]
B_I = [2, 2, -2, -4, 3, -7, 5, 3]


def same(x, y):
    assert str(x.dtype).split(".")[-1] == str(y.dtype).split(".")[-1]
    xs, ys = x.tolist(), y.tolist()
    assert len(xs) == len(ys)
    for u, v in zip(xs, ys):
        if isinstance(u, float) and math.isnan(u):
            assert math.isnan(v)
        else:
            assert u == v and math.copysign(1, u) == math.copysign(1, v), (xs, ys)


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("kind", ["float32", "float64", "int64", "int32", "int_by_float_scalar",
                                  "float_by_int_scalar", "int_by_int_scalar"])
def test_div_rounding_mode_values(mode, kind):
    def run(T):
        if kind.startswith("float") and "scalar" not in kind:
            dt = getattr(T, kind)
            return T.tensor(A_F, dtype=dt).div(T.tensor(B_F, dtype=dt), rounding_mode=mode)
        if kind in ("int64", "int32"):
            dt = getattr(T, kind)
            return T.div(T.tensor(A_I, dtype=dt), T.tensor(B_I, dtype=dt), rounding_mode=mode)
        if kind == "int_by_float_scalar":
            return T.tensor(A_I).div(-2.5, rounding_mode=mode)
        if kind == "float_by_int_scalar":
            return T.divide(T.tensor(A_F[:8]), -2, rounding_mode=mode)
        return T.tensor(A_I).div(-3, rounding_mode=mode)

    same(run(jg), run(torch))


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_mode_grad_zero(mode):
    grads = []
    for T in (jg, torch):
        a = T.tensor([5.0, -7.0, 0.5], requires_grad=True)
        b = T.tensor([2.0, -3.0, 0.25], requires_grad=True)
        r = a.div(b, rounding_mode=mode)
        assert r.requires_grad
        (r * T.tensor([1.0, 2.0, 3.0])).sum().backward()
        grads.append((a.grad.tolist(), b.grad.tolist()))
    assert grads[0] == grads[1] == ([0.0] * 3, [0.0] * 3)


def test_div_rounding_mode_errors():
    for T in (jg, torch):
        with pytest.raises(RuntimeError, match="div expected rounding_mode to be one of None, "
                           "'trunc', or 'floor' but found 'x'"):
            T.tensor([1.0]).div(2, rounding_mode="x")
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                           "output type Long"):
            T.tensor([5]).div_(2.5, rounding_mode="floor")
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            T.tensor([5, 6]).div(T.tensor([1, 0]), rounding_mode="trunc")


def test_div_rounding_mode_inplace():
    for mode in ("trunc", "floor"):
        x, t = jg.tensor(A_I), torch.tensor(A_I)
        x.div_(-2, rounding_mode=mode)
        t.div_(-2, rounding_mode=mode)
        same(x, t)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_div_rounding_mode_compiled(backend):
    def f(a, b, i, j):
        return (a.div(b, rounding_mode="floor") + a.div(b, rounding_mode="trunc"),
                i.div(j, rounding_mode="floor") * 3 + i.div(j, rounding_mode="trunc"))

    args = (jg.tensor(A_F[:8]), jg.tensor(B_F[:8]), jg.tensor(A_I), jg.tensor(B_I))
    eager = f(*args)
    compiled = jg.compile(f, backend=backend)(*args)
    for e, c in zip(eager, compiled):
        same(c, e)
