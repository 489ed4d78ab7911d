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
    same(getattr(jg, fn)(jg.tensor(3.0, dtype=j.dtype), [0.5] and jg.tensor([0.5, 1.0], dtype=j.dtype)),
         getattr(torch, fn)(torch.tensor(3.0, dtype=t.dtype), torch.tensor([0.5, 1.0], dtype=t.dtype)))


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
