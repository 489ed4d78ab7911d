"""jitgrad.special against PyTorch 1.13's torch.special: values over wide
ranges (0, negatives, large arguments, +-inf, NaN), gradients, float32 and
float64, keyword arguments, and compiled (interp, c) == eager bitwise."""
import math

import pytest

XS = [-1e300, -50.0, -7.5, -3.0, -1.0, -0.5, -1e-8, 0.0, 1e-8, 0.25, 0.5, 0.999, 1.0, 1.5,
      3.0, 10.0, 40.0, 1e10, math.inf, -math.inf, math.nan]
POS = [1e-6, 0.01, 0.3, 0.5, 1.0, 2.0, 7.5, 100.0]


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    return len(a) == len(b) and all(
        (x == y) or (x != x and y != y) or abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


UNARY = ["expit", "erf", "erfc", "expm1", "log1p", "exp2", "round", "entr", "sinc", "ndtr",
         "logit"]
TOL = {"float64": 1e-15, "float32": 1e-6}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY)
def test_unary_values_and_gradients(jg, torch, name, dtype):
    jx = jg.tensor(XS, dtype=getattr(jg, dtype))
    tx = torch.tensor(XS, dtype=getattr(torch, dtype))
    got, want = vals(getattr(jg.special, name)(jx)), vals(getattr(torch.special, name)(tx))
    assert close(got, want, TOL[dtype] * 4), list(zip(XS, got, want))
    # gradients where the function is smooth
    xs = POS if name in ("entr", "logit") else [-3.0, -0.7, -0.1, 0.2, 0.3, 0.9, 2.5]
    if name == "logit":
        xs = [0.01, 0.2, 0.5, 0.77, 0.999]
    jx = jg.tensor(xs, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(xs, dtype=getattr(torch, dtype), requires_grad=True)
    getattr(jg.special, name)(jx).sum().backward()
    getattr(torch.special, name)(tx).sum().backward()
    assert close(vals(jx.grad), vals(tx.grad), TOL[dtype] * 16), (vals(jx.grad), vals(tx.grad))


def test_keywords_and_integer_inputs(jg, torch):
    x = [0.002, 0.3, 0.5, 0.9]
    assert close(vals(jg.special.logit(jg.tensor(x), eps=0.1)),
                 vals(torch.special.logit(torch.tensor(x), eps=0.1)), 1e-6)
    assert close(vals(jg.special.logit(jg.tensor(x), 0.1)),
                 vals(torch.special.logit(torch.tensor(x), 0.1)), 1e-6)
    for name in ("exp2", "sinc", "entr", "ndtr", "expit", "erf"):
        j = getattr(jg.special, name)(jg.tensor([0, 1, 2, -3]))
        t = getattr(torch.special, name)(torch.tensor([0, 1, 2, -3]))
        assert str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], name
        assert close(vals(j), vals(t), 1e-6), name
    with pytest.raises(TypeError):
        jg.special.expit([1.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_xlogy_xlog1py(jg, torch, dtype):
    a = [0.0, 0.0, 0.0, 1.0, 2.0, -3.0, 0.5, math.nan, 4.0]
    b = [math.nan, -1.0, 0.0, -1.0, 3.0, 0.5, math.inf, 1.0, 1e-10]
    for name in ("xlogy", "xlog1py"):
        j = getattr(jg.special, name)(jg.tensor(a, dtype=getattr(jg, dtype)),
                                      jg.tensor(b, dtype=getattr(jg, dtype)))
        t = getattr(torch.special, name)(torch.tensor(a, dtype=getattr(torch, dtype)),
                                         torch.tensor(b, dtype=getattr(torch, dtype)))
        assert close(vals(j), vals(t), TOL[dtype]), (name, vals(j), vals(t))
        for x, y in ((2.0, torch.tensor([1.0, 3.0])), (torch.tensor([1.0, 0.0]), 2.0)):
            jx = jg.tensor(x.tolist()) if not isinstance(x, float) else x
            jy = jg.tensor(y.tolist()) if not isinstance(y, float) else y
            assert close(vals(getattr(jg.special, name)(jx, jy)),
                         vals(getattr(torch.special, name)(x, y)), 1e-6)
    x = [0.0, 1.5, -2.0, 3.0]
    y = [0.5, 2.0, 0.25, 7.0]
    jx = jg.tensor(x, dtype=getattr(jg, dtype), requires_grad=True)
    jy = jg.tensor(y, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    ty = torch.tensor(y, dtype=getattr(torch, dtype), requires_grad=True)
    jg.special.xlog1py(jx, jy).sum().backward()
    torch.special.xlog1py(tx, ty).sum().backward()
    assert close(vals(jx.grad), vals(tx.grad), TOL[dtype])
    assert close(vals(jy.grad), vals(ty.grad), TOL[dtype])


def test_softmax_family(jg, torch):
    x = [[1.0, -2.0, 3.5], [0.0, 100.0, -100.0]]
    for name in ("softmax", "log_softmax"):
        for dim in (0, 1, -1):
            for dtype in (None, "float64"):
                kw = {} if dtype is None else {"dtype": getattr(jg, dtype)}
                tkw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
                j = getattr(jg.special, name)(jg.tensor(x), dim, **kw)
                t = getattr(torch.special, name)(torch.tensor(x), dim, **tkw)
                assert str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
                assert close(vals(j), vals(t), 1e-6)
    for keepdim in (False, True):
        j = jg.special.logsumexp(jg.tensor(x), 1, keepdim)
        t = torch.special.logsumexp(torch.tensor(x), 1, keepdim)
        assert tuple(j.shape) == tuple(t.shape) and close(vals(j), vals(t), 1e-6)
        j = jg.special.logsumexp(jg.tensor(x), dim=(0, 1), keepdim=keepdim)
        t = torch.special.logsumexp(torch.tensor(x), dim=(0, 1), keepdim=keepdim)
        assert tuple(j.shape) == tuple(t.shape) and close(vals(j), vals(t), 1e-6)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    S = jg.special
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor([-3.0, -0.7, -0.1, 0.0, 0.2, 0.3, 0.9, 2.5], dtype=dtype, requires_grad=True)

        def prog(x):
            p = S.expit(x)
            out = S.logit(p, eps=1e-3) + S.erf(x) * S.erfc(x) + S.expm1(x) + S.exp2(x)
            out = out + S.entr(p) + S.sinc(x) + S.ndtr(x) + S.xlog1py(x, p) + S.xlogy(p, p)
            out = out + S.softmax(x, 0) + S.log_softmax(x, 0) + S.logsumexp(x, 0) + S.log1p(p)
            return (out * out).sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        got = jg.compile(prog, backend=backend, fullgraph=True)(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)


# ---- lgamma, digamma, polygamma, mvlgamma (gammaln, psi, multigammaln) ----

GX = [-1e300, -50.5, -7.5, -3.0, -2.5, -1.0, -0.5, -1e-8, -0.0, 0.0, 1e-8, 0.25, 0.5, 1.0,
      1.5, 2.0, 3.0, 9.99, 10.0, 10.5, 40.0, 1e10, 1e18, 1e300, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["lgamma", "digamma", "polygamma1", "gammaln", "psi"])
def test_gamma_family_values(jg, torch, name, dtype):
    def f(T, x):
        if name == "polygamma1":
            return T.polygamma(1, x)
        if name in ("gammaln", "psi"):
            return getattr(T.special, name)(x)
        return getattr(T, name)(x)

    got = vals(f(jg, jg.tensor(GX, dtype=getattr(jg, dtype))))
    want = vals(f(torch, torch.tensor(GX, dtype=getattr(torch, dtype))))
    # float32 lgamma: within an ulp of PyTorch's (whose float kernel rounds
    # neither lgammaf's nor double lgamma's value consistently)
    tol = 1.2e-7 if dtype == "float32" and name in ("lgamma", "gammaln") else 4e-16
    assert close(got, want, tol), [(x, a, b) for x, a, b in zip(GX, got, want) if a != b]
    # integer inputs compute in float32, the method spellings
    for T in (jg, torch):
        r = T.tensor([1, 2, 5])
        out = (r.lgamma(), r.digamma(), r.polygamma(1), T.polygamma(0, r))
        if T is jg:
            g = out
        else:
            for a, b in zip(g, out):
                assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
                assert close(vals(a), vals(b), 1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gamma_family_gradients(jg, torch, dtype):
    xs = [-2.5, -0.5, 0.25, 1.0, 1.5, 3.0, 12.0]
    for name in ("lgamma", "digamma"):
        jx = jg.tensor(xs, dtype=getattr(jg, dtype), requires_grad=True)
        tx = torch.tensor(xs, dtype=getattr(torch, dtype), requires_grad=True)
        getattr(jg, name)(jx).sum().backward()
        getattr(torch, name)(tx).sum().backward()
        assert close(vals(jx.grad), vals(tx.grad), 4e-16), (vals(jx.grad), vals(tx.grad))
    jx = jg.tensor([0.5, 3.0, 4.5], dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor([0.5, 3.0, 4.5], dtype=getattr(torch, dtype), requires_grad=True)
    for p in (1, 3):
        jy, ty = jg.mvlgamma(jx + 2, p), torch.mvlgamma(tx + 2, p)
        assert close(vals(jy), vals(ty), 1e-6 if dtype == "float32" else 1e-14)
        jy.sum().backward()
        ty.sum().backward()
        assert close(vals(jx.grad), vals(tx.grad), 1e-6 if dtype == "float32" else 1e-14)
    assert close(vals(jg.special.multigammaln(jg.tensor([3.0, 4.5]), 2)),
                 vals(torch.special.multigammaln(torch.tensor([3.0, 4.5]), 2)), 1e-6)


def test_gamma_family_errors_and_inplace(jg, torch):
    for T in (jg, torch):
        with pytest.raises(RuntimeError, match="does not support negative n"):
            T.polygamma(-1, T.tensor([3.0]))
        with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
            T.mvlgamma(T.tensor([3.0]), 0)
        a = T.tensor([0.5, 2.0, 7.0])
        assert a.lgamma_() is a
        assert a.digamma_() is a
    j, t = jg.tensor([0.5, 2.0, 7.0]), torch.tensor([0.5, 2.0, 7.0])
    j.lgamma_().digamma_()
    t.lgamma_().digamma_()
    assert close(vals(j), vals(t), 1e-7)
    with pytest.raises(TypeError):
        jg.polygamma(1.0, jg.tensor([1.0]))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_gamma_family_compiled_equals_eager(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor([-2.5, -0.5, 0.25, 1.0, 1.5, 3.0, 12.0, 40.0], dtype=dtype,
                      requires_grad=True)

        def prog(x):
            y = x.lgamma() * jg.digamma(x) + jg.polygamma(1, x) + jg.special.gammaln(x * x)
            return (y * y).sum() + jg.mvlgamma(x * x + 3, 2).sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        got = jg.compile(prog, backend=backend, fullgraph=True)(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
