"""The math2 ops (floor ... erfc, atan2, addcmul, addcdiv, lerp, their
aliases and in-place forms) against PyTorch 1.13: values, gradients, grad_fn
names, dtypes, errors; and compiled == eager bitwise on both backends."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def dname(d):
    return str(d).split(".")[-1]


def dense(t):
    """torch's gradient of sgn is a ZeroTensor, which tolist() refuses"""
    if getattr(t, "_is_zerotensor", lambda: False)():
        return torch.zeros(t.shape, dtype=t.dtype)
    return t


def close(jt, tt, tol):
    tt = dense(tt)
    assert dname(jt.dtype) == dname(tt.dtype), (jt.dtype, tt.dtype)
    assert tuple(jt.shape) == tuple(tt.shape), (jt.shape, tt.shape)
    a = np.array(jt.detach().tolist(), dtype=np.float64)
    b = np.array(tt.detach().tolist(), dtype=np.float64)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


def same_bits(jt, tt):
    assert dname(jt.dtype) == dname(tt.dtype), (jt.dtype, tt.dtype)
    assert jt.detach().numpy().tobytes() == tt.detach().numpy().tobytes(), (jt, tt)


X = [[0.5, -1.25, 2.5, 0.0], [3.0, -0.75, 1.5, -2.5], [0.25, 4.0, -3.5, 1.0]]
Y = [[1.5, -1.25, 0.5, 2.0], [-3.0, 0.25, 1.5, 0.75], [2.25, -4.0, 3.5, 1.0]]
POS = [[0.5, 1.25, 2.0, 0.1], [3.0, 0.75, 1.5, 2.5], [0.25, 4.0, 3.0, 1.0]]
UNIT = [[0.5, -0.25, 0.9, 0.0], [-0.75, 0.1, 0.3, -0.5], [0.25, 0.6, -0.95, 0.7]]
W = [[0.0, 0.25, 0.5, 1.0], [-0.5, 0.75, 1.5, 0.49], [0.51, -2.0, 0.3, 0.6]]

# name -> (fn(T, x, y), x values, exact): x and y (Y) both require grad;
# exact: PyTorch's CPU kernel is the same arithmetic (not a SLEEF function),
# so the values must be its bits
CASES = {
    "floor": (lambda T, x, y: x.floor() * y, X, True),
    "ceil": (lambda T, x, y: T.ceil(x) * y, X, True),
    "trunc": (lambda T, x, y: x.trunc() + y, X, True),
    "fix": (lambda T, x, y: T.fix(x) + x.fix(), X, True),
    "round": (lambda T, x, y: x.round() * y, X, True),
    "round_fn": (lambda T, x, y: T.round(x * 3.7), X, True),
    "round_dec": (lambda T, x, y: T.round(x * 1.337, decimals=2), X, True),
    "round_dec0": (lambda T, x, y: x.round(decimals=0), X, True),
    "round_dec_neg": (lambda T, x, y: (x * 37.0).round(decimals=-1), X, True),
    "frac": (lambda T, x, y: x.frac() * y, X, True),
    "sign": (lambda T, x, y: x.sign() * y, X, True),
    "sgn": (lambda T, x, y: T.sgn(x) * y, X, True),
    "log1p": (lambda T, x, y: x.log1p(), POS, False),
    "expm1": (lambda T, x, y: T.expm1(x), X, False),
    "log2": (lambda T, x, y: x.log2(), POS, False),
    "log10": (lambda T, x, y: T.log10(x), POS, False),
    "rsqrt": (lambda T, x, y: x.rsqrt(), POS, True),
    "reciprocal": (lambda T, x, y: T.reciprocal(x), POS, True),
    "sinh": (lambda T, x, y: x.sinh(), X, False),
    "cosh": (lambda T, x, y: T.cosh(x), X, False),
    "tan": (lambda T, x, y: x.tan(), UNIT, False),
    "asin": (lambda T, x, y: x.asin(), UNIT, False),
    "arcsin": (lambda T, x, y: T.arcsin(x), UNIT, False),
    "acos": (lambda T, x, y: T.acos(x), UNIT, False),
    "arccos": (lambda T, x, y: x.arccos(), UNIT, False),
    "atan": (lambda T, x, y: x.atan(), X, False),
    "arctan": (lambda T, x, y: T.arctan(x), X, False),
    "erfc": (lambda T, x, y: x.erfc(), X, False),
    "atan2": (lambda T, x, y: T.atan2(x, y), X, False),
    "arctan2": (lambda T, x, y: x.arctan2(y[1:2]), X, False),
    "addcmul": (lambda T, x, y: T.addcmul(x, y, x * 0.5 + 0.25), X, True),
    "addcmul_value": (lambda T, x, y: x.addcmul(y[0], x, value=-0.3), X, True),
    "addcmul_bcast": (lambda T, x, y: T.addcmul(x[:, :1], y[0], x, value=2.5), X, True),
    "addcdiv": (lambda T, x, y: T.addcdiv(x, y, x + 5.0), X, True),
    "addcdiv_value": (lambda T, x, y: x.addcdiv(y, x.abs() + 0.5, value=0.7), X, True),
    "lerp": (lambda T, x, y: T.lerp(x, y, 0.3), X, True),
    "lerp_big": (lambda T, x, y: x.lerp(y, 0.8), X, True),
    "lerp_neg": (lambda T, x, y: x.lerp(y, -0.5), X, True),
    "lerp_int_weight": (lambda T, x, y: x.lerp(y, 2), X, True),
    "lerp_t": (lambda T, x, y: T.lerp(x, y, T.tensor(W, dtype=x.dtype)), X, True),
    "lerp_t_grad": (lambda T, x, y: x.lerp(y[0], y.sigmoid()), X, True),
}


def run(T, name, dtype):
    fn, vals, _ = CASES[name]
    dt = getattr(T, dtype)
    x = T.tensor(vals, dtype=dt, requires_grad=True)
    y = T.tensor(Y, dtype=dt, requires_grad=True)
    out = fn(T, x, y)
    w = T.arange(out.numel(), dtype=dt).reshape(out.shape) * 0.25 + 1.0
    gs = T.autograd.grad((out * w).sum(), [x, y], allow_unused=True)
    return out, list(gs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_grads_match_torch(jg, name, dtype):
    tol = 2e-6 if dtype == "float32" else 1e-12
    got, ggot = run(jg, name, dtype)
    want, gwant = run(torch, name, dtype)
    if CASES[name][2]:
        same_bits(got, want)
    else:
        close(got, want, tol)
    for g, w in zip(ggot, gwant):
        assert (g is None) == (w is None), (g, w)
        if g is not None:
            close(g, w, tol)


def test_grad_fn_names(jg):
    for name, f in [
        ("floor", lambda T, x: x.floor()), ("ceil", lambda T, x: x.ceil()),
        ("trunc", lambda T, x: x.trunc()), ("round", lambda T, x: x.round()),
        ("round_dec", lambda T, x: x.round(decimals=1)), ("frac", lambda T, x: x.frac()),
        ("sign", lambda T, x: x.sign()), ("sgn", lambda T, x: x.sgn()),
        ("log1p", lambda T, x: x.log1p()), ("expm1", lambda T, x: x.expm1()),
        ("log2", lambda T, x: x.log2()), ("log10", lambda T, x: x.log10()),
        ("rsqrt", lambda T, x: x.rsqrt()), ("reciprocal", lambda T, x: x.reciprocal()),
        ("sinh", lambda T, x: x.sinh()), ("cosh", lambda T, x: x.cosh()),
        ("tan", lambda T, x: x.tan()), ("asin", lambda T, x: x.asin()),
        ("acos", lambda T, x: x.acos()), ("atan", lambda T, x: x.atan()),
        ("erfc", lambda T, x: x.erfc()), ("atan2", lambda T, x: x.atan2(x)),
        ("addcmul", lambda T, x: x.addcmul(x, x)), ("addcdiv", lambda T, x: x.addcdiv(x, x)),
        ("lerp", lambda T, x: x.lerp(x, 0.5)), ("lerp_t", lambda T, x: x.lerp(x, x)),
    ]:
        names = [f(T, T.tensor([0.5, 0.25], requires_grad=True)).grad_fn.name()
                 for T in (jg, torch)]
        assert names[0] == names[1], (name, names)


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_and_bool_dtypes_like_torch(jg, dtype):
    vals = [[1, 0, 3], [-2, 5, 0]]
    if dtype == "bool":
        vals = [[True, False, True], [False, True, True]]
    ops = ["floor", "ceil", "trunc", "round", "frac", "sign", "sgn", "log1p", "expm1", "log2",
           "log10", "rsqrt", "reciprocal", "sinh", "cosh", "tan", "asin", "acos", "atan", "erfc"]
    for op in ops:
        res = []
        for T in (jg, torch):
            t = T.tensor(vals, dtype=getattr(T, dtype))
            try:
                res.append(getattr(T, op)(t))
            except RuntimeError as e:
                res.append(str(e).split("\n")[0])
        if isinstance(res[1], str):
            assert res[0] == res[1], (op, res)
        else:
            assert not isinstance(res[0], str), (op, res[0])
            close(res[0], res[1], 1e-6)
    # binary and three-operand ops
    for f in [lambda T, t: T.atan2(t, t), lambda T, t: T.addcmul(t, t, t, value=2),
              lambda T, t: T.addcdiv(t, t, t), lambda T, t: T.lerp(t, t, 0.5),
              lambda T, t: T.lerp(t, t, t), lambda T, t: T.addcdiv(t.float(), t, t.float())]:
        res = []
        for T in (jg, torch):
            t = T.tensor(vals, dtype=getattr(T, dtype))
            try:
                res.append(f(T, t))
            except RuntimeError as e:
                res.append(str(e).split("\n")[0])
        if isinstance(res[1], str):
            assert res[0] == res[1], res
        else:
            close(res[0], res[1], 1e-6)


def test_round_half_to_even_and_large_integers(jg):
    x = [0.5, 1.5, 2.5, -0.5, -2.5, 3.5, 1e300, float("nan"), float("-inf")]
    for dt in ("float32", "float64"):
        same_bits(jg.tensor(x, dtype=getattr(jg, dt)).round(),
                  torch.tensor(x, dtype=getattr(torch, dt)).round())
    big = 2 ** 62 + 1  # beyond 2^53: exact through integer floor / round
    for op in ("floor", "ceil", "round", "trunc"):
        assert getattr(jg.tensor([big, -big]), op)().tolist() == [big, -big]


def test_special_values_like_torch(jg):
    v = [0.0, -0.0, 1.0, -1.0, float("inf"), float("-inf"), float("nan"), 1e-30, 1e30]
    for op in ("floor", "ceil", "trunc", "round", "frac", "sign", "sgn", "rsqrt", "reciprocal"):
        same_bits(getattr(jg.tensor(v), op)(), getattr(torch.tensor(v), op)())
    for op in ("log1p", "expm1", "log2", "log10", "sinh", "cosh", "tan", "asin", "acos", "atan",
               "erfc"):
        close(getattr(jg.tensor(v, dtype=jg.float64), op)(),
              getattr(torch.tensor(v, dtype=torch.float64), op)(), 1e-12)
    a = [0.0, -0.0, 1.0, -1.0, float("inf"), float("nan")]
    got = jg.atan2(jg.tensor(a, dtype=jg.float64).reshape(6, 1), jg.tensor(a, dtype=jg.float64))
    want = torch.atan2(torch.tensor(a, dtype=torch.float64).reshape(6, 1),
                       torch.tensor(a, dtype=torch.float64))
    close(got, want, 1e-15)


def test_zero_gradients_of_piecewise_constant_ops(jg):
    for op in ("floor", "ceil", "trunc", "round", "sign", "sgn"):
        x = jg.tensor([0.5, -1.5, float("nan"), float("inf")], requires_grad=True)
        getattr(x, op)().sum().backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0, 0.0], op


def test_double_backward(jg):
    def second(T, f, vals):
        x = T.tensor(vals, dtype=T.float64, requires_grad=True)
        (g,) = T.autograd.grad(f(T, x).sum(), x, create_graph=True)
        (gg,) = T.autograd.grad((g * g).sum(), x)
        return gg

    for f, vals in [
        (lambda T, x: x.log1p() * x, POS[0]), (lambda T, x: x.expm1() * x, X[0]),
        (lambda T, x: x.rsqrt() * x, POS[0]), (lambda T, x: x.reciprocal() * x, POS[0]),
        (lambda T, x: x.tan() + x.asin() * x.acos(), UNIT[0]),
        (lambda T, x: x.sinh() * x.cosh() + x.atan() * x.erfc(), X[0]),
        (lambda T, x: x.log2() * x.log10(), POS[0]),
        (lambda T, x: T.atan2(x, x * x + 1.0) * x, X[0]),
        (lambda T, x: T.addcmul(x, x, x.sin(), value=0.5) * x, X[0]),
        (lambda T, x: T.addcdiv(x, x.sin(), x * x + 1.0, value=1.5) * x, X[0]),
        (lambda T, x: T.lerp(x, x.sin(), x.cos()) * x + T.lerp(x, x * x, 0.7) * x, X[0]),
        (lambda T, x: x.frac() * x + x.floor() * x, X[0]),
    ]:
        close(second(jg, f, vals), second(torch, f, vals), 1e-10)


def test_errors_like_torch(jg):
    def both(f):
        msgs = []
        for T in (jg, torch):
            with pytest.raises(Exception) as e:
                f(T)
            msgs.append((type(e.value), str(e.value).split("\n")[0]))
        return msgs

    for f in [
        lambda T: T.tensor([True]).floor(),
        lambda T: T.tensor([True]).round(),
        lambda T: T.tensor([1, 2]).frac(),
        lambda T: T.tensor([1.5]).round(decimals=1) + T.tensor([1]).round(decimals=1),
        lambda T: T.tensor([1]).round(decimals=0),
        lambda T: T.tensor([True]).addcmul(T.tensor([True]), T.tensor([True])),
        lambda T: T.tensor([1.0]).addcdiv(T.tensor([1]), T.tensor([2])),
        lambda T: T.tensor([1.0]).lerp(T.tensor([1.0], dtype=T.float64), 0.5),
        lambda T: T.tensor([1.0]).lerp(T.tensor([1.0]), T.tensor([0.5], dtype=T.float64)),
        lambda T: T.tensor([1]).lerp(T.tensor([2]), 0.5),
        lambda T: T.tensor([1]).lerp(T.tensor([2]), T.tensor([1])),
        lambda T: T.tensor([1.0, 2.0]).addcmul(T.tensor([1.0, 2.0, 3.0]), T.tensor([1.0])),
        lambda T: T.tensor([1.0]).atan2(2.0),
        lambda T: T.atan2(T.tensor([1.0]), 2.0),
        lambda T: T.tensor([1.0]).addcmul(1.0, T.tensor([1.0])),
        lambda T: T.tensor([1.0]).lerp(T.tensor([1.0]), "a"),
        lambda T: T.tensor([1, 2]).log1p_(),
        lambda T: T.tensor([1.0]).requires_grad_().floor_(),
    ]:
        (tj, mj), (tt, mt) = both(f)
        assert tj is tt, (tj, tt, mj, mt)
        if tj is RuntimeError:
            assert mj == mt, (mj, mt)


def test_inplace_forms_like_torch(jg):
    for name, args in [
        ("floor_", ()), ("ceil_", ()), ("trunc_", ()), ("fix_", ()), ("round_", ()),
        ("frac_", ()), ("sign_", ()), ("sgn_", ()), ("log1p_", ()), ("expm1_", ()),
        ("log2_", ()), ("log10_", ()), ("rsqrt_", ()), ("reciprocal_", ()), ("sinh_", ()),
        ("cosh_", ()), ("tan_", ()), ("asin_", ()), ("arcsin_", ()), ("acos_", ()),
        ("arccos_", ()), ("atan_", ()), ("arctan_", ()), ("erfc_", ()), ("atan2_", ("y",)),
        ("arctan2_", ("y",)), ("addcmul_", ("y", "y")), ("addcdiv_", ("y", "y")),
        ("lerp_", ("y", 0.3)), ("lerp_", ("y", "y")),
    ]:
        res = []
        for T in (jg, torch):
            leaf = T.tensor(UNIT, requires_grad=True)
            y = T.tensor(POS, requires_grad=True)
            x = leaf * 1.0
            before = x._version
            r = getattr(x, name)(*[y if a == "y" else a for a in args])
            assert r is x and x._version == before + 1
            (x * T.tensor(Y)).sum().backward()
            res.append((x, leaf.grad, y.grad))
        close(res[0][0], res[1][0], 2e-6)
        for g, w in zip(res[0][1:], res[1][1:]):
            assert (g is None) == (w is None), name
            if g is not None:
                close(g, w, 2e-6)
    t = jg.tensor([1.7, -2.5])
    t.round_()
    assert t.tolist() == [2.0, -2.0]
    i = jg.tensor([3, -4])
    i.floor_()
    assert i.tolist() == [3, -4] and i.dtype == jg.int64


def test_module_functions(jg):
    for name in ("floor", "round", "log1p", "atan2", "addcmul", "addcdiv", "lerp", "arcsin",
                 "fix", "arctan2"):
        fn = getattr(jg, name)
        assert fn.__name__ == name
        with pytest.raises(TypeError, match="must be Tensor"):
            fn(1.0)


def _prog(T, x, y):
    p = y.abs() + 0.25
    a = p.log1p() + (x * 0.5).expm1()
    a = a + p.log2() * p.log10() + p.rsqrt() * p.reciprocal() + x.sinh() + y.cosh()
    a = a + (x * 0.3).tan() * y.atan() + x.tanh().asin() + (x.tanh() * 0.5).acos()
    a = a + x.erfc() * T.atan2(x, y)
    r = a.floor() + x.ceil() + y.round() + a.trunc() + a.frac() + x.sign() * y.sgn()
    r = r + a.round(decimals=2)
    lt = T.lerp(x, y, a.sigmoid()) + T.lerp(a, x, 0.7) + a.lerp(x, 0.2)
    out = (T.addcmul(r, a, lt, value=0.5) + T.addcdiv(a, lt, p, value=-2.0)).sum()
    return out, r, lt


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_matches_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    jg.manual_seed(7)
    x0, y0 = jg.randn(4, 6), jg.randn(1, 6)

    def run_(f):
        x = x0.clone().requires_grad_()
        y = y0.clone().requires_grad_()
        outs = f(x, y)
        outs[0].backward()
        return [o.detach().numpy().tobytes() for o in outs] + \
            [x.grad.numpy().tobytes(), y.grad.numpy().tobytes()]

    eager = run_(lambda x, y: _prog(jg, x, y))
    cf = jg.compile(lambda x, y: _prog(jg, x, y), fullgraph=True, backend=backend)
    for _ in range(2):
        assert run_(cf) == eager


def test_program_matches_torch(jg):
    res = []
    for T in (jg, torch):
        x = T.tensor(X, dtype=T.float64, requires_grad=True)
        y = T.tensor(Y, dtype=T.float64, requires_grad=True)
        outs = _prog(T, x, y)
        outs[0].backward()
        res.append(list(outs) + [x.grad, y.grad])
    for g, w in zip(*res):
        close(g, w, 1e-9)
