"""leaky_relu, hardtanh and relu6 as PyTorch 1.13 differentiates them: the
first derivative made with create_graph requires grad (its derivative in x
is zero, PyTorch's LeakyReluBackwardBackward0 / HardtanhBackwardBackward0),
so a second backward gives zeros where it used to raise "does not require
grad"; values and gradients at the bounds, NaN and +-inf, int inputs; and
compiled (interp, c) == eager bitwise, the second-order pass included."""
import math

import pytest

XS = [-math.inf, -7.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.25, 1.0, 3.0, 6.0, 6.5, math.inf, math.nan]

CASES = [
    ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("leaky_relu", {"negative_slope": -1.5}),
    ("hardtanh", {}),
    ("hardtanh", {"min_val": -2.5, "max_val": 3.0}),
    ("hardtanh", {"min_val": 2.0, "max_val": 1.0}),  # min > max: clamp's values
    ("relu6", {}),
]


def bits(t):
    return [(v, math.copysign(1, v)) if v == v else "nan" for v in t.detach().reshape(-1).tolist()]


def close(a, b, tol):
    a, b = a.detach().reshape(-1).tolist(), b.detach().reshape(-1).tolist()
    return len(a) == len(b) and all(
        (x != x and y != y) or x == y or abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def second_order(T, name, kw, x):
    y = getattr(T.nn.functional, name)(x, **kw)
    (g,) = T.autograd.grad((y * y.detach().nan_to_num(0.5)).sum(), x, create_graph=True)
    (gg,) = T.autograd.grad((g * 1.5).sum(), x)
    return y, g, gg


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", CASES)
def test_second_order_matches_torch(jg, torch, name, kw, dtype):
    jx = jg.tensor(XS, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(XS, dtype=getattr(torch, dtype), requires_grad=True)
    jy, jg1, jgg = second_order(jg, name, kw, jx)
    ty, tg1, tgg = second_order(torch, name, kw, tx)
    assert bits(jy) == bits(ty)
    assert jg1.requires_grad and tg1.requires_grad
    assert close(jg1, tg1, 1e-6), (jg1.tolist(), tg1.tolist())
    assert close(jgg, tgg, 0), (jgg.tolist(), tgg.tolist())
    assert type(jg1.grad_fn).__name__ == type(tg1.grad_fn).__name__
    assert type(jy.grad_fn).__name__ == type(ty.grad_fn).__name__


@pytest.mark.parametrize("name,kw", CASES)
def test_backward_twice_through_grad(jg, torch, name, kw):
    # a gradient penalty whose only path to x is the activation's mask: PyTorch
    # gives zeros, and so must jitgrad (it raised before)
    for T in (jg, torch):
        x = T.tensor([-3.0, -0.5, 0.5, 2.0, 7.0], requires_grad=True)
        y = getattr(T.nn.functional, name)(x, **kw).sum()
        (g,) = T.autograd.grad(y, x, create_graph=True)
        (g * g).sum().backward()
        assert x.grad.tolist() == [0.0] * 5


@pytest.mark.parametrize("name,kw", [c for c in CASES if c[0] != "leaky_relu"])
def test_int_inputs(jg, torch, name, kw):
    jy = getattr(jg.nn.functional, name)(jg.tensor([1, -2, 7, 0]), **kw)
    ty = getattr(torch.nn.functional, name)(torch.tensor([1, -2, 7, 0]), **kw)
    assert jy.dtype == jg.int64 and jy.tolist() == ty.tolist()


def test_leaky_relu_int_refused(jg, torch):
    with pytest.raises(RuntimeError, match="\"leaky_relu_cpu\" not implemented for 'Long'"):
        jg.nn.functional.leaky_relu(jg.tensor([1, -2]))
    with pytest.raises(RuntimeError, match="\"leaky_relu_cpu\" not implemented for 'Long'"):
        torch.nn.functional.leaky_relu(torch.tensor([1, -2]))


@pytest.mark.parametrize("inplace_module", ["LeakyReLU", "Hardtanh", "ReLU6"])
def test_inplace_modules(jg, torch, inplace_module):
    outs = []
    for T in (jg, torch):
        x = T.tensor([-3.0, -0.5, 0.5, 2.0, 7.0], requires_grad=True)
        h = x * 2
        m = getattr(T.nn, inplace_module)(inplace=True)
        y = m(h)
        y.sum().backward()
        outs.append((h.tolist(), x.grad.tolist()))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("name,kw", CASES)
def test_compiled_second_order_equals_eager(jg, name, kw, backend):
    def step(x, w):
        h = getattr(jg.nn.functional, name)(x * w, **kw)
        (g,) = jg.autograd.grad((h * h).sum(), w, create_graph=True)
        return h, g, (g * g).sum()

    cstep = jg.compile(step, backend=backend)
    for seed in range(3):
        jg.manual_seed(seed)
        x = jg.randn(4, 5) * 4
        w = jg.randn(5, requires_grad=True)
        want = step(x, w)
        (want_gw,) = jg.autograd.grad(want[2], w)
        got = cstep(x, w)
        (got_gw,) = jg.autograd.grad(got[2], w)
        for a, b in zip(list(got) + [got_gw], list(want) + [want_gw]):
            assert bits(a) == bits(b)
