"""Tensor / torch aliases and small compositions (greater ... absolute,
swapaxes, movedim, ravel, broadcast_*, isclose / allclose / equal, tile,
unflatten / nn.Unflatten, atleast_Nd, count_nonzero, signbit, xlogy, logit,
nansum, nanmean) against PyTorch 1.13: values, gradients, errors."""
import math

import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")

NAN, INF = math.nan, math.inf


def _pair(data, dtype="float64", grad=False):
    a = jitgrad.tensor(data, dtype=getattr(jitgrad, dtype), requires_grad=grad)
    b = torch.tensor(data, dtype=getattr(torch, dtype), requires_grad=grad)
    return a, b


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _same(got, want, exact=False):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, exact)
        return
    if isinstance(want, (bool, int, float)) and not hasattr(want, "shape"):
        assert got == want or (want != want and got != got)
        return
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    if exact:
        np.testing.assert_array_equal(_np(got), _np(want))
    else:
        np.testing.assert_allclose(_np(got), _np(want), rtol=1e-12, atol=1e-12, equal_nan=True)


X = [[1.5, -2.0, 0.0], [3.0, -0.5, 2.0]]
Y = [[1.5, 1.0, -1.0], [0.25, -0.5, 4.0]]


@pytest.mark.parametrize("name", ["greater", "greater_equal", "less", "less_equal",
                                  "not_equal", "multiply", "subtract"])
def test_binary_aliases(name):
    (a, ta), (b, tb) = _pair(X), _pair(Y)
    _same(getattr(jitgrad, name)(a, b), getattr(torch, name)(ta, tb), exact=True)
    _same(getattr(a, name)(b), getattr(ta, name)(tb), exact=True)
    _same(getattr(a, name)(2.0), getattr(ta, name)(2.0), exact=True)


@pytest.mark.parametrize("name", ["negative", "absolute"])
def test_unary_aliases_and_grad(name):
    a, ta = _pair(X, grad=True)
    out, tout = getattr(jitgrad, name)(a), getattr(torch, name)(ta)
    _same(out, tout, exact=True)
    _same(getattr(a, name)(), getattr(ta, name)(), exact=True)
    (out * jitgrad.tensor(Y, dtype=jitgrad.float64)).sum().backward()
    (tout * torch.tensor(Y, dtype=torch.float64)).sum().backward()
    _same(a.grad, ta.grad, exact=True)


def test_swapaxes_movedim_ravel_views_and_grads():
    data = np.arange(24.0).reshape(2, 3, 4).tolist()
    a, ta = _pair(data, grad=True)
    cases = [
        lambda m, x: m.swapaxes(x, 0, 2), lambda m, x: x.swapdims(-1, 1),
        lambda m, x: m.movedim(x, 0, -1), lambda m, x: m.moveaxis(x, (0, 1), (2, 0)),
        lambda m, x: x.movedim((2, 0), (0, 1)), lambda m, x: m.movedim(x, (), ()),
        lambda m, x: m.ravel(x.transpose(0, 2)), lambda m, x: x.ravel(),
    ]
    for i, f in enumerate(cases):
        out, tout = f(jitgrad, a), f(torch, ta)
        _same(out, tout, exact=True)
        w = np.arange(out.numel(), dtype=np.float64).reshape(tuple(out.shape)).tolist()
        ga, = jitgrad.autograd.grad((out * jitgrad.tensor(w, dtype=jitgrad.float64)).sum(), a)
        gt, = torch.autograd.grad((tout * torch.tensor(w, dtype=torch.float64)).sum(), ta)
        _same(ga, gt, exact=True)
    s, ts = _pair(3.0)
    _same(jitgrad.movedim(s, 0, 0), torch.movedim(ts, 0, 0))


def test_broadcast_to_tensors_shapes():
    a, ta = _pair([[1.0], [2.0]], grad=True)
    b, tb = _pair([10.0, 20.0, 30.0])
    _same(jitgrad.broadcast_to(a, (4, 2, 3)), torch.broadcast_to(ta, (4, 2, 3)), exact=True)
    _same(a.broadcast_to((2, -1)), ta.broadcast_to((2, -1)), exact=True)
    got, want = jitgrad.broadcast_tensors(a, b), torch.broadcast_tensors(ta, tb)
    _same(got, tuple(want), exact=True)
    _same(jitgrad.broadcast_tensors([b]), tuple(torch.broadcast_tensors(*[tb])), exact=True)
    got[0].sum().backward()
    torch.broadcast_tensors(ta, tb)[0].sum().backward()
    _same(a.grad, ta.grad, exact=True)
    for shapes in [((2, 1), (3,)), (3, (2, 1)), ((), (1, 4), (5, 1, 1)), ((0, 1), (3,)), ()]:
        assert jitgrad.broadcast_shapes(*shapes) == tuple(torch.broadcast_shapes(*shapes))


def _errors(fj, ft):
    with pytest.raises(Exception) as ej:
        fj()
    with pytest.raises(Exception) as et:
        ft()
    assert type(ej.value) is type(et.value)
    assert str(ej.value) == str(et.value)


def test_shape_errors_match_torch():
    a, ta = _pair(np.ones((2, 3)).tolist())
    b, tb = _pair(np.ones((2, 4)).tolist())
    _errors(lambda: jitgrad.broadcast_shapes((2, 3), (2, 4)),
            lambda: torch.broadcast_shapes((2, 3), (2, 4)))
    _errors(lambda: jitgrad.broadcast_tensors(a, b), lambda: torch.broadcast_tensors(ta, tb))
    _errors(lambda: jitgrad.movedim(a, (0, 0), (1, 0)), lambda: torch.movedim(ta, (0, 0), (1, 0)))
    _errors(lambda: jitgrad.movedim(a, (0, 1), (1, 1)), lambda: torch.movedim(ta, (0, 1), (1, 1)))
    _errors(lambda: jitgrad.movedim(a, (0,), (1, 0)), lambda: torch.movedim(ta, (0,), (1, 0)))
    _errors(lambda: jitgrad.movedim(a, 0, 5), lambda: torch.movedim(ta, 0, 5))
    _errors(lambda: a.unflatten(1, (2, 2)), lambda: ta.unflatten(1, (2, 2)))
    _errors(lambda: a.unflatten(1, (-1, -1)), lambda: ta.unflatten(1, (-1, -1)))
    _errors(lambda: a.unflatten(1, ()), lambda: ta.unflatten(1, ()))
    _errors(lambda: a.unflatten(2, (3,)), lambda: ta.unflatten(2, (3,)))
    _errors(lambda: jitgrad.tile(a, 2), lambda: torch.tile(ta, 2))
    _errors(lambda: jitgrad.isclose(a, a.to(jitgrad.float32)),
            lambda: torch.isclose(ta, ta.float()))
    _errors(lambda: jitgrad.allclose(a, b), lambda: torch.allclose(ta, tb))
    _errors(lambda: jitgrad.isclose(a, a, rtol=-1), lambda: torch.isclose(ta, ta, rtol=-1))
    _errors(lambda: jitgrad.isclose(a, a, atol=-1), lambda: torch.isclose(ta, ta, atol=-1))
    i, ti = _pair([1, 2], "int64")
    _errors(lambda: jitgrad.nanmean(i), lambda: torch.nanmean(ti))
    _errors(lambda: jitgrad.nn.Unflatten(1, 3), lambda: torch.nn.Unflatten(1, 3))
    _errors(lambda: jitgrad.nn.Unflatten(1, (2, 1.5)), lambda: torch.nn.Unflatten(1, (2, 1.5)))
    _errors(lambda: jitgrad.nn.Unflatten(1.0, (2,)), lambda: torch.nn.Unflatten(1.0, (2,)))
    with pytest.raises(TypeError, match="must be Tensor, not list"):
        jitgrad.ravel([1, 2])
    with pytest.raises(TypeError, match="atleast_1d"):
        jitgrad.atleast_1d(3)


def test_isclose_allclose_equal():
    x = [1.0, 1.0 + 1e-6, 1.0 + 1e-3, INF, -INF, INF, NAN, NAN, 0.0, 1e-9, 100.0]
    y = [1.0, 1.0, 1.0, INF, INF, 5.0, NAN, 1.0, -0.0, 0.0, 100.001]
    a, ta = _pair(x)
    b, tb = _pair(y)
    for kw in [{}, dict(equal_nan=True), dict(rtol=1e-2), dict(atol=1e-3, rtol=0),
               dict(rtol=0, atol=0), dict(rtol=1e-5, atol=2e-9)]:
        _same(jitgrad.isclose(a, b, **kw), torch.isclose(ta, tb, **kw), exact=True)
        _same(a.isclose(b, **kw), ta.isclose(tb, **kw), exact=True)
        assert jitgrad.allclose(a, b, **kw) == torch.allclose(ta, tb, **kw)
        assert jitgrad.allclose(a[:2], b[:2], **kw) == torch.allclose(ta[:2], tb[:2], **kw)
    c, tc = _pair([1.0, 2.0], "float32")
    d, td = _pair([[1.0000001, 2.1]], "float32")
    _same(jitgrad.isclose(c, d), torch.isclose(tc, td), exact=True)  # broadcasts
    i, ti = _pair([1, 2, 100000], "int64")
    j, tj = _pair([1, 3, 100001], "int64")
    _same(jitgrad.isclose(i, j), torch.isclose(ti, tj), exact=True)
    _same(jitgrad.isclose(i, j, rtol=1e-4), torch.isclose(ti, tj, rtol=1e-4), exact=True)
    assert jitgrad.equal(a[:3], a[:3]) is True and torch.equal(ta[:3], ta[:3])
    assert jitgrad.equal(a, a) is False and not torch.equal(ta, ta)  # NaN != NaN
    assert jitgrad.equal(c, c[:1]) is torch.equal(tc, tc[:1]) is False
    assert jitgrad.equal(c, d[0].clone()) is torch.equal(tc, td[0].clone()) is False
    assert c.equal(c.clone()) is True


def test_tile_unflatten_and_module():
    a, ta = _pair(np.arange(6.0).reshape(2, 3).tolist(), grad=True)
    for dims in [(2,), (2, 1), (1, 2, 2), (), (0, 1)]:
        _same(jitgrad.tile(a, dims), torch.tile(ta, dims), exact=True)
    _same(a.tile(2, 2), ta.tile(2, 2), exact=True)
    _same(a.tile((3,)), ta.tile((3,)), exact=True)
    a.tile((2, 1, 2)).sum().backward()
    ta.tile((2, 1, 2)).sum().backward()
    _same(a.grad, ta.grad, exact=True)
    b, tb = _pair(np.arange(24.0).reshape(2, 12).tolist())
    for dim, sizes in [(1, (3, 4)), (-1, (2, -1, 3)), (0, (1, 2)), (1, [12]), (1, (-1,))]:
        _same(b.unflatten(dim, sizes), tb.unflatten(dim, sizes), exact=True)
        _same(jitgrad.unflatten(b, dim, sizes), torch.unflatten(tb, dim, sizes), exact=True)
    m, tm = jitgrad.nn.Unflatten(1, (3, 4)), torch.nn.Unflatten(1, (3, 4))
    _same(m(b), tm(tb), exact=True)
    assert repr(m) == repr(tm)


def test_atleast_nd():
    vals = [3.0, [1.0, 2.0], [[1.0, 2.0]], [[[1.0]]], np.ones((2, 1, 2, 1)).tolist()]
    for fn in ("atleast_1d", "atleast_2d", "atleast_3d"):
        pairs = [_pair(v) for v in vals]
        for a, ta in pairs:
            _same(getattr(jitgrad, fn)(a), getattr(torch, fn)(ta), exact=True)
        js, ts = [p[0] for p in pairs], [p[1] for p in pairs]
        _same(getattr(jitgrad, fn)(*js), getattr(torch, fn)(*ts), exact=True)
        _same(getattr(jitgrad, fn)(js[:1]), getattr(torch, fn)(ts[:1]), exact=True)
    a, ta = _pair([1.0, 2.0], grad=True)
    (jitgrad.atleast_3d(a) * 3).sum().backward()
    (torch.atleast_3d(ta) * 3).sum().backward()
    _same(a.grad, ta.grad, exact=True)


def test_count_nonzero_signbit():
    x = [[0.0, -0.0, 1.0], [NAN, -2.0, 0.0]]
    a, ta = _pair(x)
    for kw in [{}, dict(dim=0), dict(dim=1), dict(dim=(0, 1)), dict(dim=-1)]:
        _same(jitgrad.count_nonzero(a, **kw), torch.count_nonzero(ta, **kw), exact=True)
        _same(a.count_nonzero(**kw), ta.count_nonzero(**kw), exact=True)
    i, ti = _pair([[0, 3], [5, 0]], "int64")
    _same(jitgrad.count_nonzero(i, 1), torch.count_nonzero(ti, 1), exact=True)
    for dtype in ("float32", "float64"):
        s, ts = _pair([-0.0, 0.0, NAN, -NAN, -1.0, 2.0, -INF, INF, -1e-310], dtype)
        _same(jitgrad.signbit(s), torch.signbit(ts), exact=True)
        _same(s.signbit(), ts.signbit(), exact=True)
    _same(jitgrad.signbit(a[:, 1:]), torch.signbit(ta[:, 1:]), exact=True)  # a strided view
    for dtype, data in (("int64", [-3, 0, 4]), ("int32", [-1, 2]), ("bool", [True, False])):
        s, ts = _pair(data, dtype)
        _same(jitgrad.signbit(s), torch.signbit(ts), exact=True)


def test_xlogy_values_and_grads():
    x = [0.0, 0.0, 2.0, -1.5, 3.0, 0.0, 1.0]
    y = [0.5, NAN, 3.0, 0.25, 0.0, 0.0, NAN]
    a, ta = _pair(x)
    b, tb = _pair(y)
    _same(jitgrad.xlogy(a, b), torch.xlogy(ta, tb))
    _same(a.xlogy(b), ta.xlogy(tb))
    _same(jitgrad.xlogy(a, 3.0), torch.xlogy(ta, 3.0))
    _same(jitgrad.xlogy(2, b), torch.xlogy(2, tb))
    i, ti = _pair([0, 1, 2], "int64")
    _same(jitgrad.xlogy(i, i), torch.xlogy(ti, ti))
    f, tf = _pair([[1.0], [0.0]], "float32")
    _same(jitgrad.xlogy(f, jitgrad.tensor([2.0, 3.0])), torch.xlogy(tf, torch.tensor([2.0, 3.0])))
    # gradients where both are defined (y > 0, no NaN)
    a, ta = _pair([0.0, 2.0, -1.5, 3.0], grad=True)
    b, tb = _pair([0.5, 3.0, 0.25, 7.0], grad=True)
    jitgrad.xlogy(a, b).sum().backward()
    torch.xlogy(ta, tb).sum().backward()
    _same(a.grad, ta.grad)
    _same(b.grad, tb.grad)
    # x == 0 with y > 0: PyTorch's gradient for x is log(y), not 0
    a, ta = _pair([0.0, 0.0], grad=True)
    jitgrad.xlogy(a, jitgrad.tensor([0.5, 2.0], dtype=jitgrad.float64)).sum().backward()
    torch.xlogy(ta, torch.tensor([0.5, 2.0], dtype=torch.float64)).sum().backward()
    _same(a.grad, ta.grad)


def test_logit_values_and_grads():
    x = [0.0, 0.1, 0.5, 0.9, 1.0, 1e-8, 0.999]
    for eps in (None, 1e-6, 0.05):
        a, ta = _pair(x, grad=True)
        out, tout = jitgrad.logit(a, eps), torch.logit(ta, eps)
        _same(out, tout)
        _same(a.logit(eps=eps), ta.logit(eps=eps))
        a2, ta2 = _pair([0.01, 0.2, 0.5, 0.97], grad=True)
        jitgrad.logit(a2, eps).sum().backward()
        torch.logit(ta2, eps).sum().backward()
        _same(a2.grad, ta2.grad)
    a, ta = _pair([0.0, 0.02, 0.98, 1.0], grad=True)
    jitgrad.logit(a, 0.05).sum().backward()
    torch.logit(ta, 0.05).sum().backward()
    _same(a.grad, ta.grad)  # zero outside [eps, 1 - eps]
    i, ti = _pair([0, 1], "int64")
    _same(jitgrad.logit(i), torch.logit(ti))
    f, tf = _pair([0.25, 0.75], "float32")
    _same(jitgrad.logit(f), torch.logit(tf))


def test_nansum_nanmean_values_and_grads():
    x = [[1.0, NAN, 2.0], [NAN, NAN, NAN], [0.5, -1.0, 4.0]]
    for kw in [{}, dict(dim=0), dict(dim=1, keepdim=True), dict(dim=(0, 1)),
               dict(dim=-1), dict(keepdim=True)]:
        for fn in ("nansum", "nanmean"):
            a, ta = _pair(x, grad=True)
            out, tout = getattr(jitgrad, fn)(a, **kw), getattr(torch, fn)(ta, **kw)
            _same(out, tout)
            _same(getattr(a, fn)(**kw), getattr(ta, fn)(**kw))
            w = np.arange(1, out.numel() + 1, dtype=np.float64).reshape(tuple(out.shape))
            # the all-NaN row's mean is NaN: leave it out of the loss
            w = np.where(np.isnan(_np(out)), 0.0, w)
            ga, = jitgrad.autograd.grad(
                jitgrad.where(out.isnan(), jitgrad.zeros_like(out), out).mul(
                    jitgrad.tensor(w.tolist(), dtype=jitgrad.float64)).sum(), a)
            gt, = torch.autograd.grad(
                torch.where(tout.isnan(), torch.zeros_like(tout), tout).mul(
                    torch.tensor(w.tolist(), dtype=torch.float64)).sum(), ta)
            # PyTorch multiplies the incoming gradient by the not-NaN mask, so an
            # all-NaN slice's NaN gradient (0 / 0 counted elements) reaches its
            # NaN elements; jitgrad selects zero there (where), a finite gradient
            tnan = np.isnan(_np(gt))
            assert (_np(ga)[tnan] == 0).all()
            np.testing.assert_allclose(_np(ga)[~tnan], _np(gt)[~tnan], rtol=1e-12)
    a, ta = _pair(x, "float32")
    _same(jitgrad.nansum(a, dtype=jitgrad.float64), torch.nansum(ta, dtype=torch.float64))
    _same(jitgrad.nanmean(a, 1, dtype=jitgrad.float64), torch.nanmean(ta, 1, dtype=torch.float64))
    i, ti = _pair([[1, 2], [3, 4]], "int64")
    _same(jitgrad.nansum(i), torch.nansum(ti), exact=True)
    _same(jitgrad.nansum(i, 0), torch.nansum(ti, 0), exact=True)
