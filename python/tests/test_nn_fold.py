"""F.unfold / F.fold (im2col / col2im) and nn.Unfold / nn.Fold against
PyTorch 1.13: values, gradients, batched and unbatched input, kernel size,
dilation, padding and stride, errors (types and messages), repr; compiled
(interp, c) == eager bitwise."""
import numpy as np
import pytest


def vals(t):
    return t.detach().reshape(-1).tolist()


def pair(jg, torch, shape, dtype="float64", seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    return (jg.tensor(a.tolist(), dtype=getattr(jg, dtype), requires_grad=True),
            torch.tensor(a.tolist(), dtype=getattr(torch, dtype), requires_grad=True))


def backward_both(jg, torch, jy, ty):
    w = np.random.default_rng(1).standard_normal(tuple(ty.shape)).tolist()
    (jy * jg.tensor(w, dtype=jy.dtype)).sum().backward()
    (ty * torch.tensor(w, dtype=ty.dtype)).sum().backward()


ARGS = [
    ((2, 3, 5, 6), 2, {}), ((3, 5, 6), (2, 3), {}), ((1, 2, 6, 7), 3, {"padding": 1}),
    ((2, 2, 7, 8), (3, 2), {"dilation": (2, 1), "padding": (1, 2), "stride": (2, 3)}),
    ((1, 1, 4, 4), 1, {"stride": 2}), ((0, 2, 5, 5), 2, {"stride": 2}),
    ((1, 3, 5, 5), 5, {}), ((2, 1, 9, 6), (2, 2), {"dilation": 3, "stride": 1}),
]


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("shape,k,kw", ARGS)
def test_unfold_matches_torch(jg, torch, shape, k, kw, dtype, tol):
    if 0 in shape:
        jx = jg.zeros(shape, dtype=getattr(jg, dtype), requires_grad=True)
        tx = torch.zeros(shape, dtype=getattr(torch, dtype), requires_grad=True)
    else:
        jx, tx = pair(jg, torch, shape, dtype)
    jy = jg.nn.functional.unfold(jx, k, **kw)
    ty = torch.nn.functional.unfold(tx, k, **kw)
    assert tuple(jy.shape) == tuple(ty.shape) and jy.dtype == getattr(jg, dtype)
    assert vals(jy) == vals(ty)
    if ty.numel():
        backward_both(jg, torch, jy, ty)
        assert np.allclose(vals(jx.grad), vals(tx.grad), rtol=tol, atol=tol)
    jm, tm = jg.nn.Unfold(k, **kw), torch.nn.Unfold(k, **kw)
    assert repr(jm) == repr(tm) and vals(jm(jx)) == vals(ty)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("shape,k,kw", [a for a in ARGS if 0 not in a[0]])
def test_fold_matches_torch(jg, torch, shape, k, kw, dtype, tol):
    # fold takes what unfold gives for the same arguments
    cols = torch.nn.functional.unfold(torch.zeros(shape), k, **kw)
    jx, tx = pair(jg, torch, tuple(cols.shape), dtype)
    out = shape[-2:]
    jy = jg.nn.functional.fold(jx, out, k, **kw)
    ty = torch.nn.functional.fold(tx, out, k, **kw)
    assert tuple(jy.shape) == tuple(ty.shape) and jy.dtype == getattr(jg, dtype)
    assert np.allclose(vals(jy), vals(ty), rtol=tol, atol=tol)
    backward_both(jg, torch, jy, ty)
    assert vals(jx.grad) == vals(tx.grad)  # (the gradient is a gather: exact)
    jm, tm = jg.nn.Fold(out, k, **kw), torch.nn.Fold(out, k, **kw)
    assert repr(jm) == repr(tm)
    assert np.allclose(vals(jm(jx)), vals(ty), rtol=tol, atol=tol)


def test_fold_of_unfold_counts_overlaps(jg, torch):
    for t in (jg, torch):
        x = t.ones(1, 1, 4, 5, dtype=t.float64)
        y = t.nn.functional.fold(t.nn.functional.unfold(x, 2, padding=1), (4, 5), 2, padding=1)
        assert y.reshape(-1).tolist() == [4.0] * 20


def errors_of(t, fn):
    try:
        fn(t)
    except Exception as e:  # noqa: BLE001 (compared by the caller)
        return type(e).__name__, str(e)
    return None


ERRORS = [
    lambda t: t.nn.functional.unfold(t.ones(5, 6), 2),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6, 7), 2),
    lambda t: t.nn.functional.unfold(t.ones(1, 0, 5, 6), 2),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6), 7),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6), (2, 3, 4)),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6), 0),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6), 2, stride=0),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6), 2, padding=-1),
    lambda t: t.nn.functional.unfold(t.ones(1, 3, 5, 6), 2, dilation=(1, 0)),
    lambda t: t.nn.functional.unfold(t.tensor([[[[1, 2], [3, 4]]]]), 1),
    lambda t: t.nn.functional.fold(t.ones(1, 12, 11), (4, 5), 2),
    lambda t: t.nn.functional.fold(t.ones(1, 13, 12), (4, 5), 2),
    lambda t: t.nn.functional.fold(t.ones(1, 1, 13, 12), (4, 5), 2),
    lambda t: t.nn.functional.fold(t.ones(1, 12, 12), 4, 2),
    lambda t: t.nn.functional.fold(t.ones(1, 12, 12), (1, 1), 2),
    lambda t: t.nn.functional.fold(t.ones(1, 12, 12), (4, 5), 2, stride=0, dilation=0),
    lambda t: t.nn.functional.fold(t.ones(1, 12, 12), (4, 5), 2, padding=-1),
    lambda t: t.nn.functional.fold(t.ones(1, 12, 12), (4, 5, 6), 2),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_match_torch(jg, torch, i):
    want = errors_of(torch, ERRORS[i])
    assert want is not None
    assert errors_of(jg, ERRORS[i]) == want


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    F = jg.nn.functional
    a = np.random.default_rng(4).standard_normal((2, 3, 6, 7))
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(a.tolist(), dtype=dtype, requires_grad=True)

        def prog(x):
            cols = F.unfold(x, (3, 2), padding=1, stride=(2, 1))
            y = F.fold(cols.tanh(), (6, 7), (3, 2), padding=1, stride=(2, 1))
            return (y * x).sum() + (F.unfold(x[0], 2, dilation=2) ** 2).sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
