"""Shape, indexing and creation ops (issue 11, part OPS-SHAPE) against
PyTorch 1.13: values, gradients, errors, and compiled == eager bitwise."""
import numpy as np
import pytest

import jitgrad as jg

torch = pytest.importorskip("torch")

BACKENDS = ["interp"] + (["c"] if jg.HAS_COMPILER else [])


def data(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def pair(a, rg=True):
    return jg.tensor(a, requires_grad=rg), torch.tensor(a, requires_grad=rg)


def same(j, t, exact=True):
    jn, tn = j.detach().numpy(), t.detach().numpy()
    assert jn.shape == tn.shape, (jn.shape, tn.shape)
    assert jn.dtype == tn.dtype, (jn.dtype, tn.dtype)
    if exact:
        assert np.array_equal(jn, tn), (jn, tn)
    else:
        np.testing.assert_allclose(jn, tn, rtol=1e-5, atol=1e-6)


def to_torch_key(key):
    if isinstance(key, tuple):
        return tuple(to_torch_key(k) for k in key)
    if isinstance(key, jg.Tensor):
        return torch.tensor(key.numpy())
    return key


def raises_like(jfn, tfn):
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(type(te.value)) as je:
        jfn()
    assert str(je.value).split("\n")[0] == str(te.value).split("\n")[0]


# ---------------------------------------------------------------- reading

READ_KEYS = [
    (slice(None), [-1], slice(None)),
    ([0, 1],),
    [1, 0, 1],
    (slice(None), slice(None), slice(0, None, 2)),
    (slice(None), slice(1, None, 2), slice(None, None, 3)),
    (0, slice(None), [1, 3]),
    ([1, 0], [2, 0]),
    ([0, 1], slice(None), [1, 3]),
    (Ellipsis, [0, 0, 3]),
    (None, [1], 1),
    "long_tensor_2d",
    "mask_1d",
    "mask_2d",
    "mask_in_middle",
]


def make_key(k, x):
    if k == "long_tensor_2d":
        return jg.tensor([[0, 1], [1, -1]])
    if k == "mask_1d":
        return jg.tensor(x[:, 0, 0] > 0)
    if k == "mask_2d":
        return jg.tensor(x[:, :, 0] > 0)
    if k == "mask_in_middle":
        return (slice(None), jg.tensor([True, False, True]))
    return k


@pytest.mark.parametrize("k", READ_KEYS, ids=str)
def test_index_read_matches_torch(k):
    x = data(2, 3, 4)
    a, t = pair(x)
    key = make_key(k, x)
    ja, tt = a[key], t[to_torch_key(key)]
    same(ja, tt)
    g = data(*tt.shape, seed=1)
    ja.backward(jg.tensor(g))
    tt.backward(torch.tensor(g))
    same(a.grad, t.grad)


def test_stepped_slice_is_a_view_like_torch():
    x = data(6, 5)
    a, t = jg.tensor(x), torch.tensor(x)
    va, vt = a[1::2, ::3], t[1::2, ::3]
    assert va.stride() == vt.stride() and va.storage_offset() == vt.storage_offset()
    va.mul_(10)
    vt.mul_(10)
    same(a, t)


def test_stepped_slice_view_write_gradients():
    x = data(4, 6)
    a, t = pair(x)
    ba, bt = a * 1, t * 1
    va, vt = ba[:, 1::2], bt[:, 1::2]
    va.mul_(3)
    vt.mul_(3)
    (ba * ba).sum().backward()
    (bt * bt).sum().backward()
    same(a.grad, t.grad)


# ---------------------------------------------------------------- writing

WRITE_CASES = [
    ((slice(None), slice(0, None, 2)), "scalar"),
    ((slice(None), slice(0, None, 2)), "tensor"),
    (([0, 1],), "scalar"),
    (([0, 1],), "tensor"),
    (([1, 1],), "tensor"),  # repeated index: the last write wins
    ((slice(None), [-1], slice(None)), "tensor"),
    ((slice(None), [-1], slice(None)), "broadcast"),
    ("mask_2d", "scalar"),
    ("mask_2d", "tensor"),
    ("mask_1d", "broadcast"),
    (([1, 0], [2, 0]), "tensor"),
]


@pytest.mark.parametrize("k,kind", WRITE_CASES, ids=str)
def test_index_write_matches_torch(k, kind):
    x = data(2, 3, 4)
    key = make_key(k, x)
    tkey = to_torch_key(key)
    a, t = pair(x)
    ba, bt = a * 2, t * 2
    shape = bt[tkey].shape
    if kind == "scalar":
        ba[key] = 7.5
        bt[tkey] = 7.5
    else:
        vs = data(*(shape[-1:] if kind == "broadcast" else shape), seed=2)
        va, vt = pair(vs)
        ba[key] = va
        bt[tkey] = vt
    same(ba, bt)
    (ba * ba).sum().backward()
    (bt * bt).sum().backward()
    same(a.grad, t.grad)
    if kind != "scalar":
        same(va.grad, vt.grad)


def test_positional_encoding_writes():
    pe, tp = jg.zeros(5, 6), torch.zeros(5, 6)
    v = data(5, 3)
    pe[:, 0::2] = jg.tensor(v)
    tp[:, 0::2] = torch.tensor(v)
    pe[:, 1::2] = jg.tensor(v) * 2
    tp[:, 1::2] = torch.tensor(v) * 2
    same(pe, tp)


def test_write_into_leaf_refused_and_state_kept():
    a = jg.tensor(data(3), requires_grad=True)
    before = a.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        a[[0]] = 1.0
    assert np.array_equal(a.detach().numpy(), before)


INDEX_ERRORS = [
    lambda T, x: x[:, [3]],
    lambda T, x: x[[-3]],
    lambda T, x: x[T.zeros(3, dtype=T.bool)],
    lambda T, x: x[:, ::-1],
    lambda T, x: x[T.tensor([0.5])],
    lambda T, x: x[[0, 1], [0, 1, 2]],
]


@pytest.mark.parametrize("i", range(len(INDEX_ERRORS)))
def test_index_errors_like_torch(i):
    f = INDEX_ERRORS[i]
    raises_like(lambda: f(jg, jg.zeros(2, 3)), lambda: f(torch, torch.zeros(2, 3)))


def test_index_write_errors_like_torch():
    def shape_mismatch(T):
        y = T.zeros(3)
        y[[0, 1]] = T.ones(3)

    def dtype_mismatch(T):
        y = T.zeros(3)
        y[[0, 1]] = T.ones(2, dtype=T.float64)

    for f in (shape_mismatch, dtype_mismatch):
        raises_like(lambda: f(jg), lambda: f(torch))


def test_failed_write_keeps_state():
    y = jg.tensor([1.0, 2.0, 3.0])
    with pytest.raises(IndexError):
        y[[0, 5]] = 9.0
    assert y.tolist() == [1.0, 2.0, 3.0]


# ------------------------------------------------------- cat, stack, split


def test_cat_stack_values_and_grads():
    x, y = data(2, 3), data(2, 5, seed=1)
    (a, t), (b, u) = pair(x), pair(y)
    for jr, tr in [(jg.cat([a, b, a], 1), torch.cat([t, u, t], 1)),
                   (jg.cat([a, a], -2), torch.cat([t, t], -2)),
                   (jg.stack([a, a * 2], 1), torch.stack([t, t * 2], 1)),
                   (jg.stack([a, a], -1), torch.stack([t, t], -1)),
                   (jg.concat((a,), 0), torch.concat((t,), 0))]:
        same(jr, tr)
        g = data(*tr.shape, seed=3)
        jr.backward(jg.tensor(g))
        tr.backward(torch.tensor(g))
        same(a.grad, t.grad)
        if b.grad is not None:
            same(b.grad, u.grad)
        a.grad = t.grad = b.grad = u.grad = None


def test_cat_promotes_dtypes():
    r = jg.cat([jg.tensor([1, 2]), jg.tensor([0.5])])
    assert r.dtype == jg.float32 and r.tolist() == [1.0, 2.0, 0.5]


CAT_ERRORS = [
    lambda T: T.cat([T.zeros(2, 3), T.zeros(3, 3)], 1),
    lambda T: T.cat([T.zeros(2, 3), T.zeros(3)], 1),
    lambda T: T.cat([], 0),
    lambda T: T.cat([T.zeros(2, 3)], 2),
    lambda T: T.cat([T.tensor(1.0), T.zeros(2)]),
    lambda T: T.stack([T.zeros(2, 3), T.zeros(3, 3)]),
    lambda T: T.stack([]),
    lambda T: T.zeros(2, 3).narrow(1, 2, 2),
    lambda T: T.zeros(2, 3).narrow(1, -4, 1),
    lambda T: T.zeros(2, 3).narrow(1, 0, -1),
    lambda T: T.zeros(2, 3).split([1, 1], 1),
    lambda T: T.zeros(2, 3).chunk(0),
    lambda T: T.zeros(3).tril(),
]


@pytest.mark.parametrize("i", range(len(CAT_ERRORS)))
def test_shape_errors_like_torch(i):
    raises_like(lambda: CAT_ERRORS[i](jg), lambda: CAT_ERRORS[i](torch))


@pytest.mark.parametrize("n,parts,dim", [(5, 2, 0), (6, 3, 0), (7, [2, 0, 5], 0), (4, 4, 1)])
def test_split_chunk_narrow_are_views(n, parts, dim):
    x = data(n, n)
    a, t = jg.tensor(x), torch.tensor(x)
    js, ts = a.split(parts, dim), t.split(parts, dim)
    assert len(js) == len(ts)
    for j, u in zip(js, ts):
        same(j, u)
        assert j._same_storage(a)
    if isinstance(parts, int):
        jc, tc = jg.chunk(a, parts, dim), torch.chunk(t, parts, dim)
        assert [tuple(c.shape) for c in jc] == [tuple(c.shape) for c in tc]
    same(a.narrow(dim, 1, 2), t.narrow(dim, 1, 2))
    same(a.narrow(dim, -2, 2), t.narrow(dim, -2, 2))


def test_chunk_of_empty_dim():
    assert [tuple(c.shape) for c in jg.zeros(0).chunk(2)] == [(0,), (0,)]


def test_split_gradients():
    a, t = pair(data(5, 2))
    ja, jb = a.split(3)
    ta, tb = t.split(3)
    (ja.sum() * 2 + (jb * jb).sum()).backward()
    (ta.sum() * 2 + (tb * tb).sum()).backward()
    same(a.grad, t.grad)


# ------------------------------------------------------------- tril, triu


@pytest.mark.parametrize("k", [-2, -1, 0, 1, 3])
def test_tril_triu(k):
    x = data(2, 3, 4)
    a, t = pair(x)
    for jr, tr in [(a.tril(k), t.tril(k)), (jg.triu(a, k), torch.triu(t, k)),
                   (jg.tril(a, diagonal=k), torch.tril(t, diagonal=k))]:
        same(jr, tr)
        g = data(*tr.shape, seed=5)
        jr.backward(jg.tensor(g))
        tr.backward(torch.tensor(g))
        same(a.grad, t.grad)
        a.grad = t.grad = None


def test_tril_other_dtypes():
    for T in (np.int64, np.bool_):
        x = (data(3, 3) > 0).astype(T)
        same(jg.tensor(x).tril(), torch.tensor(x).tril())
        same(jg.tensor(x).triu(1), torch.tensor(x).triu(1))


# ------------------------------------------------------------ index_select


def test_index_select():
    a, t = pair(data(3, 4))
    for dim, idx in [(0, [2, 0, 2]), (1, [3]), (-1, [])]:
        jr = a.index_select(dim, jg.tensor(idx, dtype=jg.int64))
        tr = t.index_select(dim, torch.tensor(idx, dtype=torch.int64))
        same(jr, tr)
        g = data(*tr.shape, seed=4)
        jr.backward(jg.tensor(g))
        tr.backward(torch.tensor(g))
        same(a.grad, t.grad)
        a.grad = t.grad = None
    same(jg.index_select(a, 0, jg.tensor(1)), torch.index_select(t, 0, torch.tensor(1)))


def test_index_select_errors_like_torch():
    for f in [lambda T: T.zeros(2, 3).index_select(1, T.tensor([3])),
              lambda T: T.zeros(2, 3).index_select(1, T.tensor([-1])),
              lambda T: T.zeros(2, 3).index_select(1, T.tensor([[0]])),
              lambda T: T.zeros(2, 3).index_select(1, T.tensor([0.0]))]:
        raises_like(lambda: f(jg), lambda: f(torch))


# ------------------------------------------------------- double backward


def test_double_backward_through_cat_index_tril():
    x = data(3, 3, dtype=np.float64)
    outs = []
    for T in (jg, torch):
        a = T.tensor(x, requires_grad=True)
        y = T.cat([a * a, a[[2, 0]]], 0).tril()
        (g,) = T.autograd.grad((y * y).sum(), a, create_graph=True)
        (gg,) = T.autograd.grad((g * g).sum(), a)
        outs.append((g.detach().numpy(), gg.numpy()))
    for u, v in zip(*outs):
        np.testing.assert_allclose(u, v, rtol=1e-12)


# -------------------------------------------------------------- creation


def test_eye():
    for args in [(3,), (2, 4), (4, 2), (0,)]:
        same(jg.eye(*args), torch.eye(*args))
    same(jg.eye(2, 3, dtype=jg.bool), torch.eye(2, 3, dtype=torch.bool))
    same(jg.eye(2, dtype=jg.int64), torch.eye(2, dtype=torch.int64))
    assert jg.eye(2, requires_grad=True).requires_grad
    raises_like(lambda: jg.eye(-1), lambda: torch.eye(-1))


@pytest.mark.parametrize("a,b,n", [(0, 1, 5), (-3, 7.3, 11), (2, -2, 4), (1, 1, 1), (0, 5, 0)])
def test_linspace(a, b, n):
    same(jg.linspace(a, b, n), torch.linspace(a, b, n))
    same(jg.linspace(a, b, n, dtype=jg.float64), torch.linspace(a, b, n, dtype=torch.float64))
    same(jg.linspace(a, b * 10, n, dtype=jg.int64),
         torch.linspace(a, b * 10, n, dtype=torch.int64))


def test_linspace_bitwise_many():
    rng = np.random.default_rng(7)
    for _ in range(100):
        a, b = (float(v) for v in rng.uniform(-100, 100, 2))
        n = int(rng.integers(0, 70))
        for jd, td in [(jg.float32, torch.float32), (jg.float64, torch.float64),
                       (jg.int64, torch.int64)]:
            same(jg.linspace(a, b, n, dtype=jd), torch.linspace(a, b, n, dtype=td))


def test_arange_float():
    for args in [(0, 1, 0.1), (5.0,), (-1, 2.5, 0.5), (0.0, 1.0, 0.3)]:
        same(jg.arange(*args), torch.arange(*args))
        same(jg.arange(*args, dtype=jg.float64), torch.arange(*args, dtype=torch.float64))


def test_random_integers():
    jg.manual_seed(3)
    r = jg.randint(2, 9, (1000,))
    assert r.dtype == jg.int64 and r.shape == (1000,)
    v = r.tolist()
    assert min(v) == 2 and max(v) == 8
    jg.manual_seed(3)
    assert jg.randint(2, 9, (1000,)).tolist() == v
    assert jg.randint(5, size=(2, 3)).shape == (2, 3)
    p = jg.randperm(50)
    assert sorted(p.tolist()) == list(range(50)) and p.dtype == jg.int64
    assert jg.randperm(4, dtype=jg.float32).dtype == jg.float32
    raises_like(lambda: jg.randint(5, 5, (2,)), lambda: torch.randint(5, 5, (2,)))
    raises_like(lambda: jg.randperm(-1), lambda: torch.randperm(-1))


def test_multinomial():
    jg.manual_seed(0)
    w = jg.tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
    s = w.multinomial(200, replacement=True)
    assert s.shape == (2, 200) and s.dtype == jg.int64
    assert set(s[0].tolist()) == {1, 2} and set(s[1].tolist()) == {0}
    c = s[0].tolist().count(2)
    assert 110 < c < 190  # about 3/4 of 200
    d = jg.multinomial(jg.tensor([0.1, 0.5, 0.4]), 3)
    assert sorted(d.tolist()) == [0, 1, 2]
    for f in [lambda T: T.tensor([0.0, 0.0]).multinomial(1),
              lambda T: T.tensor([-1.0, 2.0]).multinomial(1),
              lambda T: T.tensor([1.0, 2.0]).multinomial(3),
              lambda T: T.tensor([1, 2]).multinomial(1)]:
        raises_like(lambda: f(jg), lambda: f(torch))


def test_random_ops_break_the_graph():
    def f(x):
        return x + jg.randint(0, 3, (2,)).float()

    cf = jg.compile(f, backend="interp")
    jg.manual_seed(1)
    r1 = cf(jg.zeros(2))
    jg.manual_seed(1)
    assert r1.tolist() == f(jg.zeros(2)).tolist()
    with pytest.raises(Exception, match="random"):
        jg.compile(f, backend="interp", fullgraph=True)(jg.zeros(2))


def test_new_and_type():
    a, t = jg.tensor(data(2, 3)), torch.tensor(data(2, 3))
    same(a.new_zeros(2, 3), t.new_zeros(2, 3))
    same(a.new_ones((4,)), t.new_ones((4,)))
    same(a.new_full((2,), 3.5), t.new_full((2,), 3.5))
    same(a.new_zeros(3, dtype=jg.int64), t.new_zeros(3, dtype=torch.int64))
    same(a.new_tensor([1, 2]), t.new_tensor([1, 2]))
    assert a.new_ones(2, requires_grad=True).requires_grad
    assert a.type() == t.type() == "torch.FloatTensor"
    assert jg.zeros(2, dtype=jg.bool).type() == "torch.BoolTensor"
    same(a.type(jg.float64), t.type(torch.float64))
    same(a.type("torch.LongTensor"), t.type("torch.LongTensor"))
    assert a.type(jg.float32) is a


# --------------------------------------------------- compiled == eager


def program(x, y, idx):
    a = jg.cat([x, y * 2], 1)
    b = jg.stack([x, y], 0).sum(0)
    c = jg.tril(a[:, ::2]) + 1
    d = x[:, [-1, 0]] * 3
    e = x[idx]
    z = x * 1.0
    z[:, 1::2] = y[:, :2] * 5
    z[idx] = 0.5
    z[[0], [1]] = y[0, 0]
    w = x.index_select(1, idx)
    s1, s2 = x.split([1, 3], 1)
    f = x.narrow(1, 1, 2)
    g = jg.triu(x, -1)[idx, 1:]
    return (a.sum() + b.sum() + c.sum() + d.sum() + (e * e).sum() + (z * z).sum() + w.sum()
            + s1.sum() + (s2 * f.sum()).sum() + g.sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_equals_eager_bitwise(backend):
    xs, ys = data(3, 4), data(3, 4, seed=1)
    idx = jg.tensor([2, 0])

    def run(fn):
        x, y = jg.tensor(xs, requires_grad=True), jg.tensor(ys, requires_grad=True)
        out = fn(x, y, idx)
        out.backward()
        return [out.detach().numpy(), x.grad.numpy(), y.grad.numpy()]

    ref = run(program)
    cf = jg.compile(program, backend=backend, fullgraph=True)
    for _ in range(2):
        got = run(cf)
        for u, v in zip(ref, got):
            assert u.tobytes() == v.tobytes()
    assert cf._jitgrad_compiled.fallbacks() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_index_out_of_range_fails_like_eager(backend):
    def f(x, idx):
        return x[idx] * 2

    cf = jg.compile(f, backend=backend)
    x = jg.tensor([1.0, 2.0, 3.0])
    assert cf(x, jg.tensor([2, -1])).tolist() == [6.0, 6.0]
    with pytest.raises(IndexError, match="out of bounds"):
        cf(x, jg.tensor([0, 3]))


# ------------------------------------------------------------ edge cases


def _w_transpose(T, a):
    b = a.t()
    b[[0]] = 5.0
    return a


def _w_mask_tensor(T, a):
    a[a > 5] = T.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    return a


def _w_broadcast(T, a):
    a[:, [1, 2]] = T.tensor([[9.0], [8.0], [7.0]])
    return a


def _w_value_grad(T, a):
    v = T.ones(2, requires_grad=True)
    a[[0, 1], [0, 0]] = v
    a.sum().backward()
    return v.grad


def _w_augmented(T, a):
    a[[-1]] += 1
    return a


def _w_stepped(T, a):
    a[::2, ::3] = 1
    return a


EDGE = {
    "empty list": lambda T, a: a[[]],
    "empty tensor": lambda T, a: a[T.tensor([], dtype=T.int64)],
    "mask all false": lambda T, a: a[a > 100],
    "int32 index refused": lambda T, a: a[T.tensor([0, 2], dtype=T.int32)],
    "strided index": lambda T, a: a[T.tensor([[0, 1, 2, 0]]).t()[1:]],
    "None then list": lambda T, a: a[None, [0]],
    "ellipsis mask": lambda T, a: a[..., a[0] > 1],
    "int then list": lambda T, a: a[1, [0, 0]],
    "bool list": lambda T, a: a[[True, False, True]],
    "nested list is a tuple": lambda T, a: a[[[0, 1], [1, 2]]],
    "tuple in tuple": lambda T, a: a[(0, 1), ],
    "write through transpose": _w_transpose,
    "mask write tensor": _w_mask_tensor,
    "broadcast write": _w_broadcast,
    "value grad into plain tensor": _w_value_grad,
    "augmented assign": _w_augmented,
    "stepped write both dims": _w_stepped,
    "numpy int array": lambda T, a: a[np.array([2, 0])],
    "numpy bool array": lambda T, a: a[:, np.array([True, False, True, True])],
    "numpy scalar": lambda T, a: a[np.int64(1)],
}


@pytest.mark.parametrize("name", list(EDGE))
def test_index_edge_cases_like_torch(name):
    f = EDGE[name]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    try:
        tr = f(torch, torch.tensor(x))
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e), match=None) as je:
            f(jg, jg.tensor(x))
        assert str(je.value).split("\n")[0] == str(e).split("\n")[0]
        return
    same(f(jg, jg.tensor(x)), tr)


def test_cat_many_pieces_with_and_without_grad():
    xs = [data(2, k + 1, 3, seed=k) for k in range(7)]
    ja = [jg.tensor(x, requires_grad=True) for x in xs]
    ta = [torch.tensor(x, requires_grad=True) for x in xs]
    jr, tr = jg.cat(ja, 1), torch.cat(ta, 1)
    same(jr, tr)
    g = data(*tr.shape, seed=9)
    jr.backward(jg.tensor(g))
    tr.backward(torch.tensor(g))
    for p, q in zip(ja, ta):
        same(p.grad, q.grad)
    with jg.no_grad():
        same(jg.cat(ja, 1), tr)
    same(jg.cat([jg.tensor(x) for x in xs], -2), tr)


def test_nonzero():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]], dtype=np.float32)
    same(jg.tensor(x).nonzero(), torch.tensor(x).nonzero())
    same(jg.nonzero(jg.tensor(x > 0)), torch.nonzero(torch.tensor(x > 0)))
    for j, t in zip(jg.nonzero(jg.tensor(x), as_tuple=True),
                    torch.nonzero(torch.tensor(x), as_tuple=True)):
        same(j, t)
    same(jg.zeros(0, 3).nonzero(), torch.zeros(0, 3).nonzero())


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_index_writes_into_an_input(backend):
    def f(x, v, idx):
        x[idx] = v
        x[:, ::2] = 0.0
        return x * 2

    cf = jg.compile(f, backend=backend, fullgraph=True)
    for _ in range(2):
        xa, xb = jg.ones(3, 4), jg.ones(3, 4)
        v = jg.tensor([5.0, 6.0, 7.0, 8.0])
        ra, rb = f(xa, v, jg.tensor([1])), cf(xb, v, jg.tensor([1]))
        assert ra.numpy().tobytes() == rb.numpy().tobytes()
        assert xa.numpy().tobytes() == xb.numpy().tobytes()
    assert cf._jitgrad_compiled.fallbacks() == 0


def test_cat_argument_errors_like_torch():
    for f in [lambda T: T.cat(T.zeros(2)), lambda T: T.stack([1, 2])]:
        raises_like(lambda: f(jg), lambda: f(torch))


def test_hstack_vstack():
    x = data(2, 3)
    a, t = jg.tensor(x), torch.tensor(x)
    same(jg.hstack([a, a]), torch.hstack([t, t]))
    same(jg.vstack([a[0], a[1]]), torch.vstack([t[0], t[1]]))
    same(jg.hstack([a[0], a[1]]), torch.hstack([t[0], t[1]]))


def test_index_write_without_history_in_place_like_torch():
    def run(T):
        x = T.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2))
        y = T.zeros(4)
        y[[0, 2]] = 1.0
        w = T.zeros(2, 3, requires_grad=True)
        with T.no_grad():
            w[:, [0]] = 5.0
        return x, y, w

    (jx, jy, jw), (tx, ty, tw) = run(jg), run(torch)
    same(jy, ty)
    assert jy._version == ty._version
    same(jw, tw)
    assert jw.requires_grad and jw.grad_fn is None

    def overlap(T):
        x = T.tensor(np.arange(6.0, dtype=np.float32).reshape(3, 2))
        x[[1, 0]] = x[0:2]

    raises_like(lambda: overlap(jg), lambda: overlap(torch))


def test_unbind():
    a, t = pair(data(2, 3))
    ja, ta = a.unbind(1), t.unbind(1)
    assert len(ja) == len(ta) == 3
    for j, u in zip(ja, ta):
        same(j, u)
    (ja[0] * 2 + ja[2]).sum().backward()
    (ta[0] * 2 + ta[2]).sum().backward()
    same(a.grad, t.grad)
    raises_like(lambda: jg.unbind(jg.zeros(2), 1), lambda: torch.unbind(torch.zeros(2), 1))
