"""Reduction, softmax-family and strided-copy kernels against PyTorch 1.13
over many shapes, dims and layouts (contiguous, transposed, sliced), large
enough to take the blocked and parallel paths: values within float
tolerance (the summation orders differ), max's values and indices exactly,
copies exactly, compiled == eager bitwise."""
import numpy as np
import pytest

import jitgrad as jg

torch = pytest.importorskip("torch")

SHAPES = [(7,), (4096,), (5000,), (70000,), (3, 37), (64, 1024), (1024, 65), (2, 3, 4),
          (3, 300, 129), (130, 2, 257)]


def data(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def layouts(a):
    """(name, jitgrad view, torch view) of the same logical values."""
    yield "contig", jg.tensor(a), torch.tensor(a)
    if a.ndim >= 2:
        b = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        yield "transposed", jg.tensor(b).transpose(-1, -2), torch.tensor(b).transpose(-1, -2)
    big = np.concatenate([a, a[:1]], axis=0) if a.shape[0] else a
    yield "sliced", jg.tensor(big)[: a.shape[0]], torch.tensor(big)[: a.shape[0]]


def close(j, t, rtol=1e-5, atol=1e-5):
    jn, tn = j.numpy(), t.numpy()
    assert jn.shape == tn.shape, (jn.shape, tn.shape)
    assert jn.dtype == tn.dtype, (jn.dtype, tn.dtype)
    np.testing.assert_allclose(jn, tn, rtol=rtol, atol=atol * max(1.0, np.abs(tn).max(initial=0)))


def dim_lists(nd):
    out = [None] + [(d,) for d in range(nd)] + [(-1,)]
    if nd >= 2:
        out += [(0, 1), (0, nd - 1)]
    if nd >= 3:
        out += [(1, 2), (0, 2)]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_sum_mean_vs_torch(shape, dtype):
    a = data(shape, dtype=dtype)
    for name, x, t in layouts(a):
        for dims in dim_lists(len(shape)):
            for keep in (False, True):
                if dims is None:
                    close(x.sum(), t.sum())
                    close(x.mean(), t.mean())
                    continue
                close(x.sum(dims, keepdim=keep), t.sum(dims, keepdim=keep))
                close(x.mean(dims, keepdim=keep), t.mean(dims, keepdim=keep))


@pytest.mark.parametrize("shape", [(4096,), (70000,), (64, 1024)])
def test_sum_int_exact(shape):
    a = np.random.default_rng(1).integers(-1000, 1000, shape)
    x, t = jg.tensor(a), torch.tensor(a)
    assert x.sum().item() == t.sum().item()
    if len(shape) == 2:
        assert np.array_equal(x.sum(0).numpy(), t.sum(0).numpy())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_max_vs_torch(shape, dtype):
    a = data(shape, seed=2, dtype=dtype)
    for name, x, t in layouts(a):
        assert x.max().item() == t.max().item()
        for d in range(len(shape)):
            jv, ji = x.max(d)
            tv, ti = t.max(d)
            assert np.array_equal(jv.numpy(), tv.numpy())
            assert np.array_equal(ji.numpy(), ti.numpy())


@pytest.mark.parametrize("n", [5, 100, 4099, 70001])
def test_max_ties_nan_zeros(n):
    a = np.zeros((3, n), np.float32)
    a[0, n // 2] = a[0, n - 1] = 2.0  # ties: the first index
    a[1, 1::3] = np.nan  # NaN wins, the first one
    a[2] = -1.0
    a[2, n // 3] = -0.0  # the max is a zero: the first one, sign kept
    a[2, n - 1] = 0.0
    x, t = jg.tensor(a), torch.tensor(a)
    jv, ji = x.max(1)
    tv, ti = t.max(1)
    np.testing.assert_array_equal(ji.numpy(), ti.numpy())
    assert np.array_equal(np.signbit(jv.numpy()), np.signbit(tv.numpy()))
    np.testing.assert_array_equal(jv.numpy(), tv.numpy())
    # the same columns along dim 0 of a dense input (vectorized across columns)
    b = np.ascontiguousarray(a.T)
    jv0, ji0 = jg.tensor(b).max(0)
    tv0, ti0 = torch.tensor(b).max(0)
    np.testing.assert_array_equal(ji0.numpy(), ti0.numpy())
    np.testing.assert_array_equal(jv0.numpy(), tv0.numpy())
    assert np.array_equal(np.signbit(jv0.numpy()), np.signbit(tv0.numpy()))
    for r in range(3):
        jm, tm = x[r].max().item(), t[r].max().item()
        # (which zero max() of all elements gives is not specified: torch's
        # vectorized kernel differs from its own max(dim))
        assert (np.isnan(jm) and np.isnan(tm)) or jm == tm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (5000,), (3, 37), (64, 1024), (1024, 65), (3, 300, 129)])
def test_softmax_family_vs_torch(shape, dtype):
    a = data(shape, seed=3, dtype=dtype) * 4
    for name, x, t in layouts(a):
        for d in range(len(shape)):
            close(x.softmax(d), t.softmax(d), rtol=1e-4, atol=1e-6)
            close(x.log_softmax(d), t.log_softmax(d), rtol=1e-4, atol=1e-5)


def test_softmax_inf_nan_rows():
    a = np.array([[1.0, np.inf, 2.0], [np.nan, 0.0, 1.0], [-np.inf, -np.inf, 0.0],
                  [5.0, 5.0, 5.0]], np.float32)
    x, t = jg.tensor(a), torch.tensor(a)
    np.testing.assert_array_equal(x.softmax(1).numpy(), t.softmax(1).numpy())
    np.testing.assert_array_equal(x.log_softmax(1).numpy(), t.log_softmax(1).numpy())


def test_cross_entropy_vs_torch():
    a = data((300, 1000), seed=4)
    tgt = np.random.default_rng(5).integers(0, 1000, 300)
    x = jg.tensor(a, requires_grad=True)
    t = torch.tensor(a, requires_grad=True)
    jl = jg.nn.functional.cross_entropy(x, jg.tensor(tgt))
    tl = torch.nn.functional.cross_entropy(t, torch.tensor(tgt))
    close(jl.detach(), tl.detach(), rtol=1e-5)
    jl.backward()
    tl.backward()
    close(x.grad, t.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("shape,perm", [((1024, 1024), (1, 0)), ((33, 70), (1, 0)),
                                        ((3, 100, 67), (0, 2, 1)), ((40, 50, 60), (2, 0, 1)),
                                        ((40, 50, 60), (1, 2, 0)), ((8, 9, 10, 11), (3, 1, 2, 0))])
def test_strided_copy_exact(shape, perm, dtype):
    a = (data(shape, seed=6) * 100).astype(dtype)
    x, t = jg.tensor(a), torch.tensor(a)
    jy = x.permute(*perm).contiguous()
    ty = t.permute(*perm).contiguous()
    assert jy.is_contiguous()
    np.testing.assert_array_equal(jy.numpy(), ty.numpy())
    # a permuted source of a sliced tensor, and a copy into a transposed view
    if len(shape) == 2:
        s = x[1:, 2:].t().contiguous()
        np.testing.assert_array_equal(s.numpy(), t[1:, 2:].t().contiguous().numpy())


@pytest.mark.parametrize("backend", ["interp"] + (["c"] if jg.HAS_COMPILER else []))
def test_compiled_reductions_bitwise(backend):
    a = data((96, 1100), seed=7)

    def f(x):
        return (x.sum(1).sum() + x.t().sum(0).mean() + x.softmax(1).sum(0).sum()
                + x.log_softmax(0).max() + x.t().contiguous().sum(1).max())

    x1 = jg.tensor(a, requires_grad=True)
    y1 = f(x1)
    y1.backward()
    cf = jg.compile(f, backend=backend)
    x2 = jg.tensor(a, requires_grad=True)
    y2 = cf(x2)
    y2.backward()
    assert np.array_equal(y1.detach().numpy(), y2.detach().numpy())
    assert np.array_equal(x1.grad.numpy(), x2.grad.numpy())
