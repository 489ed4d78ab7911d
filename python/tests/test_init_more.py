"""nn.init's trunc_normal_, orthogonal_, eye_, dirac_, sparse_ and the
deprecated spellings against PyTorch 1.13 (the numbers come from jitgrad's
generator, so distributions and structure are compared, not values)."""
import warnings

import numpy as np
import pytest

import jitgrad as jg
from jitgrad.nn import init

torch = pytest.importorskip("torch")


def arr(t):
    return np.array(t.detach().tolist(), dtype=np.float64).reshape(tuple(t.shape))


def raises_like(jfn, tfn):
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(type(te.value)) as je:
        jfn()
    assert str(je.value) == str(te.value), (je.value, te.value)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.5, 1.0, -1.0, 1.5),
                                          (0.0, 0.02, -0.04, 0.04), (2.0, 0.5, 1.0, 10.0)])
def test_trunc_normal_statistics(dt, mean, std, a, b):
    jg.manual_seed(0)
    torch.manual_seed(0)
    j = jg.empty(40000, dtype=getattr(jg, dt))
    assert init.trunc_normal_(j, mean, std, a, b) is j
    assert j.dtype is getattr(jg, dt)
    t = torch.nn.init.trunc_normal_(torch.empty(200000, dtype=getattr(torch, dt)), mean, std, a, b)
    v, w = arr(j), arr(t)
    assert v.min() >= a and v.max() <= b
    assert abs(v.mean() - w.mean()) < 0.02 * std and abs(v.std() - w.std()) < 0.02 * std
    np.testing.assert_allclose(np.quantile(v, [0.1, 0.5, 0.9]), np.quantile(w, [0.1, 0.5, 0.9]),
                               atol=0.03 * std)


def test_trunc_normal_defaults_and_warning():
    j = init.trunc_normal_(jg.empty(10000))
    v = arr(j)
    assert v.min() >= -2 and v.max() <= 2 and abs(v.mean()) < 0.05
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        init.trunc_normal_(jg.empty(5), mean=10.0, std=1.0, a=-1.0, b=1.0)
    p = jg.nn.Parameter(jg.empty(3, 4))
    init.trunc_normal_(p, std=0.02, a=-0.04, b=0.04)
    assert p.requires_grad and p.is_leaf and np.all(np.abs(arr(p)) <= 0.04)


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (6, 2, 3), (2, 3, 2, 2), (1, 7)])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_orthogonal(shape, dt):
    j = jg.empty(shape, dtype=getattr(jg, dt))
    assert init.orthogonal_(j, gain=1.5) is j
    m = arr(j).reshape(shape[0], -1)
    tol = 1e-5 if dt == "float32" else 1e-12
    rows, cols = m.shape
    if rows <= cols:
        np.testing.assert_allclose(m @ m.T, 2.25 * np.eye(rows), atol=tol * 10)
    else:
        np.testing.assert_allclose(m.T @ m, 2.25 * np.eye(cols), atol=tol * 10)
    t = torch.nn.init.orthogonal_(torch.empty(shape, dtype=getattr(torch, dt)), gain=1.5)
    mt = arr(t).reshape(shape[0], -1)
    np.testing.assert_allclose(np.linalg.svd(m, compute_uv=False),
                               np.linalg.svd(mt, compute_uv=False), atol=tol * 10)


def test_orthogonal_sign_fix_and_edges():
    # the sign fix by diag(R): the same normals through PyTorch's recipe
    jg.manual_seed(4)
    j = init.orthogonal_(jg.empty(4, 6, dtype=jg.float64))
    jg.manual_seed(4)
    g = np.array(jg.randn((4, 6), dtype=jg.float64).tolist()).T
    q, r = np.linalg.qr(torch.tensor(g).numpy())
    tq, tr = torch.linalg.qr(torch.tensor(g))
    expect = (tq * torch.diag(tr, 0).sign()).t().numpy()
    np.testing.assert_allclose(arr(j), expect, atol=1e-12)
    e = jg.empty(0, 3)
    assert init.orthogonal_(e) is e
    raises_like(lambda: init.orthogonal_(jg.empty(3)),
                lambda: torch.nn.init.orthogonal_(torch.empty(3)))
    p = jg.nn.Parameter(jg.empty(3, 3))
    init.orthogonal_(p)
    assert p.requires_grad and p.grad_fn is None


@pytest.mark.parametrize("shape", [(3, 5), (5, 3), (4, 4), (0, 2)])
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_eye(shape, dt):
    j = jg.ones(shape, dtype=getattr(jg, dt))
    t = torch.ones(shape, dtype=getattr(torch, dt))
    assert init.eye_(j) is j
    torch.nn.init.eye_(t)
    assert j.tolist() == t.tolist() and str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


def test_eye_errors():
    raises_like(lambda: init.eye_(jg.empty(3)), lambda: torch.nn.init.eye_(torch.empty(3)))
    raises_like(lambda: init.eye_(jg.empty(2, 2, 2)),
                lambda: torch.nn.init.eye_(torch.empty(2, 2, 2)))


@pytest.mark.parametrize("shape,groups", [((4, 2, 3), 1), ((4, 2, 3), 2), ((3, 16, 5, 5), 1),
                                          ((6, 4, 3, 3), 3), ((2, 3, 3, 3, 3), 1),
                                          ((6, 2, 2, 4, 5), 2), ((5, 2, 4), 1)])
def test_dirac(shape, groups):
    j = jg.ones(shape)
    t = torch.ones(shape)
    assert init.dirac_(j, groups) is j
    torch.nn.init.dirac_(t, groups)
    assert j.tolist() == t.tolist()
    j = jg.ones(shape, dtype=jg.float64)
    init.dirac_(j, groups=groups)
    assert j.tolist() == t.tolist()


def test_dirac_errors():
    raises_like(lambda: init.dirac_(jg.empty(3, 3)),
                lambda: torch.nn.init.dirac_(torch.empty(3, 3)))
    raises_like(lambda: init.dirac_(jg.empty(5, 2, 3), 2),
                lambda: torch.nn.init.dirac_(torch.empty(5, 2, 3), 2))


@pytest.mark.parametrize("rows,cols,sparsity", [(10, 6, 0.3), (7, 3, 0.5), (4, 5, 0.0),
                                                (5, 2, 1.0)])
def test_sparse(rows, cols, sparsity):
    j = jg.ones(rows, cols)
    assert init.sparse_(j, sparsity) is j
    t = torch.nn.init.sparse_(torch.ones(rows, cols), sparsity)
    v, w = arr(j), arr(t)
    assert ((v == 0).sum(0) == (w == 0).sum(0)).all()  # ceil(sparsity * rows) per column
    assert np.all(np.abs(v) < 0.1)


def test_sparse_statistics_and_errors():
    jg.manual_seed(1)
    v = arr(init.sparse_(jg.empty(2000, 20, dtype=jg.float64), 0.1, std=0.5))
    nz = v[v != 0]
    assert abs(nz.std() - 0.5) < 0.02 and abs(nz.mean()) < 0.02
    raises_like(lambda: init.sparse_(jg.empty(3), 0.1),
                lambda: torch.nn.init.sparse_(torch.empty(3), 0.1))


DEPRECATED = [("uniform", (), {}), ("normal", (), {}), ("constant", (0.5,), {}), ("eye", (), {}),
              ("xavier_uniform", (), {}), ("xavier_normal", (), {"gain": 2.0}),
              ("kaiming_uniform", (), {}), ("kaiming_normal", (), {"mode": "fan_out"}),
              ("orthogonal", (), {}), ("sparse", (0.5,), {})]


@pytest.mark.parametrize("name,args,kw", DEPRECATED)
def test_deprecated_aliases(name, args, kw):
    j = jg.empty(4, 3)
    with warnings.catch_warnings(record=True) as jw:
        warnings.simplefilter("always")
        assert getattr(init, name)(j, *args, **kw) is j
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        getattr(torch.nn.init, name)(torch.empty(4, 3), *args, **kw)
    assert [str(w.message) for w in jw] == [str(w.message) for w in tw]
    assert [w.category for w in jw] == [w.category for w in tw]
    assert jw[0].filename == __file__  # stacklevel: the caller's line
    assert getattr(init, name).__name__ == name


def test_deprecated_dirac():
    j = jg.empty(2, 2, 3)
    with pytest.warns(UserWarning, match=r"nn.init.dirac is now deprecated in favor of "
                                         r"nn.init.dirac_."):
        init.dirac(j)
    assert j.tolist() == torch.nn.init.dirac_(torch.empty(2, 2, 3)).tolist()
