"""F.dropout1d / dropout3d / alpha_dropout / feature_alpha_dropout and
their modules (eval identity, whole-channel masks, scale and statistics,
gradient = mask * scale, errors), F.adaptive_max_pool1d / 2d (values,
indices, gradients, ties and NaN, errors) with AdaptiveMaxPool1d / 2d, and
F.local_response_norm / LocalResponseNorm against PyTorch 1.13; compiled
(interp, c) == eager bitwise."""
import math
import warnings

import numpy as np
import pytest

ALPHA = 1.7580993408473766


def vals(t):
    return t.detach().reshape(-1).tolist()


def pair(jg, torch, shape, dtype="float64", seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return (jg.tensor(a.tolist(), dtype=getattr(jg, dtype), requires_grad=True),
            torch.tensor(a.tolist(), dtype=getattr(torch, dtype), requires_grad=True))


def errors_of(t, fn):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(t)
    except Exception as e:  # noqa: BLE001 (compared by the caller)
        return type(e).__name__, str(e)
    return None


# ---- dropout variants

FEATURE = [("dropout1d", (40, 50, 3)), ("dropout1d", (50, 4)), ("dropout3d", (8, 50, 2, 1, 3)),
           ("dropout3d", (50, 2, 2, 2)), ("feature_alpha_dropout", (40, 50, 3)),
           ("feature_alpha_dropout", (40, 50))]


@pytest.mark.parametrize("p", [0.2, 0.5])
@pytest.mark.parametrize("name,shape", FEATURE)
def test_feature_dropout_masks_whole_channels(jg, name, shape, p):
    alpha = "alpha" in name
    x = (jg.rand(*shape, dtype=jg.float64) + 0.5).requires_grad_()
    y = getattr(jg.nn.functional, name)(x, p, True)
    w = jg.rand(*shape, dtype=jg.float64)
    (y * w).sum().backward()
    a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p)) if alpha else 1.0 / (1 - p)
    batched = len(shape) in (3, 5) or (alpha and len(shape) >= 2)
    xs = np.array(vals(x)).reshape(shape)
    ys = np.array(vals(y)).reshape(shape)
    gs = np.array(vals(x.grad)).reshape(shape)
    ws = np.array(vals(w)).reshape(shape)
    if not batched:
        xs, ys, gs, ws = xs[None], ys[None], gs[None], ws[None]
    kept = []
    for n in range(xs.shape[0]):
        for c in range(xs.shape[1]):
            x_, y_, g_, w_ = xs[n, c], ys[n, c], gs[n, c], ws[n, c]
            if alpha:
                keep = np.allclose(y_, x_ * a + ALPHA * a * p, rtol=1e-12)
                drop = np.allclose(y_, ALPHA * a * (p - 1), rtol=1e-12)
            else:
                keep = np.allclose(y_, x_ * a, rtol=1e-12)
                drop = np.all(y_ == 0)
            assert keep != drop  # one mask value per channel
            # the gradient is mask * scale
            assert np.allclose(g_, w_ * (a if keep else 0.0), rtol=1e-12, atol=0)
            kept.append(keep)
    frac = 1 - sum(kept) / len(kept)
    assert abs(frac - p) < 0.12, frac


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_alpha_dropout_elementwise_statistics(jg, torch, p):
    n = 200000
    x = jg.randn(n, dtype=jg.float64)
    y = jg.nn.functional.alpha_dropout(x, p, True)
    t = torch.nn.functional.alpha_dropout(torch.randn(n, dtype=torch.float64), p, True)
    a = 1.0 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
    dropped = sum(1 for v in vals(y) if v == ALPHA * a * (p - 1))
    assert abs(dropped / n - p) < 0.01
    # zero mean and unit variance kept, as PyTorch's
    for out in (y, t):
        assert abs(out.mean().item()) < 0.02 and abs(out.var().item() - 1) < 0.02
    # a mask per element: the gradient is mask * a
    x.requires_grad_()
    y = jg.nn.functional.alpha_dropout(x, p, True)
    y.sum().backward()
    g = vals(x.grad)
    assert set(g) == {0.0, a} or set(g) == {0.0, jg.tensor(a, dtype=jg.float64).item()}


def test_dropout_variants_eval_and_corner_cases(jg, torch):
    F = jg.nn.functional
    x = jg.randn(2, 3, 4, 5, 6)
    for fn in (F.dropout3d, F.dropout1d, F.alpha_dropout, F.feature_alpha_dropout):
        a = x[0, 0] if fn is F.dropout1d else x
        assert fn(a, 0.5, False) is a
        assert fn(a, 0.0, True) is a
        ones = jg.ones(*a.shape)
        assert vals(fn(ones, 1.0, True)) == [0.0] * ones.numel()
    # the alpha forms are off by default (training=False), the others on
    assert F.alpha_dropout(x) is x and F.feature_alpha_dropout(x) is x
    assert F.dropout3d(x) is not x
    for t in (jg, torch):
        e = jg.zeros(0, 3, 4)
        assert tuple(t.nn.functional.dropout1d(t.zeros(0, 3, 4)).shape) == tuple(e.shape)


def test_dropout_variants_inplace(jg):
    F = jg.nn.functional
    for fn, shape in ((F.dropout1d, (4, 30, 3)), (F.dropout1d, (30, 3)),
                      (F.dropout3d, (30, 2, 2, 2)), (F.alpha_dropout, (30, 3)),
                      (F.feature_alpha_dropout, (4, 30, 3))):
        x = jg.ones(*shape, dtype=jg.float64)
        assert fn(x, 0.5, True, True) is x
        assert len(set(vals(x))) == 2


DROPOUT_ERRORS = [
    lambda t: t.nn.functional.dropout1d(t.ones(2, 3, 4, 5), 0.5),
    lambda t: t.nn.functional.dropout1d(t.ones(3), 0.5),
    lambda t: t.nn.functional.dropout1d(t.ones(2, 3), 1.5),
    lambda t: t.nn.functional.dropout3d(t.ones(2, 3, 4, 5), -0.5),
    lambda t: t.nn.functional.alpha_dropout(t.ones(2, 3), 1.5),
    lambda t: t.nn.functional.feature_alpha_dropout(t.ones(2, 3), -1.0, True),
    lambda t: t.nn.functional.feature_alpha_dropout(t.ones(2), 0.5, True),
    lambda t: t.nn.Dropout1d(2.0),
    lambda t: t.nn.AlphaDropout(-0.1),
]


@pytest.mark.parametrize("i", range(len(DROPOUT_ERRORS)))
def test_dropout_errors_match_torch(jg, torch, i):
    want = errors_of(torch, DROPOUT_ERRORS[i])
    assert want is not None
    assert errors_of(jg, DROPOUT_ERRORS[i]) == want


def test_dropout3d_warns_as_torch(jg, torch):
    for t in (jg, torch):
        with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input to dropout3d, "
                                             "which is deprecated"):
            t.nn.functional.dropout3d(t.ones(2, 3, 4))


@pytest.mark.parametrize("name,args", [("Dropout1d", ()), ("Dropout3d", (0.2, True)),
                                       ("AlphaDropout", ()), ("FeatureAlphaDropout", (0.3,)),
                                       ("AlphaDropout", (0.1, True))])
def test_dropout_modules_match_torch(jg, torch, name, args):
    jm, tm = getattr(jg.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(jm) == repr(tm)
    x = jg.ones(4, 30, 3, 2, 2) if name == "Dropout3d" else jg.ones(4, 30, 3)
    y = jm(x * 1)
    assert len(set(vals(y))) == 2  # training: a mask
    jm.eval()
    assert vals(jm(x)) == vals(x)
    assert list(jm.state_dict()) == []


# ---- adaptive max pooling

POOL2D = [((1, 1, 7, 5), 3), ((2, 3, 7, 5), (2, 4)), ((3, 6, 6), (3, None)),
          ((2, 2, 5, 4), (7, 9)), ((1, 2, 4, 4), 1), ((2, 1, 5, 3), (None, 2)),
          ((1, 1, 3, 3), (0, 2))]


@pytest.mark.parametrize("dtype,tol", [("float64", 0.0), ("float32", 0.0)])
@pytest.mark.parametrize("shape,out", POOL2D)
def test_adaptive_max_pool2d_matches_torch(jg, torch, shape, out, dtype, tol):
    jx, tx = pair(jg, torch, shape, dtype)
    jy, ji = jg.nn.functional.adaptive_max_pool2d(jx, out, return_indices=True)
    ty, ti = torch.nn.functional.adaptive_max_pool2d(tx, out, return_indices=True)
    assert tuple(jy.shape) == tuple(ty.shape) and ji.dtype == jg.int64
    assert vals(jy) == vals(ty) and ji.tolist() == ti.tolist()
    assert vals(jg.nn.functional.adaptive_max_pool2d(jx, out)) == vals(ty)
    if ty.numel() == 0:  # (PyTorch's backward refuses an empty output)
        jy.sum().backward()
        assert vals(jx.grad) == [0.0] * jx.numel()
        return
    w = np.random.default_rng(2).standard_normal(tuple(ty.shape)).reshape(-1).tolist()
    (jy * jg.tensor(w, dtype=jy.dtype).reshape(tuple(ty.shape))).sum().backward()
    (ty * torch.tensor(w, dtype=ty.dtype).reshape(ty.shape)).sum().backward()
    assert np.allclose(vals(jx.grad), vals(tx.grad), rtol=1e-6, atol=1e-7)


POOL1D = [((2, 3, 7), 3), ((3, 7), 5), ((1, 2, 5), 9), ((2, 1, 6), 1), ((1, 1, 4), [2]),
          ((0, 3, 4), 2)]


@pytest.mark.parametrize("shape,out", POOL1D)
def test_adaptive_max_pool1d_matches_torch(jg, torch, shape, out):
    jx, tx = pair(jg, torch, shape)
    if 0 in shape:
        jx, tx = jg.zeros(shape, requires_grad=True), torch.zeros(shape, requires_grad=True)
    jy, ji = jg.nn.functional.adaptive_max_pool1d(jx, out, True)
    ty, ti = torch.nn.functional.adaptive_max_pool1d(tx, out, True)
    assert tuple(jy.shape) == tuple(ty.shape)
    assert vals(jy) == vals(ty) and ji.tolist() == ti.tolist()
    assert vals(jg.nn.functional.adaptive_max_pool1d(jx, out)) == vals(ty)
    jy.sum().backward()
    ty.sum().backward()
    assert vals(jx.grad) == vals(tx.grad)


def test_adaptive_max_pool_ties_and_nan(jg, torch):
    nan = float("nan")
    rows = [[3.0, 1.0, 3.0, 2.0, 3.0, 3.0], [1.0, nan, 3.0, nan, 2.0, 0.0],
            [nan, 5.0, 1.0, 1.0, 1.0, nan], [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0]]
    for out in (1, 2, 4, 5):
        jx = jg.tensor([rows], dtype=jg.float64, requires_grad=True)
        tx = torch.tensor([rows], dtype=torch.float64, requires_grad=True)
        jy, ji = jg.nn.functional.adaptive_max_pool1d(jx, out, True)
        ty, ti = torch.nn.functional.adaptive_max_pool1d(tx, out, True)
        assert ji.tolist() == ti.tolist()
        assert [math.isnan(v) or v for v in vals(jy)] == [math.isnan(v) or v for v in vals(ty)]
        jy.sum().backward()
        ty.sum().backward()
        assert vals(jx.grad) == vals(tx.grad)
        jy2, ji2 = jg.nn.functional.adaptive_max_pool2d(jx.detach(), (2, out), True)
        ty2, ti2 = torch.nn.functional.adaptive_max_pool2d(tx.detach(), (2, out), True)
        assert ji2.tolist() == ti2.tolist()


POOL_ERRORS = [
    lambda t: t.nn.functional.adaptive_max_pool1d(t.ones(7), 3),
    lambda t: t.nn.functional.adaptive_max_pool1d(t.ones(2, 3, 7), (3, 4)),
    lambda t: t.nn.functional.adaptive_max_pool1d(t.ones(2, 3, 0), 2),
    lambda t: t.nn.functional.adaptive_max_pool1d(t.ones(2, 0, 3), 2),
    lambda t: t.nn.functional.adaptive_max_pool1d(t.ones(2, 3, 5), -1),
    lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(7, 5), 3),
    lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(1, 7, 5), (3, 4, 5)),
    lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(1, 7, 5), (3,)),
    lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(2, 1, 0, 5), (2, 2)),
    lambda t: t.nn.functional.adaptive_max_pool2d(t.ones(2, 1, 7, 5), -1),
    lambda t: t.nn.functional.adaptive_max_pool2d(t.tensor([[[1, 2], [3, 4]]]), 1),
    lambda t: t.nn.functional.local_response_norm(t.ones(2, 3), 2),
]


@pytest.mark.parametrize("i", range(len(POOL_ERRORS)))
def test_pool_and_lrn_errors_match_torch(jg, torch, i):
    want = errors_of(torch, POOL_ERRORS[i])
    assert want is not None
    assert errors_of(jg, POOL_ERRORS[i]) == want


@pytest.mark.parametrize("name,args,shape", [("AdaptiveMaxPool1d", (3,), (2, 3, 7)),
                                             ("AdaptiveMaxPool1d", (4, True), (3, 9)),
                                             ("AdaptiveMaxPool2d", ((2, None), True), (2, 3, 5, 4)),
                                             ("AdaptiveMaxPool2d", (3,), (3, 7, 5))])
def test_adaptive_max_pool_modules_match_torch(jg, torch, name, args, shape):
    jm, tm = getattr(jg.nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(jm) == repr(tm)
    jx, tx = pair(jg, torch, shape)
    jo, to = jm(jx), tm(tx)
    if isinstance(to, tuple):
        assert vals(jo[0]) == vals(to[0]) and jo[1].tolist() == to[1].tolist()
    else:
        assert vals(jo) == vals(to)


# ---- local response normalization

LRN = [((2, 5, 4), 3, {}), ((2, 5, 3, 4), 2, {"alpha": 1e-2, "beta": 0.5, "k": 2.0}),
       ((1, 6, 2, 3, 2), 5, {"k": 0.5}), ((2, 3, 4), 1, {"beta": 1.0}),
       ((2, 4, 3, 3), 7, {"alpha": 0.3})]


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("shape,size,kw", LRN)
def test_local_response_norm_matches_torch(jg, torch, shape, size, kw, dtype, tol):
    jx, tx = pair(jg, torch, shape, dtype)
    jy = jg.nn.functional.local_response_norm(jx, size, **kw)
    ty = torch.nn.functional.local_response_norm(tx, size, **kw)
    assert tuple(jy.shape) == tuple(ty.shape) and jy.dtype == getattr(jg, dtype)
    assert np.allclose(vals(jy), vals(ty), rtol=tol, atol=tol)
    (jy * jy).sum().backward()
    (ty * ty).sum().backward()
    assert np.allclose(vals(jx.grad), vals(tx.grad), rtol=tol, atol=tol)
    jm, tm = jg.nn.LocalResponseNorm(size, **kw), torch.nn.LocalResponseNorm(size, **kw)
    assert repr(jm) == repr(tm)
    assert np.allclose(vals(jm(jx)), vals(tm(tx)), rtol=tol, atol=tol)


def test_local_response_norm_empty(jg):
    x = jg.zeros(0, 3, 4)
    assert jg.nn.functional.local_response_norm(x, 2) is x


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    F = jg.nn.functional
    a = np.random.default_rng(5).standard_normal((2, 4, 5, 6))
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(a.tolist(), dtype=dtype, requires_grad=True)

        def prog(x):
            out = F.adaptive_max_pool2d(x, (3, 4)).sum()
            y, idx = F.adaptive_max_pool2d(x * 2.0, (None, 5), return_indices=True)
            out = out + (y * y).sum() + idx.sum() * 1e-3
            out = out + F.adaptive_max_pool1d(x[0], 4).exp().sum()
            out = out + (F.local_response_norm(x, 3, alpha=0.1) ** 2).sum()
            out = out + F.local_response_norm(x[:, :, 0], 2, k=2.0).sum()
            out = out + F.alpha_dropout(x, 0.5, False).sum() + F.dropout1d(x[0], 0.3, False).sum()
            return out

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
