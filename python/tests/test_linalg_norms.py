"""jitgrad.linalg's composites against PyTorch 1.13: vector_norm, matrix_norm,
norm (its dispatch), cross, vecdot, multi_dot, matrix_power (n >= 0) and
diagonal — values and gradients in float32 and float64, batches, keyword
arguments, errors (type and text), and compiled (interp, c) == eager
bitwise."""
import math

import pytest

INF = math.inf


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    return len(a) == len(b) and all(
        (x == y) or (math.isnan(x) and math.isnan(y)) or abs(x - y) <= tol * (1 + abs(y))
        for x, y in zip(a, b))


def pair(jg, torch, shape, dtype="float64", seed=0, scale=1.0):
    """The same random tensor (requiring grad) in both libraries."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(getattr(torch, dtype))
    tt = t.clone().requires_grad_()
    jt = jg.tensor(t.tolist(), dtype=getattr(jg, dtype)).reshape(*shape).requires_grad_()
    return jt, tt


TOL = {"float64": 1e-12, "float32": 2e-5}


def check(jg, torch, jfn, tfn, shapes, dtype="float64", seed=0, grad=True):
    """jfn(*jitgrad inputs) against tfn(*torch inputs): values, shape,
    dtype, and the gradients of a weighted sum."""
    ins = [pair(jg, torch, s, dtype, seed + k) for k, s in enumerate(shapes)]
    jy = jfn(*[a for a, _ in ins])
    ty = tfn(*[b for _, b in ins])
    assert tuple(jy.shape) == tuple(ty.shape)
    assert str(jy.dtype).split(".")[-1] == str(ty.dtype).split(".")[-1]
    assert close(vals(jy), vals(ty), TOL[dtype]), (vals(jy), vals(ty))
    if not grad:
        return
    n = ty.numel()
    w = [0.5 + 0.25 * i for i in range(n)]
    (jy * jg.tensor(w, dtype=jy.dtype).reshape(*jy.shape)).sum().backward()
    (ty * torch.tensor(w, dtype=ty.dtype).reshape(ty.shape)).sum().backward()
    for a, b in ins:
        assert close(vals(a.grad), vals(b.grad), TOL[dtype] * 10), (vals(a.grad), vals(b.grad))


def raises_same(jg, torch, fn, match_exact=True):
    """fn(lib) raises the same exception type with the same text in both."""
    with pytest.raises(Exception) as te:
        fn(torch)
    with pytest.raises(Exception) as je:
        fn(jg)
    assert type(je.value).__name__.lstrip("_") == type(te.value).__name__.lstrip("_")
    if match_exact:
        assert str(je.value) == str(te.value)


# ---- vector_norm ----

VORDS = [2, 1, INF, -INF, 0, 3, 0.5, -1, 1.5]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("ord", VORDS)
def test_vector_norm_all(jg, torch, ord, dtype):
    check(jg, torch, lambda x: jg.linalg.vector_norm(x, ord),
          lambda x: torch.linalg.vector_norm(x, ord), [(3, 4)], dtype, grad=ord != 0)


@pytest.mark.parametrize("ord", VORDS)
@pytest.mark.parametrize("dim,keepdim", [(1, False), (-1, True), ((0, 2), False),
                                         ((2, 0), True), (None, True)])
def test_vector_norm_dims(jg, torch, ord, dim, keepdim):
    check(jg, torch, lambda x: jg.linalg.vector_norm(x, ord=ord, dim=dim, keepdim=keepdim),
          lambda x: torch.linalg.vector_norm(x, ord=ord, dim=dim, keepdim=keepdim),
          [(2, 3, 4)], grad=ord != 0)


def test_vector_norm_dtype_and_defaults(jg, torch):
    check(jg, torch, lambda x: jg.linalg.vector_norm(x, dtype=jg.float64),
          lambda x: torch.linalg.vector_norm(x, dtype=torch.float64), [(5,)], "float32")
    check(jg, torch, lambda x: jg.linalg.vector_norm(x), lambda x: torch.linalg.vector_norm(x),
          [(2, 2, 3)])
    check(jg, torch, lambda x: jg.linalg.vector_norm(x[0, 0]),
          lambda x: torch.linalg.vector_norm(x[0, 0]), [(2, 2)])


@pytest.mark.parametrize("ord", [2, 1, 3, INF])
def test_vector_norm_zero_vector_gradient(jg, torch, ord):
    jx = jg.zeros(4, dtype=jg.float64, requires_grad=True)
    tx = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    jg.linalg.vector_norm(jx, ord).backward()
    torch.linalg.vector_norm(tx, ord).backward()
    assert vals(jx.grad) == vals(tx.grad)


def test_vector_norm_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(3, dtype=t.int64)))
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(3), dtype=t.int64))
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(3), ord="fro"))
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(3, 3), dim=2))
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(3, 3), dim=(0, 0)))
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(0, 3), ord=INF))
    raises_same(jg, torch, lambda t: t.linalg.vector_norm(t.ones(0, 3), ord=-1))


# ---- matrix_norm ----

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("ord", ["fro", 1, -1, INF, -INF])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((-1, -2), False), ((0, 2), True),
                                         ((2, 0), False), ((-2, -1), True)])
def test_matrix_norm(jg, torch, ord, dim, keepdim, dtype):
    check(jg, torch, lambda x: jg.linalg.matrix_norm(x, ord, dim, keepdim),
          lambda x: torch.linalg.matrix_norm(x, ord, dim, keepdim), [(3, 4, 5)], dtype)


def test_matrix_norm_default_and_dtype(jg, torch):
    check(jg, torch, lambda x: jg.linalg.matrix_norm(x), lambda x: torch.linalg.matrix_norm(x),
          [(2, 3)])
    check(jg, torch, lambda x: jg.linalg.matrix_norm(x, ord=1, dtype=jg.float64),
          lambda x: torch.linalg.matrix_norm(x, ord=1, dtype=torch.float64), [(2, 3)],
          "float32")


def test_matrix_norm_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3)))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), ord=3))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), ord="foo"))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), dim=(0,)))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), dim=(0, 1, 2)))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), dim=(-1, 1)))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), dim=(0, 2)))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3, dtype=t.int64)))
    raises_same(jg, torch, lambda t: t.linalg.matrix_norm(t.ones(3, 3), dtype=t.int64))


def test_matrix_norm_singular_value_orders_not_provided(jg):
    for ord in ("nuc", 2, -2):
        with pytest.raises(NotImplementedError):
            jg.linalg.matrix_norm(jg.ones(3, 3), ord)


# ---- norm ----

@pytest.mark.parametrize("shape,ord,dim", [
    ((5,), None, None), ((3, 4), None, None), ((2, 3, 4), None, None), ((5,), 1, None),
    ((5,), INF, None), ((3, 4), 1, None), ((3, 4), INF, None), ((3, 4), "fro", None),
    ((2, 3, 4), 3, 1), ((2, 3, 4), -INF, (0,)), ((2, 3, 4), 1, (0, 2)), ((2, 3, 4), None, (0, 2)),
    ((2, 3, 4), "fro", (2, 1)), ((3, 4), 0, 1),
])
def test_norm_dispatch(jg, torch, shape, ord, dim):
    for keepdim in (False, True):
        check(jg, torch, lambda x: jg.linalg.norm(x, ord, dim, keepdim),
              lambda x: torch.linalg.norm(x, ord, dim, keepdim), [shape], grad=ord != 0)


def test_norm_keywords(jg, torch):
    check(jg, torch, lambda x: jg.linalg.norm(x, ord=1, dim=-1, keepdim=True, dtype=jg.float64),
          lambda x: torch.linalg.norm(x, ord=1, dim=-1, keepdim=True, dtype=torch.float64),
          [(2, 3)], "float32")


def test_norm_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3, 3, 3), ord=2))
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3, 3, 3), ord="fro"))
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3, 3), ord="fro", dim=0))
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3), ord="fro"))
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3, 3), dim=(0, 1, 2)))
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3, 3), ord="fro", dim=(0, 1, 2)))
    raises_same(jg, torch, lambda t: t.linalg.norm(t.ones(3, 3), ord=3))


# ---- cross, vecdot ----

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cross(jg, torch, dtype):
    check(jg, torch, jg.linalg.cross, torch.linalg.cross, [(4, 3), (4, 3)], dtype)
    check(jg, torch, jg.linalg.cross, torch.linalg.cross, [(2, 1, 3), (1, 5, 3)], dtype)
    check(jg, torch, lambda a, b: jg.linalg.cross(a, b, dim=0),
          lambda a, b: torch.linalg.cross(a, b, dim=0), [(3, 2), (3, 1)], dtype)


def test_cross_int(jg, torch):
    a, b = [[1, 2, 3], [4, 5, 6]], [[7, -8, 9], [0, 1, 2]]
    j = jg.linalg.cross(jg.tensor(a), jg.tensor(b))
    t = torch.linalg.cross(torch.tensor(a), torch.tensor(b))
    assert vals(j) == vals(t) and j.dtype == jg.int64


def test_cross_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.cross(t.ones(3, 2), t.ones(3, 2)))
    raises_same(jg, torch, lambda t: t.linalg.cross(t.ones(3), t.ones(2, 3)))
    raises_same(jg, torch, lambda t: t.linalg.cross(t.ones(2, 3), t.ones(4, 3)))
    raises_same(jg, torch, lambda t: t.linalg.cross(t.ones(3, 3), t.ones(1, 3), dim=0))
    raises_same(jg, torch, lambda t: t.linalg.cross(t.ones(3, 4), t.ones(3, 4), dim=2))
    raises_same(jg, torch, lambda t: t.linalg.cross(t.ones(3, 3),
                                                    t.ones(3, 3, dtype=t.float64)))


def test_vecdot(jg, torch):
    check(jg, torch, jg.linalg.vecdot, torch.linalg.vecdot, [(4, 3), (3,)])
    check(jg, torch, lambda a, b: jg.linalg.vecdot(a, b, dim=0),
          lambda a, b: torch.linalg.vecdot(a, b, dim=0), [(4, 3), (4, 1)], "float32")


# ---- multi_dot ----

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shapes", [
    [(2, 3), (3, 4)], [(3,), (3, 4)], [(2, 3), (3,)], [(3,), (3,)],
    [(2, 3), (3, 4), (4, 5)], [(10, 2), (2, 9), (9, 3)], [(4,), (4, 5), (5, 2), (2, 6), (6,)],
    [(2, 8), (8, 1), (1, 7), (7, 3), (3, 9)],
])
def test_multi_dot(jg, torch, shapes, dtype):
    check(jg, torch, lambda *m: jg.linalg.multi_dot(list(m)),
          lambda *m: torch.linalg.multi_dot(list(m)), shapes, dtype)


def test_multi_dot_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([t.ones(2, 2)]))
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([]))
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([t.ones(2, 2, 2), t.ones(2, 2)]))
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([t.ones(2, 2), t.ones(2),
                                                         t.ones(2, 2)]))
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([t.ones(2, 3), t.ones(2, 2)]))
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([t.ones(2, 3), t.ones(3, 4),
                                                         t.ones(3)]))
    raises_same(jg, torch, lambda t: t.linalg.multi_dot([t.ones(2, 2),
                                                         t.ones(2, 2, dtype=t.float64)]))


# ---- matrix_power, diagonal ----

@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8])
def test_matrix_power(jg, torch, n, dtype):
    check(jg, torch, lambda a: jg.linalg.matrix_power(a, n),
          lambda a: torch.linalg.matrix_power(a, n), [(2, 3, 3)], dtype, grad=n > 0)


def test_matrix_power_zero_dtype_and_errors(jg, torch):
    j = jg.linalg.matrix_power(jg.ones(2, 2, dtype=jg.int64), 0)
    t = torch.linalg.matrix_power(torch.ones(2, 2, dtype=torch.int64), 0)
    assert vals(j) == vals(t) and j.dtype == jg.int64
    raises_same(jg, torch, lambda t: t.linalg.matrix_power(t.ones(2, 3), 2))
    raises_same(jg, torch, lambda t: t.linalg.matrix_power(t.ones(3), 2))
    raises_same(jg, torch, lambda t: t.linalg.matrix_power(t.ones(2, 2), 2.0))


@pytest.mark.parametrize("kw", [{}, {"offset": 1}, {"offset": -1}, {"offset": 3},
                                {"dim1": 0, "dim2": 2}, {"dim1": 2, "dim2": 0, "offset": 1},
                                {"offset": -2, "dim1": -1, "dim2": 1}])
def test_diagonal(jg, torch, kw):
    check(jg, torch, lambda a: jg.linalg.diagonal(a, **kw),
          lambda a: torch.linalg.diagonal(a, **kw), [(2, 3, 4)])


def test_diagonal_errors(jg, torch):
    raises_same(jg, torch, lambda t: t.linalg.diagonal(t.ones(3)))
    raises_same(jg, torch, lambda t: t.linalg.diagonal(t.ones(2, 3, 4), dim1=0, dim2=0))


# ---- compiled == eager ----

@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, torch, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    L = jg.linalg
    for dtype in ("float32", "float64"):
        x, _ = pair(jg, torch, (2, 3, 3), dtype, 1)
        v, _ = pair(jg, torch, (2, 3, 3), dtype, 2)

        def prog(x, v):
            out = L.vector_norm(x) + L.vector_norm(x, 1, dim=-1).sum()
            out = out + L.vector_norm(x, INF, dim=(0, 2)).sum() + L.vector_norm(x, 3).sum()
            out = out + L.vector_norm(x, -INF) + L.vector_norm(x, 0.5, dim=1).sum()
            for ord in ("fro", 1, -1, INF, -INF):
                out = out + L.matrix_norm(x, ord).sum()
            out = out + L.norm(x) + L.norm(x[0], 1) + L.norm(x, 2, dim=(0,)).sum()
            out = out + L.cross(x, v).sum() + L.vecdot(x, v).sum()
            out = out + L.multi_dot([x[0], v[1], x[1], v[0][0]]).sum()
            out = out + L.matrix_power(x, 5).sum() + L.diagonal(x, offset=1).sum()
            return out * out

        want = prog(x, v)
        wg = jg.autograd.grad(want, [x, v])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(x, v)
        gg = jg.autograd.grad(got, [x, v])
        assert vals(got) == vals(want)
        for a, b in zip(gg, wg):
            assert vals(a) == vals(b)
