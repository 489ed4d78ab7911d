"""F.threshold, selu, celu, glu, softshrink, hardshrink, tanhshrink, rrelu,
the in-place forms (relu_, leaky_relu_, elu_, hardtanh_, selu_, celu_,
rrelu_, threshold_) and the modules Threshold, SELU, CELU, GLU, Softsign,
Softmin, LogSigmoid, Softmax2d, Softshrink, Hardshrink, Tanhshrink, RReLU
against PyTorch 1.13: values and gradients at the corners (0, the
thresholds, +-inf, NaN) in float32 and float64, arguments, errors and repr;
RReLU's training slopes; compiled (interp, c) == eager bitwise."""
import math

import pytest

INF, NAN = float("inf"), float("nan")
XS = [-INF, -100.0, -20.0, -3.0, -1.0, -0.75, -0.5, -0.25, -1e-3, -0.0, 0.0, 1e-3, 0.25, 0.5,
      0.75, 1.0, 2.0, 3.0, 20.0, 100.0, INF, NAN]

CASES = [
    ("threshold", (0.5, 20.0), {}),
    ("threshold", (-1.0, -7.0), {}),
    ("threshold", (0.0, 0.0), {}),
    ("selu", (), {}),
    ("celu", (), {}),
    ("celu", (), {"alpha": 0.5}),
    ("celu", (2.0,), {}),
    ("softshrink", (), {}),
    ("softshrink", (1.0,), {}),
    ("softshrink", (), {"lambd": 0.0}),
    ("hardshrink", (), {}),
    ("hardshrink", (), {"lambd": 0.25}),
    ("tanhshrink", (), {}),
    ("rrelu", (), {}),
    ("rrelu", (0.1, 0.3), {}),
    ("rrelu", (), {"lower": 0.2, "upper": 0.2, "training": False}),
    ("logsigmoid", (), {}),
    ("softsign", (), {}),
]


def vals(t):
    return t.detach().reshape(-1).tolist()


def same(x, y, tol):
    if math.isnan(y):
        return math.isnan(x)
    return x == y or abs(x - y) <= tol * (1 + abs(y))


def close(a, b, tol):
    return len(a) == len(b) and all(same(x, y, tol) for x, y in zip(a, b))


def seed_for(n):
    return [0.5 + 0.25 * i for i in range(n)]


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-13), ("float32", 1e-6)])
@pytest.mark.parametrize("name,args,kw", CASES)
def test_values_and_gradients_match_torch(jg, torch, name, args, kw, dtype, tol):
    jx = jg.tensor(XS, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(XS, dtype=getattr(torch, dtype), requires_grad=True)
    jy = getattr(jg.nn.functional, name)(jx, *args, **kw)
    ty = getattr(torch.nn.functional, name)(tx, *args, **kw)
    assert jy.dtype == getattr(jg, dtype) and tuple(jy.shape) == tuple(ty.shape)
    assert close(vals(jy), vals(ty), tol), (vals(jy), vals(ty))
    jy.backward(jg.tensor(seed_for(len(XS)), dtype=getattr(jg, dtype)))
    ty.backward(torch.tensor(seed_for(len(XS)), dtype=getattr(torch, dtype)))
    jg_grad, t_grad = vals(jx.grad), vals(tx.grad)
    if name == "softshrink":
        # PyTorch's softshrink(NaN) is 0 with gradient 1; here the gradient is 0
        assert jg_grad[-1] == 0.0 and t_grad[-1] == seed_for(len(XS))[-1]
        jg_grad, t_grad = jg_grad[:-1], t_grad[:-1]
    assert close(jg_grad, t_grad, tol), (jg_grad, t_grad)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-13), ("float32", 1e-6)])
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_glu_matches_torch(jg, torch, dim, dtype, tol):
    data = XS[:20]
    shape = (2, 10) if dim in (0, -2) else (5, 4)
    jx = jg.tensor(data, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(data, dtype=getattr(torch, dtype), requires_grad=True)
    jy = jg.nn.functional.glu(jx.reshape(shape), dim)
    ty = torch.nn.functional.glu(tx.reshape(shape), dim)
    assert tuple(jy.shape) == tuple(ty.shape)
    assert close(vals(jy), vals(ty), tol)
    n = jy.numel()
    jy.backward(jg.tensor(seed_for(n), dtype=jy.dtype).reshape(tuple(jy.shape)))
    ty.backward(torch.tensor(seed_for(n), dtype=ty.dtype).reshape(ty.shape))
    assert close(vals(jx.grad), vals(tx.grad), tol)
    # the default dim is the last one
    assert vals(jg.nn.GLU()(jx.detach().reshape(5, 4))) == \
        vals(jg.nn.functional.glu(jx.detach().reshape(5, 4), -1))


INPLACE = [
    ("relu_", (), {}),
    ("leaky_relu_", (), {}),
    ("leaky_relu_", (0.2,), {}),
    ("elu_", (), {"alpha": 0.5}),
    ("hardtanh_", (), {}),
    ("hardtanh_", (-2.0, 0.5), {}),
    ("selu_", (), {}),
    ("celu_", (), {"alpha": 2.0}),
    ("rrelu_", (), {}),
    ("rrelu_", (0.1, 0.2, False), {}),
    ("threshold_", (0.25, -3.0), {}),
]


@pytest.mark.parametrize("name,args,kw", INPLACE)
def test_inplace_forms_match_torch(jg, torch, name, args, kw):
    jx = jg.tensor(XS, dtype=jg.float64, requires_grad=True)
    tx = torch.tensor(XS, dtype=torch.float64, requires_grad=True)
    ja, ta = jx * 1.5, tx * 1.5
    jr = getattr(jg.nn.functional, name)(ja, *args, **kw)
    tr = getattr(torch.nn.functional, name)(ta, *args, **kw)
    assert jr is ja
    assert close(vals(ja), vals(ta), 1e-13)
    ja.backward(jg.tensor(seed_for(len(XS)), dtype=jg.float64))
    ta.backward(torch.tensor(seed_for(len(XS)), dtype=torch.float64))
    assert close(vals(jx.grad), vals(tx.grad), 1e-13)
    with pytest.raises(RuntimeError):
        getattr(jg.nn.functional, name)(jg.ones(2, requires_grad=True), *args, **kw)


@pytest.mark.parametrize("name", ["threshold", "selu", "celu", "rrelu"])
def test_inplace_keyword_matches_torch(jg, torch, name):
    args = (0.5, 2.0) if name == "threshold" else ()
    jx = jg.tensor(XS, dtype=jg.float32)
    tx = torch.tensor(XS, dtype=torch.float32)
    jr = getattr(jg.nn.functional, name)(jx, *args, inplace=True)
    getattr(torch.nn.functional, name)(tx, *args, inplace=True)
    assert jr is jx and close(vals(jx), vals(tx), 1e-6)


def test_errors_match_torch(jg, torch):
    for t in (jg, torch):
        F = t.nn.functional
        x = t.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        with pytest.raises(RuntimeError, match="^Halving dimension must be even, but dimension "
                                               "1 is size 3$"):
            F.glu(x)
        with pytest.raises(RuntimeError, match="^glu does not support scalars because halving "
                                               "size must be even$"):
            F.glu(t.tensor(1.0))
        with pytest.raises(IndexError, match=r"^Dimension out of range \(expected to be in range "
                                             r"of \[-2, 1\], but got -3\)$"):
            F.glu(x, -3)
        with pytest.raises(RuntimeError, match="^ZeroDivisionError: alpha cannot be 0 for CELU$"):
            F.celu(x, 0.0)
        with pytest.raises(RuntimeError, match=r"^lambda must be greater or equal to 0, but "
                                               r"found to be -0\.25\.$"):
            F.softshrink(x, -0.25)
        with pytest.raises(RuntimeError, match="^Lower bound should be less than or equal to the "
                                               "upper bound$"):
            F.rrelu(x, 0.5, 0.25)
        with pytest.raises(AssertionError, match="Softmax2d requires a 3D or 4D tensor as input"):
            t.nn.Softmax2d()(x)
        li = t.tensor([1, -2])
        for fn, kernel in ((F.softshrink, "softshrink_cpu"), (F.hardshrink, "hardshrink_cpu"),
                           (F.selu, "elu_cpu"), (F.glu, "glu_cpu")):
            with pytest.raises(RuntimeError, match=f"\"{kernel}\" not implemented for 'Long'"):
                fn(li)
        # threshold works on integers too
        assert F.threshold(li, 0, 5).tolist() == [1, 5]


MODULES = [
    ("Threshold", (0.1, 20), {}), ("Threshold", (0.1, 20.0, True), {}), ("SELU", (), {}),
    ("SELU", (True,), {}), ("CELU", (), {}), ("CELU", (2.0, True), {}), ("GLU", (), {}),
    ("GLU", (0,), {}), ("Softsign", (), {}), ("Softmin", (1,), {}), ("Softmin", (), {"dim": 0}),
    ("LogSigmoid", (), {}), ("Softmax2d", (), {}), ("Softshrink", (), {}),
    ("Softshrink", (1.5,), {}), ("Hardshrink", (), {"lambd": 0.3}), ("Tanhshrink", (), {}),
    ("RReLU", (), {}), ("RReLU", (0.1, 0.3, True), {}),
]


@pytest.mark.parametrize("name,args,kw", MODULES)
def test_modules_match_torch(jg, torch, name, args, kw):
    jm, tm = getattr(jg.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(jm) == repr(tm)
    jm.eval()
    tm.eval()
    data = [v for v in XS if not math.isinf(v)][:16]
    jx = jg.tensor(data, dtype=jg.float64).reshape(2, 2, 2, 2)
    tx = torch.tensor(data, dtype=torch.float64).reshape(2, 2, 2, 2)
    assert close(vals(jm(jx * 1)), vals(tm(tx * 1)), 1e-13)
    assert list(jm.state_dict().keys()) == list(tm.state_dict().keys()) == []


def test_rrelu_training_slopes(jg, torch):
    n = 4000
    lower, upper = 0.1, 0.3
    x = jg.linspace(-2.0, 2.0, n, dtype=jg.float64).requires_grad_()
    y = jg.nn.functional.rrelu(x, lower, upper, training=True)
    y.sum().backward()
    xs, ys, gs = vals(x), vals(y), vals(x.grad)
    slopes = [yv / xv for xv, yv in zip(xs, ys) if xv < 0]
    assert all(lower <= s < upper for s in slopes)
    assert abs(sum(slopes) / len(slopes) - (lower + upper) / 2) < 0.01
    assert len(set(slopes)) > len(slopes) // 2  # one slope per element
    # positives (and 0, whose slope does not show) pass; the gradient is the slope used
    assert all(yv == xv for xv, yv in zip(xs, ys) if xv >= 0)
    assert all(g == 1.0 for xv, g in zip(xs, gs) if xv > 0)
    assert all(abs(g - yv / xv) < 1e-12 for xv, yv, g in zip(xs, ys, gs) if xv < 0)
    # float32, NaN passes, and the module uses training mode
    m = jg.nn.RReLU(lower, upper)
    out = vals(m(jg.tensor([-1.0, NAN, 2.0])))
    assert lower <= -out[0] < upper and math.isnan(out[1]) and out[2] == 2.0
    m.eval()
    assert vals(m(jg.tensor([-1.0, 2.0], dtype=jg.float64))) == \
        vals(torch.nn.RReLU(lower, upper).eval()(torch.tensor([-1.0, 2.0], dtype=torch.float64)))
    # in place in training
    a = jg.full((100,), -1.0)
    assert jg.nn.functional.rrelu_(a, lower, upper, True) is a
    assert all(lower <= -v < upper for v in vals(a))


def test_softmax2d_matches_torch(jg, torch):
    import numpy as np
    data = np.random.default_rng(0).standard_normal((2, 3, 2, 2)).tolist()
    for shape_slice in (slice(None), 0):
        jx = jg.tensor(data, dtype=jg.float64, requires_grad=True)
        tx = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        jy = jg.nn.Softmax2d()(jx[shape_slice])
        ty = torch.nn.Softmax2d()(tx[shape_slice])
        assert close(vals(jy), vals(ty), 1e-13)
        (jy * jy).sum().backward()
        (ty * ty).sum().backward()
        assert close(vals(jx.grad), vals(tx.grad), 1e-12)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    F = jg.nn.functional
    data = [v for v in XS if math.isfinite(v)]  # (an inf would make the sum NaN)
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(data, dtype=dtype, requires_grad=True)

        def prog(x):
            out = x * 0
            for i, (name, args, kw) in enumerate(CASES):
                out = out + getattr(F, name)(x, *args, **kw) * (0.5 + i)
            out = out + F.glu(x[:18].reshape(3, 6), -1).sum() + \
                jg.nn.Softmax2d()(x[:12].reshape(3, 2, 2)).sum()
            h = x * 1.0
            F.selu_(h)
            F.celu_(h, 0.5)
            F.threshold_(h, 0.1, -2.0)
            F.rrelu_(h)
            F.hardtanh_(h, -3.0, 3.0)
            return (out * out).sum() + h.sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)


def test_shrink_modules_are_separate_classes(jg, torch):
    for t in (jg, torch):
        assert not isinstance(t.nn.Hardshrink(), t.nn.Softshrink)
        assert t.nn.Hardshrink().lambd == t.nn.Softshrink().lambd == 0.5


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-14), ("float32", 1e-6)])
@pytest.mark.parametrize("name,kw", [("selu", {}), ("celu", {"alpha": 0.5}), ("elu", {}),
                                     ("elu", {"alpha": 0.3})])
def test_elu_family_relative_precision(jg, torch, name, kw, dtype, tol):
    # PyTorch computes exp(x) - 1 (not expm1): tiny negative inputs give
    # its values, and far below 0 the gradient keeps its relative precision.
    # (celu's alpha is one a float32 holds: PyTorch's celu gradient uses
    # 1 / float32(alpha), derivatives.yaml's 1.0/alpha.toFloat(), which for
    # alpha = 0.7 is 2.4e-8 relative off the exact derivative used here, the
    # error growing with |x| in exp(x / alpha))
    xs = [-(1.3 ** k) for k in range(-80, 25)] + [-1e-30, -1e-10]
    jx = jg.tensor(xs, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(xs, dtype=getattr(torch, dtype), requires_grad=True)
    jy = getattr(jg.nn.functional, name)(jx, **kw)
    ty = getattr(torch.nn.functional, name)(tx, **kw)
    jy.sum().backward()
    ty.sum().backward()
    for a, b in ((vals(jy), vals(ty)), (vals(jx.grad), vals(tx.grad))):
        assert all(x == y or abs(x - y) <= tol * abs(y) for x, y in zip(a, b)), (a, b)
