"""jitgrad.linalg.eigh / eigvalsh (LAPACK syevd) against PyTorch 1.13:
eigenvalues, eigenvectors up to each column's sign, gradients of
sign-invariant functions of them (float64, float32, batched, UPLO), errors,
and compiled (interp, c) == eager bitwise."""
import pytest

from test_linalg_norms import close, raises_same, vals


def sym(jg, torch, shape, dtype="float64", seed=0, upper_junk=False):
    """A random symmetric matrix (upper_junk: its strict upper triangle
    replaced by other numbers, which UPLO='L' must ignore)."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(*shape, generator=g, dtype=torch.float64)
    a = m + m.transpose(-2, -1)
    if upper_junk:
        a = a.tril() + torch.randn(*shape, generator=g, dtype=torch.float64).triu(1)
    t = a.to(getattr(torch, dtype)).requires_grad_()
    j = jg.tensor(t.tolist(), dtype=getattr(jg, dtype)).reshape(*shape).requires_grad_()
    return j, t


def signed(v):
    """Eigenvector columns with the sign that makes each column's largest
    |entry| positive (as nested lists)."""
    import numpy as np

    a = np.array(v.detach().tolist(), dtype=np.float64)
    idx = np.abs(a).argmax(axis=-2)
    s = np.sign(np.take_along_axis(a, idx[..., None, :], axis=-2))
    return (a * s).reshape(-1).tolist()


def loss_parts(lib, L, V):
    """A sign-invariant function of the eigenvalues and eigenvectors."""
    n = L.shape[-1]
    w = lib.arange(1, n + 1, dtype=L.dtype) * 0.25
    c = lib.arange(1, n * n + 1, dtype=L.dtype).reshape(n, n) * 0.01
    return (L * w).sum() + (V * V * c).sum() + ((V * L.unsqueeze(-2)) @ V.transpose(-2, -1)
                                                 * c).sum()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 1, 5, 5)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(jg, torch, shape, dtype, uplo):
    ja, ta = sym(jg, torch, shape, dtype)
    jl, jv = jg.linalg.eigh(ja, UPLO=uplo)
    tl, tv = torch.linalg.eigh(ta, UPLO=uplo)
    tol = 1e-11 if dtype == "float64" else 1e-4
    assert tuple(jl.shape) == tuple(tl.shape) and tuple(jv.shape) == tuple(tv.shape)
    assert jl.dtype == getattr(jg, dtype) and jv.dtype == getattr(jg, dtype)
    assert close(vals(jl), vals(tl), tol)
    assert close(signed(jv), signed(tv), tol)
    loss_parts(jg, jl, jv).backward()
    loss_parts(torch, tl, tv).backward()
    assert close(vals(ja.grad), vals(ta.grad), tol * 100), (vals(ja.grad), vals(ta.grad))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle_and_eigvalsh(jg, torch, uplo):
    ja, ta = sym(jg, torch, (2, 4, 4), upper_junk=True)
    if uplo == "U":
        ja, ta = ja.transpose(-2, -1), ta.transpose(-2, -1)
    jl, jv = jg.linalg.eigh(ja, uplo)
    tl, tv = torch.linalg.eigh(ta, uplo)
    assert close(vals(jl), vals(tl), 1e-11)
    assert close(signed(jv), signed(tv), 1e-11)
    r = jg.linalg.eigh(ja, uplo)
    assert r.eigenvalues is r[0] and r.eigenvectors is r[1]
    jw = jg.linalg.eigvalsh(ja, UPLO=uplo)
    tw = torch.linalg.eigvalsh(ta, UPLO=uplo)
    assert close(vals(jw), vals(tw), 1e-11)
    jb, tb = sym(jg, torch, (3, 3), seed=2)
    (jb_g,) = jg.autograd.grad((jg.linalg.eigvalsh(jb) ** 2).sum(), [jb])
    (tb_g,) = torch.autograd.grad((torch.linalg.eigvalsh(tb) ** 2).sum(), [tb])
    assert close(vals(jb_g), vals(tb_g), 1e-11)
    assert jg.linalg.eigh(jb)[0].grad_fn.name() == "LinalgEighBackward0"


def test_eigh_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.eigh(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.eigvalsh(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.eigh(t.ones(2, 2), UPLO="X"))
    raises_same(jg, torch, lambda t: t.linalg.eigh(t.ones(2, 2, dtype=t.int64)))
    raises_same(jg, torch, lambda t: t.linalg.eigh(t.ones(3)))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, torch, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    for dtype in ("float64", "float32"):
        ja, _ = sym(jg, torch, (2, 4, 4), dtype, 7)

        def prog(a):
            L, V = jg.linalg.eigh(a * 1.5)
            return loss_parts(jg, L, V) + jg.linalg.eigvalsh(a, "U").sum()

        want = prog(ja)
        (wg,) = jg.autograd.grad(want, [ja])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(ja)
        (gg,) = jg.autograd.grad(got, [ja])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
