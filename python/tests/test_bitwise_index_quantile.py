"""NumPy interop (__array__, __array_priority__), __contains__, mT, the
bitwise and shift ops (functions, methods, in-place forms, operators) and
quantile / nanquantile against PyTorch 1.13: values, dtypes, gradients,
errors, and compiled (interp, c) == eager bitwise."""
import numpy as np
import pytest


def vals(t):
    return t.detach().reshape(-1).tolist()


def same(j, t):
    assert str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (j.dtype, t.dtype)
    assert tuple(j.shape) == tuple(t.shape), (j.shape, t.shape)
    a, b = vals(j), vals(t)
    assert all(x == y or (x != x and y != y) for x, y in zip(a, b)) and len(a) == len(b), (a, b)


def raises_like(jf, tf, exc=None):
    """Both raise the same exception type with the same message."""
    with pytest.raises(Exception) as te:
        tf()
    with pytest.raises(type(te.value) if exc is None else exc) as je:
        jf()
    if exc is None:
        assert str(je.value) == str(te.value)


# ---- NumPy interop and protocol methods ----

def test_array_protocol(jg, torch):
    x = jg.tensor([[1.0, 2.5], [3.0, -4.0]])
    a = np.asarray(x)
    assert a.dtype == np.float32 and a.tolist() == [[1.0, 2.5], [3.0, -4.0]]
    b = np.array(x, dtype=np.float64)
    assert b.dtype == np.float64 and b.tolist() == a.tolist()
    assert np.asarray(jg.tensor([1, 2])).dtype == np.int64
    assert np.asarray(jg.tensor(True)).shape == ()
    assert jg.Tensor.__array_priority__ == torch.Tensor.__array_priority__
    # numpy scalars / arrays on the left defer to the tensor's operators
    r = np.float64(2.0) * x
    assert isinstance(r, jg.Tensor)
    g = jg.tensor([1.0], requires_grad=True)
    tg = torch.tensor([1.0], requires_grad=True)
    raises_like(lambda: np.asarray(g), lambda: np.asarray(tg))
    assert np.asarray(g.detach()).tolist() == [1.0]


def test_contains(jg, torch):
    for T in (jg, torch):
        x = T.arange(6).reshape(2, 3)
        assert (2 in x, 7 in x, T.tensor(2) in x, 2.0 in x, 2.5 in x) == (
            True, False, True, True, False)
        assert (T.tensor([9, 9, 5]) in x) is True
    raises_like(lambda: "a" in jg.arange(3), lambda: "a" in torch.arange(3))
    raises_like(lambda: jg.tensor([1, 2]) in jg.arange(6).reshape(2, 3),
                lambda: torch.tensor([1, 2]) in torch.arange(6).reshape(2, 3), RuntimeError)


def test_mT(jg, torch):
    for shape in [(2, 3), (4, 2, 3), (2, 1, 3, 5), ()]:
        n = int(np.prod(shape))
        same(jg.arange(n).reshape(shape).mT, torch.arange(n).reshape(shape).mT)
    raises_like(lambda: jg.arange(3).mT, lambda: torch.arange(3).mT)
    x = jg.arange(6.0).reshape(2, 3).requires_grad_()
    tx = torch.arange(6.0).reshape(2, 3).requires_grad_()
    (x.mT * jg.arange(6.0).reshape(3, 2)).sum().backward()
    (tx.mT * torch.arange(6.0).reshape(3, 2)).sum().backward()
    same(x.grad, tx.grad)
    v = x.detach().mT
    v[0, 1] = 100.0  # a view
    assert x[1, 0].item() == 100.0


# ---- bitwise and shift ops ----

BIN = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"]
A = [5, -3, 12, 0, -128, 2**40 + 7, -1]
B = [3, 1, 2, 7, 3, 5, 0]


A32 = [x if abs(x) < 2**31 else 77 for x in A]


def _pair(T, da, db):
    a = [x > 0 for x in A] if da == "bool" else A32 if da == "int32" else A
    b = [x > 1 for x in B] if db == "bool" else B
    return T.tensor(a, dtype=getattr(T, da)), T.tensor(b, dtype=getattr(T, db))


@pytest.mark.parametrize("name", BIN)
@pytest.mark.parametrize("da,db", [("int64", "int64"), ("int32", "int32"), ("int32", "int64"),
                                   ("int64", "int32"), ("bool", "bool"), ("bool", "int64"),
                                   ("int32", "bool")])
def test_bitwise_values_dtypes(jg, torch, name, da, db):
    (ja, jb), (ta, tb) = _pair(jg, da, db), _pair(torch, da, db)
    tf, jf = getattr(torch, name), getattr(jg, name)
    if "shift" in name and da == db == "bool":
        raises_like(lambda: jf(ja, jb), lambda: tf(ta, tb))
        return
    same(jf(ja, jb), tf(ta, tb))
    same(getattr(ja, name)(jb), getattr(ta, name)(tb))
    for s in (3, True):  # Python numbers on either side
        for x, y, tx, ty in ((ja, s, ta, s), (s, jb, s, tb)):
            if "shift" in name and isinstance(s, bool) and "bool" in (da if x is ja else db):
                raises_like(lambda: jf(x, y), lambda: tf(tx, ty))
            else:
                same(jf(x, y), tf(tx, ty))
    same(jf(ja, jb[:1].reshape(())), tf(ta, tb[:1].reshape(())))  # 0-d operand
    same(jf(ja.reshape(7, 1), jb), tf(ta.reshape(7, 1), tb))  # broadcast


@pytest.mark.parametrize("name", BIN + ["bitwise_not"])
def test_bitwise_refuses_floats(jg, torch, name):
    jf, tf = getattr(jg, name), getattr(torch, name)
    if name == "bitwise_not":
        raises_like(lambda: jf(jg.tensor([1.0])), lambda: tf(torch.tensor([1.0])))
        raises_like(lambda: jf(jg.tensor([1.0], dtype=jg.float64)),
                    lambda: tf(torch.tensor([1.0], dtype=torch.float64)))
        return
    cases = [lambda T: (T.tensor([1.0, 2.0]), T.tensor([1, 2])),
             lambda T: (T.tensor([1, 2]), 1.5),
             lambda T: (T.tensor([True]), T.tensor([1.5], dtype=T.float64)),
             lambda T: (T.tensor([1, 2]), T.tensor(1.5))]
    for c in cases:
        raises_like(lambda: jf(*c(jg)), lambda: tf(*c(torch)))
    raises_like(lambda: jf(jg.tensor([1]), None), lambda: tf(torch.tensor([1]), None), TypeError)


def test_bitwise_not(jg, torch):
    for d in ("int64", "int32", "bool"):
        v = [x > 0 for x in A] if d == "bool" else [x % 2**31 for x in A]
        j, t = jg.tensor(v, dtype=getattr(jg, d)), torch.tensor(v, dtype=getattr(torch, d))
        same(jg.bitwise_not(j), torch.bitwise_not(t))
        same(j.bitwise_not(), t.bitwise_not())
        same(~j, ~t)
        j.bitwise_not_()
        t.bitwise_not_()
        same(j, t)
    raises_like(lambda: ~jg.tensor([1.0]), lambda: ~torch.tensor([1.0]))


def test_operators(jg, torch):
    ops = [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y,
           lambda x, y: x << y, lambda x, y: x >> y,
           lambda x, y: x & 6, lambda x, y: 6 | y, lambda x, y: 1 << y, lambda x, y: 100 >> y,
           lambda x, y: x ^ True]
    (ja, jb), (ta, tb) = _pair(jg, "int64", "int64"), _pair(torch, "int64", "int64")
    for f in ops:
        same(f(ja, jb), f(ta, tb))
    for f in ops[:3]:
        same(f(ja > 0, jb > 1), f(ta > 0, tb > 1))
    raises_like(lambda: jg.tensor([1.0]) & jg.tensor([1.0]),
                lambda: torch.tensor([1.0]) & torch.tensor([1.0]))
    raises_like(lambda: jg.tensor([1]) & None, lambda: torch.tensor([1]) & None, TypeError)
    raises_like(lambda: jg.tensor([1]) << "a", lambda: torch.tensor([1]) << "a", TypeError)


def test_inplace_forms(jg, torch):
    for name in BIN:
        for T in (jg, torch):
            a, b = _pair(T, "int64", "int64")
            r = getattr(a, name + "_")(b)
            assert r is a
        (ja, jb), (ta, tb) = _pair(jg, "int64", "int64"), _pair(torch, "int64", "int64")
        getattr(ja, name + "_")(jb)
        getattr(ta, name + "_")(tb)
        same(ja, ta)
        # int32 self keeps its dtype with an int64 other; bool self refuses int64
        j32, t32 = jg.tensor([7, 9], dtype=jg.int32), torch.tensor([7, 9], dtype=torch.int32)
        getattr(j32, name + "_")(jg.tensor([1, 2]))
        getattr(t32, name + "_")(torch.tensor([1, 2]))
        same(j32, t32)
        if "shift" not in name:
            raises_like(lambda: getattr(jg.tensor([True]), name + "_")(jg.tensor([3])),
                        lambda: getattr(torch.tensor([True]), name + "_")(torch.tensor([3])))
    for T in (jg, torch):
        a = T.tensor([12, 5])
        b = a
        b &= 6
        b |= T.tensor([1, 0])
        b ^= 3
        b <<= 2
        b >>= 1
        assert b is a
    ja, ta = jg.tensor([12, 5]), torch.tensor([12, 5])
    for f in (lambda x: x.__iand__(6), lambda x: x.__ior__(1), lambda x: x.__ixor__(3),
              lambda x: x.__ilshift__(2), lambda x: x.__irshift__(1)):
        f(ja)
        f(ta)
    same(ja, ta)
    # a view written in place reaches its base
    base = jg.tensor([1, 2, 3, 4])
    base[1:3].bitwise_or_(jg.tensor([8, 8]))
    assert base.tolist() == [1, 10, 11, 4]


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_bitwise_compiled_equals_eager(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")

    def prog(a, b, c):
        r = (a & b) | (a ^ (b << 2)) | (a >> 1)
        r = r + jg.bitwise_left_shift(c, 3).to(jg.int64) + (~a)
        m = ((a > 0) & (b > 1)) | ~(a < -2)
        return r * 2, m, jg.bitwise_xor(c, c >> 1), ~c

    a, b = _pair(jg, "int64", "int64")
    c = jg.tensor([x % 1000 for x in A], dtype=jg.int32)
    want = prog(a, b, c)
    got = jg.compile(prog, backend=backend, fullgraph=True)(a, b, c)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and vals(g) == vals(w)


# ---- quantile / nanquantile ----

# distinct values: which of equal elements sort puts first (and so which one
# the gradient reaches) is unspecified in PyTorch
QX = [[3.0, -1.0, 2.5, 7.0, 0.25, 2.75], [1.0, 9.0, -4.0, 0.55, 0.0, 6.0],
      [5.0, 5.5, 1.5, -2.0, 8.0, 3.5], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]]
QN = [[3.0, float("nan"), 2.5, 7.0, 0.25, 2.5], [float("nan")] * 6,
      [5.0, 5.0, 1.0, -2.0, 8.0, 3.0], [0.1, float("nan"), 0.3, float("nan"), 0.5, 0.6]]
INTERP = ["linear", "lower", "higher", "midpoint", "nearest"]


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", INTERP)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_quantile_values_and_gradients(jg, torch, fn, interpolation, dtype):
    qs = [0.0, 0.3, 0.5, 0.77, 1.0]
    for data in (QX, QN):
        for q in (0.4, 0.33, qs, 0.0, 1.0):
            for dim, keepdim in ((None, False), (None, True), (0, False), (1, True), (-1, False)):
                jx = jg.tensor(data, dtype=getattr(jg, dtype), requires_grad=True)
                tx = torch.tensor(data, dtype=getattr(torch, dtype), requires_grad=True)
                jq = jg.tensor(q, dtype=jx.dtype) if isinstance(q, list) else q
                tq = torch.tensor(q, dtype=tx.dtype) if isinstance(q, list) else q
                jy = getattr(jg, fn)(jx, jq, dim, keepdim, interpolation=interpolation)
                ty = getattr(torch, fn)(tx, tq, dim, keepdim, interpolation=interpolation)
                same(jy, ty)
                if data is QX:
                    seed = [0.5 + i for i in range(ty.numel())]
                    jy.backward(jg.tensor(seed, dtype=jx.dtype).reshape(tuple(ty.shape)))
                    ty.backward(torch.tensor(seed, dtype=tx.dtype).reshape(ty.shape))
                    same(jx.grad, tx.grad)
    # the method spelling, keywords, a 0-d q tensor and a 0-d input
    j, t = jg.tensor(QX, dtype=getattr(jg, dtype)), torch.tensor(QX, dtype=getattr(torch, dtype))
    same(getattr(j, fn)(jg.tensor(0.25, dtype=j.dtype), dim=1, keepdim=True),
         getattr(t, fn)(torch.tensor(0.25, dtype=t.dtype), dim=1, keepdim=True))
    same(getattr(jg, fn)(jg.tensor(3.0, dtype=j.dtype), 0.5, dim=0, keepdim=True),
         getattr(torch, fn)(torch.tensor(3.0, dtype=t.dtype), 0.5, dim=0, keepdim=True))
    same(getattr(jg, fn)(jg.tensor(3.0, dtype=j.dtype), jg.tensor([0.5, 1.0], dtype=j.dtype)),
         getattr(torch, fn)(torch.tensor(3.0, dtype=t.dtype),
                            torch.tensor([0.5, 1.0], dtype=t.dtype)))


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_errors(jg, torch, fn):
    cases = [
        lambda T: (T.tensor([1, 2]), 0.5),
        lambda T: (T.tensor([1.0, 2.0]), 1.5),
        lambda T: (T.tensor([1.0, 2.0]), -0.1),
        lambda T: (T.tensor([1.0, 2.0]), T.tensor([0.5], dtype=T.float64)),
        lambda T: (T.tensor([1.0, 2.0]), T.tensor([0.5, 1.5])),
        lambda T: (T.tensor([1.0, 2.0]), T.tensor([[0.5]])),
        lambda T: (T.zeros(0), 0.5),
        lambda T: (T.zeros(2, 0), 0.5, 1),
    ]
    for c in cases:
        raises_like(lambda: getattr(jg, fn)(*c(jg)), lambda: getattr(torch, fn)(*c(torch)))
    raises_like(lambda: getattr(jg, fn)(jg.tensor([1.0]), 0.5, interpolation="foo"),
                lambda: getattr(torch, fn)(torch.tensor([1.0]), 0.5, interpolation="foo"))
    raises_like(lambda: getattr(jg, fn)(jg.tensor([1.0]), 0.5, dim=3),
                lambda: getattr(torch, fn)(torch.tensor([1.0]), 0.5, dim=3))
    raises_like(lambda: getattr(jg, fn)(jg.tensor([1.0]), [0.5]),
                lambda: getattr(torch, fn)(torch.tensor([1.0]), [0.5]), TypeError)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_quantile_compiled_equals_eager(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(QX, dtype=dtype, requires_grad=True)

        def prog(x):
            # (a q tensor's range check reads its values, as PyTorch's does,
            # which a whole-graph capture cannot)
            a = jg.quantile(x, 0.9, dim=1) - jg.quantile(x, 0.1, dim=1, interpolation="lower")
            b = jg.quantile(x, 0.3, interpolation="midpoint")
            c = jg.nanquantile(x * x, 0.6, dim=0, keepdim=True, interpolation="nearest")
            return (a * a).sum() + b + c.sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        got = jg.compile(prog, backend=backend, fullgraph=True)(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)


# ---- index_put, put, masked_scatter, scatter_reduce, scatter(reduce=) ----

def _grads_match(jg, torch, f, dtype="float64"):
    """f(T, x, v) on both libraries: values, x's and v's gradients."""
    out = []
    for T in (jg, torch):
        x = T.tensor([[1.0, 2, 3, 4], [5, 6, 0, 8], [9, 10, 11, 12]], dtype=getattr(T, dtype),
                     requires_grad=True)
        v = T.tensor([0.5, -2, 3], dtype=getattr(T, dtype), requires_grad=True)
        y = f(T, x, v)
        y.backward(T.arange(y.numel(), dtype=y.dtype).reshape(y.shape) + 1)
        out.append((y, x.grad, v.grad))
    for j, t in zip(*out):
        if t is None:
            assert j is None or not j.abs().sum().item()
        else:
            same(j, t)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_index_put(jg, torch, dtype):
    cases = [
        lambda T, x, v: x.index_put((T.tensor([0, 2, 0]), T.tensor([1, 3, 1])), v,
                                    accumulate=True),
        lambda T, x, v: x.index_put((T.tensor([0, 2, 1]), T.tensor([1, -1, 1])), v),
        lambda T, x, v: x.index_put((T.tensor([0, 2]),), v[:1] * 1),
        lambda T, x, v: x.index_put((T.tensor([-1]),), v[:1] * 1, True),
        lambda T, x, v: x.index_put((T.tensor([[True, False, True, False]] * 3),), v[:1], True),
        lambda T, x, v: x.index_put((T.tensor([[0], [2]]), T.tensor([1, 3, 0])), v),
        lambda T, x, v: T.index_put(x, (T.tensor([1]),), v[0]),
    ]
    for f in cases:
        _grads_match(jg, torch, f, dtype)
    for T in (jg, torch):  # in place
        a = T.zeros(3)
        r = a.index_put_((T.tensor([1, 1]),), T.tensor([1.0, 2.0]), accumulate=True)
        assert r is a and a.tolist() == [0.0, 3.0, 0.0]
        T.index_put_(a, (T.tensor([0]),), T.tensor([5.0]))
        assert a.tolist() == [5.0, 3.0, 0.0]
    raises_like(lambda: jg.zeros(3).index_put_((jg.tensor([5]),), jg.ones(1)),
                lambda: torch.zeros(3).index_put_((torch.tensor([5]),), torch.ones(1)))
    raises_like(lambda: jg.zeros(3).index_put((jg.tensor([1]),), jg.ones(1, dtype=jg.float64)),
                lambda: torch.zeros(3).index_put((torch.tensor([1]),),
                                                 torch.ones(1, dtype=torch.float64)))
    raises_like(lambda: jg.zeros(3).index_put((jg.tensor([1], dtype=jg.int32),), jg.ones(1)),
                lambda: torch.zeros(3).index_put((torch.tensor([1], dtype=torch.int32),),
                                                 torch.ones(1)))
    raises_like(lambda: jg.zeros(3).index_put((jg.tensor([1.0]),), jg.ones(1)),
                lambda: torch.zeros(3).index_put((torch.tensor([1.0]),), torch.ones(1)))


def test_put(jg, torch):
    for acc in (False, True):
        _grads_match(jg, torch, lambda T, x, v: x.put(T.tensor([0, -1, 5]), v, accumulate=acc))
        _grads_match(jg, torch, lambda T, x, v: T.put(x, T.tensor([[7], [7], [2]]), v.reshape(3, 1),
                                                      acc))
    for T in (jg, torch):
        a = T.zeros(2, 2)
        assert a.put_(T.tensor([3, 3]), T.tensor([1.0, 2.0]), accumulate=True) is a
        assert a.tolist() == [[0.0, 0.0], [0.0, 3.0]]
    raises_like(lambda: jg.zeros(3).put_(jg.tensor([5]), jg.ones(1)),
                lambda: torch.zeros(3).put_(torch.tensor([5]), torch.ones(1)))
    raises_like(lambda: jg.zeros(3).put_(jg.tensor([1, 2]), jg.ones(1)),
                lambda: torch.zeros(3).put_(torch.tensor([1, 2]), torch.ones(1)))


def test_masked_scatter(jg, torch):
    _grads_match(jg, torch, lambda T, x, v: x.masked_scatter(
        T.tensor([True, False, True, True]), T.cat([v, v, v, v])))
    _grads_match(jg, torch, lambda T, x, v: T.masked_scatter(
        x, T.tensor([[True], [False], [True]]), T.cat([v, v, v]).reshape(3, 3) * 2))
    _grads_match(jg, torch, lambda T, x, v: x.masked_scatter(x > 100, v))  # no position set
    for T in (jg, torch):
        a = T.zeros(4)
        assert a.masked_scatter_(T.tensor([False, True, False, True]), T.tensor([7.0, 8, 9])) is a
        assert a.tolist() == [0.0, 7.0, 0.0, 8.0]
    raises_like(lambda: jg.zeros(3).masked_scatter(jg.tensor([True] * 3), jg.ones(2)),
                lambda: torch.zeros(3).masked_scatter(torch.tensor([True] * 3), torch.ones(2)))


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scatter_reduce(jg, torch, reduce, include_self, dtype):
    for dim, idx in ((1, [[0, 1, 0], [2, 2, 3], [1, 1, 1]]), (0, [[0, 2, 0], [0, 2, 1]]),
                     (-1, [[3], [3], [0]])):
        def f(T, x, v):
            i = T.tensor(idx)
            src = T.stack([v, v * 2, v + 1, v * v])[:len(idx), :len(idx[0])]
            if reduce == "amax":  # ties with self and among src: shared gradients
                src = T.stack([v, v * 0 + 6, v * 0 + 11, v])[:len(idx), :len(idx[0])]
            return x.scatter_reduce(dim, i, src, reduce, include_self=include_self)
        _grads_match(jg, torch, f, dtype)
    # zeros in self and src: prod's exclusive products
    if reduce == "prod":
        _grads_match(jg, torch, lambda T, x, v: (x - 6).scatter_reduce(
            1, T.tensor([[0, 0, 1], [2, 2, 2], [1, 1, 3]]),
            T.stack([v, v * 0, v * v]) * T.tensor([[1.0, 0, 1], [1, 0, 0], [1, 1, 1]],
                                                  dtype=v.dtype), reduce,
            include_self=include_self), dtype)
    # integer tensors (mean divides flooring), and the in-place form
    i = [[0, 1, 0], [1, 1, 1]]
    got = jg.tensor([[5, 7], [2, -9]]).scatter_reduce(1, jg.tensor(i)[:, :2], jg.tensor(
        [[3, 4], [-6, 1]]), reduce, include_self=include_self)
    want = torch.tensor([[5, 7], [2, -9]]).scatter_reduce(1, torch.tensor(i)[:, :2], torch.tensor(
        [[3, 4], [-6, 1]]), reduce, include_self=include_self)
    same(got, want)
    for T in (jg, torch):
        a = T.tensor([1.0, 2.0, 3.0])
        assert a.scatter_reduce_(0, T.tensor([2, 2]), T.tensor([4.0, 5.0]), reduce,
                                 include_self=include_self) is a
    same(a, torch.tensor([1.0, 2.0, 3.0]).scatter_reduce(0, torch.tensor([2, 2]), torch.tensor(
        [4.0, 5.0]), reduce, include_self=include_self))


def test_scatter_reduce_errors_and_scatter_reduce_argument(jg, torch):
    raises_like(lambda: jg.zeros(3).scatter_reduce(0, jg.tensor([0]), jg.ones(1), "foo"),
                lambda: torch.zeros(3).scatter_reduce(0, torch.tensor([0]), torch.ones(1), "foo"),
                RuntimeError)
    for reduce in ("add", "multiply"):
        for T in (jg, torch):
            x = T.ones(3, 4) * 2
            idx = T.tensor([[0, 1, 0, 2], [0, 0, 0, 0]])
            a = x.scatter(0, idx, T.arange(8.0).reshape(2, 4), reduce=reduce)
            b = T.scatter(x, 0, idx, 3.0, reduce=reduce)
            c = x.clone()
            assert c.scatter_(0, idx, 1.5, reduce=reduce) is c
            if T is jg:
                got = (a, b, c)
            else:
                want = (a, b, c)
        for g, w in zip(got, want):
            same(g, w)
    raises_like(lambda: jg.zeros(3).scatter(0, jg.tensor([0]), jg.ones(1), reduce="foo"),
                lambda: torch.zeros(3).scatter(0, torch.tensor([0]), torch.ones(1), reduce="foo"))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_scatter_reduce_compiled_equals_eager(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    idx = jg.tensor([[0, 1, 0], [2, 2, 3], [1, 1, 1]])
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor([[1.0, 2, 3, 4], [5, 6, 0, 8], [9, 10, 11, 12]], dtype=dtype,
                      requires_grad=True)
        s = jg.tensor([[0.5, -2, 3], [1, 7, 2], [4, 4, 5]], dtype=dtype, requires_grad=True)

        def prog(x, s):
            a = x.scatter_reduce(1, idx, s, "sum", include_self=False)
            b = x.scatter_reduce(1, idx, s * s, "mean")
            c = x.scatter_reduce(1, idx, s, "mean", include_self=False)
            return (a * b).sum() + (c * c).sum()

        want = prog(x, s)
        wg = jg.autograd.grad(want, [x, s])
        got = jg.compile(prog, backend=backend, fullgraph=True)(x, s)
        gg = jg.autograd.grad(got, [x, s])
        assert vals(got) == vals(want)
        for g, w in zip(gg, wg):
            assert vals(g) == vals(w)
