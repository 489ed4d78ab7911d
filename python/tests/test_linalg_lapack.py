"""jitgrad.linalg's LAPACK-backed functions against PyTorch 1.13: inv,
slogdet, det, solve, negative matrix powers, and the torch.inverse / det /
logdet / slogdet aliases and Tensor methods — values and gradients (float64
and float32, batched, strided), double backward, singular matrices and bad
shapes (exception type and text), and a compiled training step through
inv / slogdet / solve equal to eager bitwise."""
import math

import pytest

from test_linalg_norms import check, close, pair, raises_same, vals


def well_conditioned(jg, torch, shape, dtype="float64", seed=0):
    """A + n I for a random A: comfortably invertible."""
    ja, ta = pair(jg, torch, shape, dtype, seed)
    n = shape[-1]
    with torch.no_grad():
        ta.add_(torch.eye(n, dtype=ta.dtype) * n)
    ja = jg.tensor(ta.tolist(), dtype=ja.dtype).reshape(*shape).requires_grad_()
    return ja, ta


def check_wc(jg, torch, jfn, tfn, shapes, dtype="float64", tol=None):
    """check() on well-conditioned square inputs (the first input) plus
    random others."""
    ins = [well_conditioned(jg, torch, shapes[0], dtype, 0)] + \
        [pair(jg, torch, s, dtype, k + 1) for k, s in enumerate(shapes[1:])]
    jy = jfn(*[a for a, _ in ins])
    ty = tfn(*[b for _, b in ins])
    tol = tol or (1e-12 if dtype == "float64" else 2e-5)
    jys = jy if isinstance(jy, tuple) else (jy,)
    tys = ty if isinstance(ty, tuple) else (ty,)
    for a, b in zip(jys, tys):
        assert tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        assert close(vals(a), vals(b), tol), (vals(a), vals(b))
    j_last, t_last = jys[-1], tys[-1]
    w = [0.5 + 0.25 * i for i in range(t_last.numel())]
    (j_last * jg.tensor(w, dtype=j_last.dtype).reshape(*j_last.shape)).sum().backward()
    (t_last * torch.tensor(w, dtype=t_last.dtype).reshape(t_last.shape)).sum().backward()
    for a, b in ins:
        if a.numel() == 0:  # jitgrad gives an empty input no gradient; PyTorch an empty one
            assert a.grad is None or a.grad.numel() == 0
            continue
        assert close(vals(a.grad), vals(b.grad), tol * 10), (vals(a.grad), vals(b.grad))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 1, 5, 5), (0, 3, 3)])
def test_inv(jg, torch, shape, dtype):
    check_wc(jg, torch, jg.linalg.inv, torch.linalg.inv, [shape], dtype)


def test_inv_of_strided_and_aliases(jg, torch):
    check_wc(jg, torch, lambda a: jg.linalg.inv(a.transpose(-2, -1)),
             lambda a: torch.linalg.inv(a.transpose(-2, -1)), [(2, 3, 3)])
    check_wc(jg, torch, jg.inverse, torch.inverse, [(3, 3)])
    check_wc(jg, torch, lambda a: a.inverse(), lambda a: a.inverse(), [(2, 3, 3)])
    ja, _ = well_conditioned(jg, torch, (3, 3))
    assert jg.linalg.inv(ja).grad_fn.name() == "LinalgInvExBackward0"
    assert jg.linalg.inv(jg.zeros(0, 0)).shape == (0, 0)


def test_inv_double_backward(jg, torch):
    ja, ta = well_conditioned(jg, torch, (3, 3))
    (jg_,) = jg.autograd.grad(jg.linalg.inv(ja).pow(2).sum(), [ja], create_graph=True)
    (tg,) = torch.autograd.grad(torch.linalg.inv(ta).pow(2).sum(), [ta], create_graph=True)
    assert close(vals(jg_), vals(tg), 1e-12)
    (jgg,) = jg.autograd.grad(jg_.sum(), [ja])
    (tgg,) = torch.autograd.grad(tg.sum(), [ta])
    assert close(vals(jgg), vals(tgg), 1e-11)


def test_inv_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.inv(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.inv(t.ones(3)))
    raises_same(jg, torch, lambda t: t.linalg.inv(t.ones(3, 3, dtype=t.int64)))
    raises_same(jg, torch, lambda t: t.linalg.inv(t.tensor([[1., 2.], [2., 4.]])))
    raises_same(jg, torch, lambda t: t.linalg.inv(t.zeros(2, 2, 2)))
    raises_same(jg, torch, lambda t: t.linalg.inv(t.tensor([[1., 2.], [2., 4.]],
                                                           dtype=t.float64)))
    raises_same(jg, torch, lambda t: t.inverse(t.ones(2, 3)))
    with pytest.raises(jg.linalg.LinAlgError):
        jg.linalg.inv(jg.zeros(2, 2))
    assert issubclass(jg.linalg.LinAlgError, RuntimeError)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1), (0, 2, 2), (2, 0, 0)])
def test_slogdet_det_logdet(jg, torch, shape, dtype):
    check_wc(jg, torch, lambda a: tuple(jg.linalg.slogdet(a)),
             lambda a: tuple(torch.linalg.slogdet(a)), [shape], dtype)
    check_wc(jg, torch, jg.linalg.det, torch.linalg.det, [shape], dtype)
    check_wc(jg, torch, jg.det, torch.det, [shape], dtype)
    check_wc(jg, torch, jg.logdet, torch.logdet, [shape], dtype)
    check_wc(jg, torch, lambda a: a.det(), lambda a: a.det(), [shape], dtype)
    check_wc(jg, torch, lambda a: a.logdet(), lambda a: a.logdet(), [shape], dtype)
    check_wc(jg, torch, lambda a: tuple(a.slogdet()), lambda a: tuple(a.slogdet()), [shape],
             dtype)


def test_slogdet_signs_and_singular(jg, torch):
    cases = [[[0., 1.], [1., 0.]], [[-2., 0.], [0., 3.]], [[1., 2.], [2., 4.]],
             [[0., 0.], [0., 0.]], [[1., 2.], [3., 4.]]]
    for m in cases:
        js, jl = jg.linalg.slogdet(jg.tensor(m, dtype=jg.float64))
        ts, tl = torch.linalg.slogdet(torch.tensor(m, dtype=torch.float64))
        assert vals(js) == vals(ts)
        assert close(vals(jl), vals(tl), 1e-14)
        assert close(vals(jg.linalg.det(jg.tensor(m, dtype=jg.float64))),
                     vals(torch.linalg.det(torch.tensor(m, dtype=torch.float64))), 1e-14)
        assert close(vals(jg.logdet(jg.tensor(m, dtype=jg.float64))),
                     vals(torch.logdet(torch.tensor(m, dtype=torch.float64))), 1e-14)
    r = jg.linalg.slogdet(jg.eye(2))
    assert r.sign is r[0] and r.logabsdet is r[1]


def test_det_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.det(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.slogdet(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.logdet(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.det(t.ones(3)))
    raises_same(jg, torch, lambda t: t.linalg.slogdet(t.ones(3, 3, dtype=t.int64)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("a,b", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)),
                                 ((2, 3, 3), (3, 4)), ((2, 3, 3), (4, 1, 3, 2)),
                                 ((3, 3), (2, 3, 1)), ((2, 3, 3), (3,))])
def test_solve(jg, torch, a, b, dtype):
    check_wc(jg, torch, jg.linalg.solve, torch.linalg.solve, [a, b], dtype)


def test_solve_right(jg, torch):
    check_wc(jg, torch, lambda A, B: jg.linalg.solve(A, B, left=False),
             lambda A, B: torch.linalg.solve(A, B, left=False), [(3, 3), (2, 3)])
    check_wc(jg, torch, lambda A, B: jg.linalg.solve(A, B, left=False),
             lambda A, B: torch.linalg.solve(A, B, left=False), [(2, 3, 3), (4, 3)])


def test_solve_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.solve(t.ones(2, 3), t.ones(2)))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.eye(3), t.ones(2)))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.eye(3), t.ones(2, 2)))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.tensor([[1., 2.], [2., 4.]]),
                                                    t.ones(2)))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.ones(3), t.ones(3)))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.eye(3).expand(2, 3, 3), t.ones(4, 3, 2)))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.eye(3), t.ones(3), left=False))
    raises_same(jg, torch, lambda t: t.linalg.solve(t.eye(3), t.ones(3, 3, dtype=t.float64)))


@pytest.mark.parametrize("n", [-1, -2, -3, -5])
def test_matrix_power_negative(jg, torch, n):
    check_wc(jg, torch, lambda a: jg.linalg.matrix_power(a, n),
             lambda a: torch.linalg.matrix_power(a, n), [(2, 3, 3)])


def test_matrix_power_negative_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.matrix_power(t.tensor([[1., 2.], [2., 4.]]), -1))
    raises_same(jg, torch, lambda t: t.linalg.matrix_power(t.ones(2, 2, dtype=t.int64), -1))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_training_step_equals_eager(jg, torch, backend):
    """A few SGD steps on W through inv, slogdet, det and solve: compiled
    (loss and gradient) == eager bitwise."""
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    L = jg.linalg
    for dtype in ("float64", "float32"):
        w0, _ = well_conditioned(jg, torch, (4, 4), dtype, 3)
        x, _ = pair(jg, torch, (5, 4), dtype, 4)

        def step(W, x):
            h = x @ L.inv(W)
            sign, logabs = L.slogdet(W)
            y = L.solve(W, x.transpose(0, 1))
            return (h * h).mean() - 0.1 * logabs + 0.01 * L.det(W) + y.abs().sum() * 0.1

        f = jg.compile(step, backend=backend, fullgraph=True)
        we = w0.detach().clone().requires_grad_()
        wc = w0.detach().clone().requires_grad_()
        for _ in range(3):
            le = step(we, x)
            (ge,) = jg.autograd.grad(le, [we])
            lc = f(wc, x)
            (gc,) = jg.autograd.grad(lc, [wc])
            assert vals(lc) == vals(le)
            assert vals(gc) == vals(ge)
            with jg.no_grad():
                we -= 0.05 * ge
                wc -= 0.05 * gc
        assert not math.isnan(vals(le)[0])


def spd(jg, torch, shape, dtype="float64", seed=0):
    """M M^T + n I for a random M: symmetric positive-definite."""
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(*shape, generator=g, dtype=torch.float64)
    a = (m @ m.transpose(-2, -1) + torch.eye(shape[-1], dtype=torch.float64) * shape[-1])
    t = a.to(getattr(torch, dtype)).requires_grad_()
    j = jg.tensor(t.tolist(), dtype=getattr(jg, dtype)).reshape(*shape).requires_grad_()
    return j, t


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 4), (2, 1, 5, 5)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(jg, torch, shape, dtype, upper):
    ja, ta = spd(jg, torch, shape, dtype)
    jl = jg.linalg.cholesky(ja, upper=upper)
    tl = torch.linalg.cholesky(ta, upper=upper)
    tol = 1e-12 if dtype == "float64" else 2e-5
    assert tuple(jl.shape) == tuple(tl.shape) and jl.dtype == getattr(jg, dtype)
    assert close(vals(jl), vals(tl), tol)
    w = [0.5 + 0.25 * i for i in range(tl.numel())]
    (jl * jg.tensor(w, dtype=jl.dtype).reshape(*jl.shape)).sum().backward()
    (tl * torch.tensor(w, dtype=tl.dtype).reshape(tl.shape)).sum().backward()
    assert close(vals(ja.grad), vals(ta.grad), tol * 10)


def test_cholesky_aliases_lower_triangle_and_double_backward(jg, torch):
    ja, ta = spd(jg, torch, (3, 3))
    # only the lower triangle is read
    ju = ja.detach() + jg.triu(jg.ones(3, 3, dtype=jg.float64), 1) * 7
    tu = ta.detach() + torch.triu(torch.ones(3, 3, dtype=torch.float64), 1) * 7
    assert close(vals(jg.linalg.cholesky(ju)), vals(torch.linalg.cholesky(tu)), 1e-12)
    assert close(vals(jg.cholesky(ja)), vals(torch.linalg.cholesky(ta)), 1e-12)
    assert close(vals(jg.cholesky(ja, upper=True)), vals(torch.linalg.cholesky(ta, upper=True)),
                 1e-12)
    assert close(vals(ja.cholesky()), vals(torch.linalg.cholesky(ta)), 1e-12)
    (jg1,) = jg.autograd.grad(jg.linalg.cholesky(ja).pow(2).sum(), [ja], create_graph=True)
    (tg1,) = torch.autograd.grad(torch.linalg.cholesky(ta).pow(2).sum(), [ta],
                                 create_graph=True)
    assert close(vals(jg1), vals(tg1), 1e-12)
    (jgg,) = jg.autograd.grad((jg1 * jg1).sum(), [ja])
    (tgg,) = torch.autograd.grad((tg1 * tg1).sum(), [ta])
    assert close(vals(jgg), vals(tgg), 1e-10)


def test_cholesky_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.cholesky(t.tensor([[1., 2.], [2., 1.]])))
    raises_same(jg, torch, lambda t: t.linalg.cholesky(t.tensor([[-1., 0.], [0., 1.]])))
    raises_same(jg, torch, lambda t: t.linalg.cholesky(
        t.tensor([[[1., 0.], [0., 1.]], [[1., 2.], [2., 1.]]])))
    raises_same(jg, torch, lambda t: t.linalg.cholesky(t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.cholesky(t.ones(3)))
    raises_same(jg, torch, lambda t: t.linalg.cholesky(t.ones(2, 2, dtype=t.int64)))
    raises_same(jg, torch, lambda t: t.cholesky(t.tensor([[1., 2.], [2., 1.]])))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_cholesky_step_equals_eager(jg, torch, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    for dtype in ("float64", "float32"):
        ja, _ = spd(jg, torch, (2, 4, 4), dtype, 5)

        def prog(a):
            L = jg.linalg.cholesky(a)
            U = jg.linalg.cholesky(a, upper=True)
            return jg.linalg.diagonal(L).log().sum() + (U * U).mean()

        want = prog(ja)
        (wg,) = jg.autograd.grad(want, [ja])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(ja)
        (gg,) = jg.autograd.grad(got, [ja])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
