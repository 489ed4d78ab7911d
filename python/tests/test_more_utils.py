"""_more_utils against PyTorch 1.13: constants, finfo / iinfo, dtype
promotion, creation functions, RNG state, inference_mode and Tensor
utilities (in-place view ops, fill_diagonal_, random fills, resize_ ...)."""
import math
import warnings

import numpy as np
import pytest

import jitgrad as jg

torch = pytest.importorskip("torch")

DTYPES = ["float32", "float64", "int64", "int32", "bool"]


def dname(d):
    return str(d).split(".")[-1]


def same(jt, tt):
    assert dname(jt.dtype) == dname(tt.dtype), (jt.dtype, tt.dtype)
    assert tuple(jt.shape) == tuple(tt.shape), (jt.shape, tt.shape)
    assert jt.detach().tolist() == tt.detach().tolist()


def raises_like(jfn, tfn):
    """jfn raises the exception type tfn raises, with the same message."""
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(type(te.value)) as je:
        jfn()
    assert str(je.value).replace("jitgrad", "torch") == str(te.value), (je.value, te.value)


# ---------------------------------------------------------------- constants


def test_constants():
    assert jg.pi == torch.pi and jg.e == torch.e and jg.inf == torch.inf
    assert math.isnan(jg.nan)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_finfo(dt):
    j, t = jg.finfo(getattr(jg, dt)), torch.finfo(getattr(torch, dt))
    for a in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(j, a) == getattr(t, a), a
    assert repr(j) == repr(t)
    assert j == jg.finfo(getattr(jg, dt))


def test_finfo_default_and_errors():
    assert repr(jg.finfo()) == repr(torch.finfo())
    raises_like(lambda: jg.finfo(jg.int64), lambda: torch.finfo(torch.int64))
    raises_like(lambda: jg.finfo(jg.bool), lambda: torch.finfo(torch.bool))
    raises_like(lambda: jg.finfo(3), lambda: torch.finfo(3))


@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_iinfo(dt):
    j, t = jg.iinfo(getattr(jg, dt)), torch.iinfo(getattr(torch, dt))
    for a in ("bits", "max", "min", "dtype"):
        assert getattr(j, a) == getattr(t, a), a
    assert repr(j) == repr(t)


def test_iinfo_errors():
    raises_like(lambda: jg.iinfo(jg.float32), lambda: torch.iinfo(torch.float32))
    raises_like(lambda: jg.iinfo(jg.bool), lambda: torch.iinfo(torch.bool))
    with pytest.raises(TypeError):
        jg.iinfo()


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promote_types_can_cast(a, b):
    assert dname(jg.promote_types(getattr(jg, a), getattr(jg, b))) == \
        dname(torch.promote_types(getattr(torch, a), getattr(torch, b)))
    assert jg.can_cast(getattr(jg, a), getattr(jg, b)) == \
        torch.can_cast(getattr(torch, a), getattr(torch, b))


def test_promote_types_errors():
    raises_like(lambda: jg.promote_types(1, jg.int32), lambda: torch.promote_types(1, torch.int32))
    raises_like(lambda: jg.can_cast(1, jg.int32), lambda: torch.can_cast(1, torch.int32))


def _operands(T):
    return [T.tensor([1.0, 2.0]), T.tensor([1.0], dtype=T.float64), T.tensor([1, 2]),
            T.tensor([1], dtype=T.int32), T.tensor([True]), T.tensor(2.0),
            T.tensor(2.0, dtype=T.float64), T.tensor(3), T.tensor(3, dtype=T.int32),
            T.tensor(False), 1, 2.5, True]


def test_result_type():
    jo, to = _operands(jg), _operands(torch)
    for i in range(len(jo)):
        for k in range(len(jo)):
            if not isinstance(jo[i], jg.Tensor) and not isinstance(jo[k], jg.Tensor):
                continue
            assert dname(jg.result_type(jo[i], jo[k])) == dname(torch.result_type(to[i], to[k])), \
                (to[i], to[k])
    assert dname(jg.result_type(2, 3.0)) == dname(torch.result_type(2, 3.0))
    assert dname(jg.result_type(1, 2)) == dname(torch.result_type(1, 2))
    assert dname(jg.result_type(True, False)) == dname(torch.result_type(True, False))
    with pytest.raises(TypeError, match="result_type"):
        jg.result_type(jg.tensor(1), "a")


def test_typename():
    for dt in DTYPES:
        assert jg.typename(jg.zeros(1, dtype=getattr(jg, dt))) == \
            torch.typename(torch.zeros(1, dtype=getattr(torch, dt)))
    assert jg.typename(3) == torch.typename(3) == "int"
    assert jg.typename("s") == "str"
    assert jg.typename(jg.nn.Linear(1, 1)).endswith("Linear")


def test_default_dtype():
    jg.set_default_dtype(jg.float32)
    assert jg.get_default_dtype() is jg.float32
    raises_like(lambda: jg.set_default_dtype(jg.int64),
                lambda: torch.set_default_dtype(torch.int64))
    with pytest.raises(RuntimeError, match="default dtype is float32"):
        jg.set_default_dtype(jg.float64)
    assert jg.get_default_dtype() is jg.float32


# ------------------------------------------------------------------ creation


@pytest.mark.parametrize("args,kw", [((2, 3), {}), (((2, 3),), {}), (([4],), {}),
                                     ((), {"size": (1, 2)}), ((2,), {"dtype": "int64"}),
                                     ((0, 3), {"dtype": "float64"}), ((), {"size": ()})])
def test_empty(args, kw):
    jkw = {k: getattr(jg, v) if k == "dtype" else v for k, v in kw.items()}
    tkw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
    j, t = jg.empty(*args, **jkw), torch.empty(*args, **tkw)
    assert tuple(j.shape) == tuple(t.shape) and dname(j.dtype) == dname(t.dtype)
    assert j.is_contiguous()


def test_empty_requires_grad_and_errors():
    j = jg.empty(2, requires_grad=True)
    assert j.requires_grad and j.is_leaf
    raises_like(lambda: jg.empty(-1), lambda: torch.empty(-1))
    with pytest.raises(TypeError):
        jg.empty()
    with pytest.raises(TypeError):
        jg.empty(2.5)


def test_empty_like_full_like():
    for dt in DTYPES:
        j = jg.empty_like(jg.ones(2, 3, dtype=getattr(jg, dt)))
        t = torch.empty_like(torch.ones(2, 3, dtype=getattr(torch, dt)))
        assert tuple(j.shape) == tuple(t.shape) and dname(j.dtype) == dname(t.dtype)
    j = jg.empty_like(jg.ones(2), dtype=jg.int32, requires_grad=False)
    assert j.dtype is jg.int32
    for dt in DTYPES:
        same(jg.full_like(jg.ones(2, 3, dtype=getattr(jg, dt)), 3),
             torch.full_like(torch.ones(2, 3, dtype=getattr(torch, dt)), 3))
    same(jg.full_like(jg.ones(2), 2.5, dtype=jg.float64),
         torch.full_like(torch.ones(2), 2.5, dtype=torch.float64))
    same(jg.full_like(jg.ones(2, dtype=jg.int64), 2.7),
         torch.full_like(torch.ones(2, dtype=torch.int64), 2.7))
    assert jg.full_like(jg.ones(2), 1.0, requires_grad=True).requires_grad
    raises_like(lambda: jg.full_like([1], 2), lambda: torch.full_like([1], 2))


@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((2, 3, 4), (0, 1, 3)),
                                         ((2, 3), (8, 2)), ((2, 3), (1, 1)), ((0, 3), (3, 1)),
                                         ((), ())])
def test_empty_strided(size, stride):
    j, t = jg.empty_strided(size, stride), torch.empty_strided(size, stride)
    assert tuple(j.shape) == tuple(t.shape) and j.stride() == t.stride()
    assert dname(j.dtype) == dname(t.dtype)
    j = jg.ones(2, dtype=jg.float64).new_empty_strided(size, stride)
    t = torch.ones(2, dtype=torch.float64).new_empty_strided(size, stride)
    assert j.stride() == t.stride() and dname(j.dtype) == dname(t.dtype)


def test_empty_strided_errors():
    raises_like(lambda: jg.empty_strided((2, 3), (1,)), lambda: torch.empty_strided((2, 3), (1,)))
    j = jg.empty_strided((2, 2), (2, 1), dtype=jg.int32, requires_grad=False)
    assert j.dtype is jg.int32
    assert jg.empty_strided((2,), (1,), requires_grad=True).requires_grad


def test_as_tensor():
    a = jg.ones(3)
    assert jg.as_tensor(a) is a
    b = jg.as_tensor(a, dtype=jg.float64)
    assert b is not a and b.dtype is jg.float64
    n = np.ones(3)
    t = jg.as_tensor(n)
    t[0] = 5
    assert n[0] == 5  # shares the array's memory, as PyTorch's
    for data in ([1, 2], [1.0, 2], 3.0, [[True, False]], (1, 2)):
        same(jg.as_tensor(data), torch.as_tensor(data))
    same(jg.as_tensor([1, 2], dtype=jg.float64), torch.as_tensor([1, 2], dtype=torch.float64))


def test_as_tensor_grad():
    a = jg.ones(3, requires_grad=True)
    b = jg.as_tensor(a, dtype=jg.float64)
    b.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]


def test_asarray():
    a = jg.ones(3)
    assert jg.asarray(a) is a
    for T in (jg, torch):
        g = T.ones(2, requires_grad=True)
        gc = T.asarray(g, copy=True)
        assert not gc.requires_grad and gc.grad_fn is None
        assert T.asarray(g) is g
        assert not T.asarray(g, dtype=T.float64).requires_grad
    c = jg.asarray(a, copy=True)
    assert c is not a and c.tolist() == a.tolist()
    c[0] = 7
    assert a[0].item() == 1
    same(jg.asarray([1, 2], dtype=jg.float64), torch.asarray([1, 2], dtype=torch.float64))
    same(jg.asarray([1, 2]), torch.asarray([1, 2]))
    n = np.ones(3)
    assert dname(jg.asarray(n).dtype) == dname(torch.asarray(n).dtype)
    j = jg.asarray([1.0], requires_grad=True)
    assert j.requires_grad and j.is_leaf
    raises_like(lambda: jg.asarray(3, requires_grad=True),
                lambda: torch.asarray(3, requires_grad=True))
    with pytest.raises(ValueError):
        jg.asarray([1, 2], copy=False)


@pytest.mark.parametrize("s,dt", [(3, None), (3, "int64"), (True, None), (2.5, "float64"),
                                  (-1, "int32"), (1, "bool")])
def test_scalar_tensor(s, dt):
    j = jg.scalar_tensor(s, dtype=getattr(jg, dt) if dt else None)
    t = torch.scalar_tensor(s, dtype=getattr(torch, dt) if dt else None)
    same(j, t)


def test_scalar_tensor_more():
    same(jg.scalar_tensor(jg.tensor(2.0)), torch.scalar_tensor(torch.tensor(2.0)))
    assert jg.scalar_tensor(1.0, requires_grad=True).requires_grad
    raises_like(lambda: jg.scalar_tensor("a"), lambda: torch.scalar_tensor("a"))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32"])
def test_tensor_new(dt):
    jb, tb = jg.ones(2, dtype=getattr(jg, dt)), torch.ones(2, dtype=getattr(torch, dt))
    for args in [(2, 3), ([1, 2],), (), ((2, 3),), ([[1, 0]],)]:
        j, t = jb.new(*args), tb.new(*args)
        assert dname(j.dtype) == dname(t.dtype) and tuple(j.shape) == tuple(t.shape)
        if args and not isinstance(args[0], int):
            same(j, t)
    x = jg.ones(2, dtype=getattr(jg, dt))
    assert jb.new(x).tolist() == x.tolist()


def test_tensor_new_errors():
    raises_like(lambda: jg.ones(2, dtype=jg.float64).new(jg.ones(2)),
                lambda: torch.ones(2, dtype=torch.float64).new(torch.ones(2)))
    with pytest.raises(TypeError):
        jg.ones(2).new(2, dtype=jg.float64)


# ----------------------------------------------------------------------- RNG


def test_rng_state_roundtrip():
    jg.manual_seed(123)
    assert jg.initial_seed() == 123
    jg.rand(5)
    state = jg.get_rng_state()
    a = (jg.rand(4), jg.randn(3, dtype=jg.float64), jg.randint(0, 100, (5,)))
    jg.rand(7)
    jg.set_rng_state(state)
    b = (jg.rand(4), jg.randn(3, dtype=jg.float64), jg.randint(0, 100, (5,)))
    for x, y in zip(a, b):
        assert x.tolist() == y.tolist()
    # the initial seed travels with the state
    jg.manual_seed(5)
    jg.set_rng_state(state)
    assert jg.initial_seed() == 123


def test_rng_state_with_generator_installed():
    g = jg.Generator().manual_seed(9)
    jg.manual_seed(1)
    state = jg.get_rng_state()
    jg.rand(3, generator=g)  # draws from g leave the global state alone
    assert jg.get_rng_state().tolist() == state.tolist()


def test_rng_state_errors():
    raises_like(lambda: jg.set_rng_state([1, 2]), lambda: torch.set_rng_state([1, 2]))
    with pytest.raises(TypeError, match="RNG state"):
        jg.set_rng_state(jg.tensor([1.0, 2.0]))


def test_seed():
    s = jg.seed()
    assert isinstance(s, int) and jg.initial_seed() == s
    a = jg.rand(3)
    jg.manual_seed(s)
    assert jg.rand(3).tolist() == a.tolist()


# ------------------------------------------------------------ inference_mode


def test_inference_mode():
    x = jg.ones(2, requires_grad=True)
    assert not jg.is_inference_mode_enabled()
    with jg.inference_mode():
        assert jg.is_inference_mode_enabled() and not jg.is_grad_enabled()
        y = x * 2
        assert not y.requires_grad
        with jg.inference_mode(False):
            assert not jg.is_inference_mode_enabled() and jg.is_grad_enabled()
        assert jg.is_inference_mode_enabled()
    assert not jg.is_inference_mode_enabled() and jg.is_grad_enabled()
    assert not x.is_inference() and not jg.is_inference(x)

    @jg.inference_mode()
    def f(v):
        return v * 2

    tf = torch.inference_mode()(lambda v: v * 2)
    assert not f(x).requires_grad
    assert not tf(torch.ones(1, requires_grad=True)).requires_grad
    assert f.__name__ == "f"
    assert jg.is_grad_enabled()
    for T in (jg, torch):  # inference_mode(False) enables grad, as PyTorch's
        with T.no_grad():
            with T.inference_mode(mode=False):
                assert T.is_grad_enabled() and not T.is_inference_mode_enabled()
            assert not T.is_grad_enabled()
    with pytest.raises(ValueError):
        with jg.inference_mode():
            raise ValueError
    assert jg.is_grad_enabled() and not jg.is_inference_mode_enabled()


# ----------------------------------------------------------- Tensor methods


VIEW_CASES = [
    ("squeeze_", (1, 3, 1), ()),
    ("squeeze_", (1, 3, 1), (0,)),
    ("squeeze_", (1, 3, 1), (-1,)),
    ("unsqueeze_", (2, 3), (0,)),
    ("unsqueeze_", (2, 3), (-1,)),
    ("t_", (2, 3), ()),
    ("t_", (3,), ()),
    ("transpose_", (2, 3, 4), (0, 2)),
    ("swapdims_", (2, 3, 4), (0, 1)),
    ("swapaxes_", (2, 3, 4), (2, 1)),
]


@pytest.mark.parametrize("name,shape,args", VIEW_CASES)
def test_inplace_view_values(name, shape, args):
    n = int(np.prod(shape))
    j = jg.arange(float(n)).reshape(shape)
    t = torch.arange(float(n)).reshape(shape)
    rj, rt = getattr(j, name)(*args), getattr(t, name)(*args)
    assert rj is j and rt is t
    same(j, t)
    assert j.stride() == t.stride()
    j.add_(1)  # still the same storage as before
    t.add_(1)
    same(j, t)


@pytest.mark.parametrize("name,shape,args", VIEW_CASES)
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_inplace_view_grad(name, shape, args, dt):
    n = int(np.prod(shape))
    outs = []
    for T in (jg, torch):
        x = T.arange(float(n), dtype=getattr(T, dt)).reshape(shape).requires_grad_()
        y = x * 2
        getattr(y, name)(*args)
        w = T.arange(float(n), dtype=getattr(T, dt)).reshape(tuple(y.shape)) + 1
        (y * w).sum().backward()
        outs.append((y, x.grad))
    same(outs[0][0], outs[1][0])
    same(outs[0][1], outs[1][1])


def test_inplace_view_leaf_errors():
    raises_like(lambda: jg.ones(1, 2, requires_grad=True).squeeze_(),
                lambda: torch.ones(1, 2, requires_grad=True).squeeze_())
    raises_like(lambda: jg.ones(2, 3, 4).t_(), lambda: torch.ones(2, 3, 4).t_())
    raises_like(lambda: jg.ones(2, 3).transpose_(0, 2), lambda: torch.ones(2, 3).transpose_(0, 2))
    x = jg.ones(1, 2, requires_grad=True)
    with jg.no_grad():
        x.squeeze_()
    assert tuple(x.shape) == (2,) and x.requires_grad and x.is_leaf


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((7, 3), True), ((7, 3), False),
                                        ((3, 7), True), ((2, 2, 2), False), ((4, 4), True),
                                        ((5, 4), True), ((0, 3), False)])
@pytest.mark.parametrize("dt", ["float32", "float64", "int64"])
def test_fill_diagonal(shape, wrap, dt):
    j = jg.zeros(shape, dtype=getattr(jg, dt)).fill_diagonal_(5, wrap)
    t = torch.zeros(shape, dtype=getattr(torch, dt)).fill_diagonal_(5, wrap)
    same(j, t)
    same(jg.ones(shape).fill_diagonal_(-1.5, wrap=wrap),
         torch.ones(shape).fill_diagonal_(-1.5, wrap=wrap))


def test_fill_diagonal_grad_and_errors():
    grads = []
    for T in (jg, torch):
        w = T.arange(12.0).reshape(4, 3).requires_grad_()
        v = w * 1
        v.fill_diagonal_(0, wrap=True)
        (v * v).sum().backward()
        grads.append(w.grad)
    same(*grads)
    raises_like(lambda: jg.zeros(3).fill_diagonal_(1), lambda: torch.zeros(3).fill_diagonal_(1))
    raises_like(lambda: jg.zeros(2, 3, 2).fill_diagonal_(1),
                lambda: torch.zeros(2, 3, 2).fill_diagonal_(1))
    raises_like(lambda: jg.zeros(2, 2, requires_grad=True).fill_diagonal_(1),
                lambda: torch.zeros(2, 2, requires_grad=True).fill_diagonal_(1))


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32"])
def test_random_(dt):
    jg.manual_seed(0)
    x = jg.zeros(4000, dtype=getattr(jg, dt)).random_(10)
    v = np.array(x.tolist())
    assert x.dtype is getattr(jg, dt)
    assert v.min() == 0 and v.max() == 9 and np.all(v == np.round(v))
    assert abs(v.mean() - 4.5) < 0.2
    v = np.array(jg.zeros(4000, dtype=getattr(jg, dt)).random_(3, 7).tolist())
    assert set(v.tolist()) == {3, 4, 5, 6}
    v = np.array(jg.zeros(4000, dtype=getattr(jg, dt)).random_(to=4).tolist())
    assert set(v.tolist()) == {0, 1, 2, 3}
    v = np.array(jg.zeros(2000, dtype=getattr(jg, dt)).random_().tolist())
    top = {"float32": 2 ** 24, "float64": 2 ** 53, "int64": 2 ** 63 - 1, "int32": 2 ** 31 - 1}[dt]
    assert v.min() >= 0 and v.max() <= top and v.max() > top / 2


def test_random_bool_and_errors():
    v = jg.zeros(200, dtype=jg.bool).random_().tolist()
    assert set(v) == {True, False}
    raises_like(lambda: jg.zeros(5).random_(5, 2), lambda: torch.zeros(5).random_(5, 2))
    raises_like(lambda: jg.zeros(5).random_(-5), lambda: torch.zeros(5).random_(-5))
    raises_like(lambda: jg.zeros(5).random_(0), lambda: torch.zeros(5).random_(0))
    v = jg.zeros(100).random_(2, None).tolist()
    assert min(v) >= 2 and max(v) > 1000


def test_random_generator_reproducible():
    a = jg.zeros(10).random_(100, generator=jg.Generator().manual_seed(3))
    b = jg.zeros(10).random_(100, generator=jg.Generator().manual_seed(3))
    assert a.tolist() == b.tolist()


N = 40000


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_exponential_(dt):
    jg.manual_seed(1)
    v = np.array(jg.zeros(N, dtype=getattr(jg, dt)).exponential_(2.0).tolist())
    assert v.min() >= 0
    assert abs(v.mean() - 0.5) < 0.02 and abs(v.std() - 0.5) < 0.02
    v = np.array(jg.zeros(N, dtype=getattr(jg, dt)).exponential_().tolist())
    assert abs(v.mean() - 1.0) < 0.04


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_cauchy_log_normal_(dt):
    jg.manual_seed(2)
    v = np.array(jg.zeros(N, dtype=getattr(jg, dt)).cauchy_(1.0, 2.0).tolist())
    q = np.quantile(v, [0.25, 0.5, 0.75])
    np.testing.assert_allclose(q, [-1.0, 1.0, 3.0], atol=0.1)
    v = np.array(jg.zeros(N, dtype=getattr(jg, dt)).log_normal_(0.5, 0.25).tolist())
    lv = np.log(v)
    assert abs(lv.mean() - 0.5) < 0.01 and abs(lv.std() - 0.25) < 0.01
    v = np.array(jg.zeros(N, dtype=getattr(jg, dt)).log_normal_().tolist())
    assert abs(np.log(v).mean() - 1.0) < 0.05 and abs(np.log(v).std() - 2.0) < 0.05


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32"])
def test_geometric_(dt):
    jg.manual_seed(3)
    x = jg.zeros(N, dtype=getattr(jg, dt)).geometric_(0.25)
    assert x.dtype is getattr(jg, dt)
    v = np.array(x.tolist())
    assert v.min() == 1 and np.all(v == np.round(v))
    assert abs(v.mean() - 4.0) < 0.1  # 1 / p
    assert abs(np.mean(v == 1) - 0.25) < 0.01


def test_distribution_errors():
    cases = [lambda T: T.zeros(3).exponential_(-1),
             lambda T: T.zeros(3, dtype=T.int64).exponential_(),
             lambda T: T.zeros(3, dtype=T.int32).cauchy_(),
             lambda T: T.zeros(3).log_normal_(1, 0),
             lambda T: T.zeros(3, dtype=T.int64).log_normal_(),
             lambda T: T.zeros(3).geometric_(0),
             lambda T: T.zeros(3).geometric_(1.5),
             lambda T: T.ones(3, requires_grad=True).exponential_()]
    for c in cases:
        raises_like(lambda: c(jg), lambda: c(torch))


def test_distribution_fill_on_non_leaf():
    for T in (jg, torch):
        x = T.ones(3, requires_grad=True)
        y = x * 2
        y.exponential_()
        (y * 3).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0]


RESIZES = [((2, 3), (3, 2)), ((2, 3), (4,)), ((2, 3), (2, 3)), ((6,), (2, 2)), ((2, 3), (0,))]


@pytest.mark.parametrize("src,dst", RESIZES)
def test_resize_(src, dst):
    j = jg.arange(float(np.prod(src))).reshape(src)
    t = torch.arange(float(np.prod(src))).reshape(src)
    assert j.resize_(*dst) is j
    t.resize_(*dst)
    same(j, t)
    assert j.stride() == t.stride()


def test_resize_grow_and_views():
    j, t = jg.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    j.resize_(2, 4)
    t.resize_(2, 4)
    assert tuple(j.shape) == (2, 4) and j.reshape(-1)[:6].tolist() == t.reshape(-1)[:6].tolist()
    for T in (jg, torch):
        pass
    j, t = jg.zeros(2, 3).t(), torch.zeros(2, 3).t()
    assert j.resize_(3, 2).stride() == t.resize_(3, 2).stride()
    j, t = jg.arange(6.0).reshape(2, 3).t(), torch.arange(6.0).reshape(2, 3).t()
    j.resize_(6)
    t.resize_(6)
    same(j, t)
    j, t = jg.arange(6.0).reshape(2, 3)[:, 1], torch.arange(6.0).reshape(2, 3)[:, 1]
    j.resize_(2)
    t.resize_(2)
    same(j, t)
    assert j.stride() == t.stride()
    j, t = jg.zeros(2, 3), torch.zeros(2, 3)
    same(j.resize_as_(jg.ones(6)), t.resize_as_(torch.ones(6)))
    j.resize_((3, 2))
    assert tuple(j.shape) == (3, 2)


def test_resize_errors():
    raises_like(lambda: jg.zeros(2, 3, requires_grad=True).resize_(3, 2),
                lambda: torch.zeros(2, 3, requires_grad=True).resize_(3, 2))
    raises_like(lambda: jg.zeros(2, 3, requires_grad=True).resize_(2, 3),
                lambda: torch.zeros(2, 3, requires_grad=True).resize_(2, 3))
    raises_like(lambda: (jg.zeros(2, 3, requires_grad=True) * 1).resize_(6),
                lambda: (torch.zeros(2, 3, requires_grad=True) * 1).resize_(6))


def test_predicates():
    for dt in DTYPES:
        assert jg.ones(2, dtype=getattr(jg, dt)).is_signed() == \
            torch.ones(2, dtype=getattr(torch, dt)).is_signed()
    assert jg.ones(2).is_cpu is True
    assert jg.ones(2).is_same_size(jg.ones(2)) and not jg.ones(2).is_same_size(jg.ones(1, 2))
    assert jg.is_nonzero(jg.tensor([1.0])) == torch.is_nonzero(torch.tensor([1.0]))
    assert jg.tensor([0.0]).is_nonzero() == torch.tensor([0.0]).is_nonzero()
    assert jg.tensor(False).is_nonzero() == torch.tensor(False).is_nonzero()
    assert jg.tensor(3).is_nonzero() == torch.tensor(3).is_nonzero()
    raises_like(lambda: jg.tensor([1.0, 2.0]).is_nonzero(),
                lambda: torch.tensor([1.0, 2.0]).is_nonzero())
    raises_like(lambda: jg.tensor([]).is_nonzero(), lambda: torch.tensor([]).is_nonzero())
    assert jg.ones(1).get_device() == torch.ones(1).get_device() == -1
    assert jg.get_device(jg.ones(1)) == -1
    x = jg.ones(2)
    assert x.pin_memory() is x and x.share_memory_() is x and not x.is_pinned()
    assert not x.is_inference()


@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 4), (1, 2, 3, 2)])
def test_matrix_transposes(shape):
    n = int(np.prod(shape))
    j, t = jg.arange(float(n)).reshape(shape), torch.arange(float(n)).reshape(shape)
    same(j.mT, t.mT)
    same(j.mH, t.mH)
    same(j.adjoint(), t.adjoint())
    same(jg.adjoint(j), torch.adjoint(t))
    if len(shape) == 2:
        same(j.H, t.H)
    else:
        raises_like(lambda: j.H, lambda: t.H)


def test_matrix_transposes_errors_and_grad():
    for f in (lambda T: T.ones(2).mT, lambda T: T.ones(2).mH, lambda T: T.ones(2).H,
              lambda T: T.ones(2).adjoint()):
        raises_like(lambda: f(jg), lambda: f(torch))
    same(jg.tensor(2.0).H, torch.tensor(2.0).H)
    grads = []
    for T in (jg, torch):
        x = T.arange(6.0, dtype=T.float64).reshape(2, 3).requires_grad_()
        w = T.arange(6.0, dtype=T.float64).reshape(3, 2)
        ((x.mT * w).sum() + (x.H * w * w).sum() + (x.adjoint() * 3 * w).sum()).backward()
        grads.append(x.grad)
    same(*grads)


@pytest.mark.skipif(not jg.HAS_COMPILER, reason="no compiler")
@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager(backend):
    def f(x):
        return (x.mT * 2).sum() + (x.adjoint() * x.mH).sum() + x.H.exp().sum()

    x = jg.arange(6.0).reshape(2, 3) * 0.1
    cf = jg.compile(f, backend=backend)
    assert cf(x).tolist() == f(x).tolist()
    xg = x.detach().requires_grad_()
    (g1,) = jg.autograd.grad(f(xg), [xg])
    xg2 = x.detach().requires_grad_()
    (g2,) = jg.autograd.grad(cf(xg2), [xg2])
    assert g1.tolist() == g2.tolist()


@pytest.mark.skipif(not jg.HAS_COMPILER, reason="no compiler")
@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_fill_diagonal(backend):
    def f(x):
        y = x * 1.5
        y.fill_diagonal_(-2.0, wrap=True)
        return (y * y).sum()

    for dt in (jg.float32, jg.float64):
        x = jg.arange(12.0, dtype=dt).reshape(4, 3) * 0.25
        cf = jg.compile(f, backend=backend)
        xa, xb = x.detach().requires_grad_(), x.detach().requires_grad_()
        ra, rb = f(xa), cf(xb)
        assert ra.tolist() == rb.tolist()
        (ga,) = jg.autograd.grad(ra, [xa])
        (gb,) = jg.autograd.grad(rb, [xb])
        assert ga.tolist() == gb.tolist()


@pytest.mark.skipif(not jg.HAS_COMPILER, reason="no compiler")
@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_inplace_views_run_eagerly(backend, capfd):
    """A tensor that changes identity cannot be traced: the call is a graph
    break and gives the eager results."""
    def f(x):
        y = x * 2
        y.unsqueeze_(0)
        y.transpose_(0, 2)
        y.squeeze_(1)
        return (y * 3).sum() + y[0, 0]

    def g(x):
        z = jg.arange(6.0).reshape(2, 3)
        z.resize_(3, 2)
        return x.t() + z

    x = jg.arange(6.0).reshape(2, 3)
    for fn in (f, g):
        cf = jg.compile(fn, backend=backend)
        xa, xb = x.detach().requires_grad_(), x.detach().requires_grad_()
        ra, rb = fn(xa), cf(xb)
        assert ra.tolist() == rb.tolist()
        (ga,) = jg.autograd.grad(ra.sum(), [xa])
        (gb,) = jg.autograd.grad(rb.sum(), [xb])
        assert ga.tolist() == gb.tolist()
    capfd.readouterr()


def test_default_generator_and_random_module():
    g = jg.default_generator
    assert isinstance(g, jg.Generator)
    assert jg.random.default_generator is g
    jg.manual_seed(17)
    assert g.initial_seed() == 17 == jg.random.initial_seed()
    state = g.get_state()
    a = jg.rand(3)
    assert g.set_state(state) is g
    assert jg.rand(3).tolist() == a.tolist()
    assert g.manual_seed(17) is g
    assert jg.rand(3, generator=g).tolist() == a.tolist()  # draws from the global state
    assert jg.random.manual_seed(17) is g
    assert jg.rand(3).tolist() == a.tolist()
    jg.random.set_rng_state(state)
    assert jg.random.get_rng_state().tolist() == state.tolist()
    s = g.seed()
    assert jg.initial_seed() == s


def test_fork_rng():
    jg.manual_seed(2)
    with jg.random.fork_rng():
        inside = jg.rand(4)
    assert jg.rand(4).tolist() == inside.tolist()
    jg.manual_seed(2)
    with jg.random.fork_rng(enabled=False):
        jg.rand(4)
    assert jg.rand(4).tolist() != inside.tolist()
    for T in (jg, torch):  # restored also when the block raises
        T.manual_seed(3)
        with pytest.raises(KeyError):
            with T.random.fork_rng():
                T.rand(2)
                raise KeyError
        first = T.rand(2)
        T.manual_seed(3)
        assert T.rand(2).tolist() == first.tolist()


@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32"])
def test_randint_like(dt):
    x = jg.ones(2000, dtype=getattr(jg, dt))
    v = jg.randint_like(x, 5)
    assert v.dtype is x.dtype and tuple(v.shape) == (2000,)
    assert set(v.tolist()) == {0, 1, 2, 3, 4}
    v = jg.randint_like(x, 2, 5, dtype=jg.int64)
    assert v.dtype is jg.int64 and set(v.tolist()) == {2, 3, 4}
    assert set(jg.randint_like(x, high=3).tolist()) == {0, 1, 2}
    t = torch.ones(3, dtype=getattr(torch, dt))
    assert dname(jg.randint_like(jg.ones(3, dtype=getattr(jg, dt)), 4).dtype) == \
        dname(torch.randint_like(t, 4).dtype)
    a = jg.randint_like(x, 9, generator=jg.Generator().manual_seed(1))
    b = jg.randint_like(x, 9, generator=jg.Generator().manual_seed(1))
    assert a.tolist() == b.tolist()


def test_randint_like_errors_and_grad():
    raises_like(lambda: jg.randint_like(jg.ones(3), 5, 2),
                lambda: torch.randint_like(torch.ones(3), 5, 2))
    raises_like(lambda: jg.randint_like(jg.ones(3), 0),
                lambda: torch.randint_like(torch.ones(3), 0))
    assert jg.randint_like(jg.ones(3), 4, requires_grad=True).requires_grad


def test_real_only_predicates():
    for dt in DTYPES:
        j, t = jg.ones(2, dtype=getattr(jg, dt)), torch.ones(2, dtype=getattr(torch, dt))
        for name in ("is_complex", "is_conj", "is_neg"):
            assert getattr(j, name)() == getattr(t, name)()
            assert getattr(jg, name)(j) == getattr(torch, name)(t)
        assert j.resolve_conj() is j and jg.resolve_neg(j) is j
        assert t.resolve_conj() is t and torch.resolve_neg(t) is t


def test_normal_forms():
    jg.manual_seed(5)
    v = np.array(jg.normal(2.0, 3.0, size=(40000,)).tolist())
    assert abs(v.mean() - 2.0) < 0.05 and abs(v.std() - 3.0) < 0.05
    for args, kw in [((2.0, 3.0, (2,)), {}), ((2.0, 3.0, (2,)), {"dtype": "float64"})]:
        jkw = {k: getattr(jg, v) for k, v in kw.items()}
        tkw = {k: getattr(torch, v) for k, v in kw.items()}
        j, t = jg.normal(*args, **jkw), torch.normal(*args, **tkw)
        assert dname(j.dtype) == dname(t.dtype) and tuple(j.shape) == tuple(t.shape)
    for mk in (lambda T: (T.normal(T.zeros(2, dtype=T.float64)),),
               lambda T: (T.normal(0.0, T.ones(2)),),
               lambda T: (T.normal(T.zeros(2, 1), T.ones(3)),),
               lambda T: (T.normal(T.zeros(3), 2.0),)):
        (j,), (t,) = mk(jg), mk(torch)
        assert dname(j.dtype) == dname(t.dtype) and tuple(j.shape) == tuple(t.shape)
    m = jg.tensor([0.0, 10.0, -5.0], dtype=jg.float64)
    s = jg.tensor([1.0, 0.5, 2.0], dtype=jg.float64)
    draws = np.array([jg.normal(m, s).tolist() for _ in range(4000)])
    np.testing.assert_allclose(draws.mean(0), [0.0, 10.0, -5.0], atol=0.1)
    np.testing.assert_allclose(draws.std(0), [1.0, 0.5, 2.0], atol=0.1)
    a = jg.normal(m, s, generator=jg.Generator().manual_seed(2))
    b = jg.normal(m, s, generator=jg.Generator().manual_seed(2))
    assert a.tolist() == b.tolist()


def test_normal_grad_and_errors():
    grads = []
    for T in (jg, torch):
        m = T.zeros(3, requires_grad=True)
        s = T.ones(3, requires_grad=True)
        y = T.normal(m, s)
        assert y.requires_grad
        (y * 2).sum().backward()
        grads.append((m.grad.tolist(), s.grad.tolist()))
    assert grads[0] == grads[1] == ([0.0] * 3, [0.0] * 3)
    for c in (lambda T: T.normal(T.zeros(2), T.ones(3)),
              lambda T: T.normal(T.zeros(2), -1.0),
              lambda T: T.normal(0.0, -1.0, (2,)),
              lambda T: T.normal(T.zeros(2), T.tensor([1.0, -1.0]))):
        raises_like(lambda: c(jg), lambda: c(torch))
    with pytest.raises(TypeError, match="normal"):
        jg.normal(2.0, 3.0)


@pytest.mark.parametrize("args,kw", [((0, 2, 3), {}),
                                     ((0, 2, 3), {"base": 2, "dtype": "float64"}),
                                     ((0, 2, 3), {"dtype": "int64"}), ((-1, 1.5, 6), {}),
                                     ((1, 1, 1), {}), ((0, 3, 0), {}), ((2, 0, 5), {"base": 3.0})])
def test_logspace(args, kw):
    jkw = {k: getattr(jg, v) if k == "dtype" else v for k, v in kw.items()}
    tkw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
    j, t = jg.logspace(*args, **jkw), torch.logspace(*args, **tkw)
    assert dname(j.dtype) == dname(t.dtype) and tuple(j.shape) == tuple(t.shape)
    np.testing.assert_allclose(np.array(j.tolist(), dtype=float),
                               np.array(t.tolist(), dtype=float),
                               rtol=1e-6)
    raises_like(lambda: jg.logspace(0, 1, -1), lambda: torch.logspace(0, 1, -1))


@pytest.mark.parametrize("args,kw", [((0, 3), {}), ((0, 1, 0.25), {"dtype": "float64"}),
                                     ((3, -1, -1), {}), ((1, 2, 0.3), {}),
                                     ((0, 4, 2), {"dtype": "int64"})])
def test_range(args, kw):
    jkw = {k: getattr(jg, v) if k == "dtype" else v for k, v in kw.items()}
    tkw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        j = jg.range(*args, **jkw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.range(*args, **tkw)
    assert dname(j.dtype) == dname(t.dtype) and tuple(j.shape) == tuple(t.shape)
    np.testing.assert_allclose(np.array(j.tolist()), np.array(t.tolist()), rtol=1e-6)


def test_range_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_like(lambda: jg.range(1, 0), lambda: torch.range(1, 0))
        with pytest.raises(TypeError):
            jg.range(5)
        with pytest.raises(TypeError):
            torch.range(5)


@pytest.mark.parametrize("fn", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("args", [(3, 3), (3, 4, 1), (3, 4, -1), (4, 3, 2), (0, 4), (5, 2, -7),
                                  (2, 5, 9), (1, 1)])
def test_tri_indices(fn, args):
    j, t = getattr(jg, fn)(*args), getattr(torch, fn)(*args)
    same(j, t)
    same(getattr(jg, fn)(*args, dtype=jg.int32), getattr(torch, fn)(*args, dtype=torch.int32))


def test_tri_indices_errors():
    for fn in ("tril_indices", "triu_indices"):
        raises_like(lambda: getattr(jg, fn)(-1, 4), lambda: getattr(torch, fn)(-1, 4))
        raises_like(lambda: getattr(jg, fn)(2, -4), lambda: getattr(torch, fn)(2, -4))


def test_layout_predicates():
    j, t = jg.ones(2), torch.ones(2)
    for name in ("is_sparse", "is_quantized", "is_meta", "is_mkldnn", "is_nested",
                 "is_sparse_csr", "is_vulkan", "is_xpu", "is_ipu", "is_mps", "is_ort"):
        assert getattr(j, name) is getattr(t, name) is False
    assert j.is_shared() is t.is_shared() is False


@pytest.mark.skipif(not jg.HAS_COMPILER, reason="no compiler")
@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_normal(backend):
    def f(m, s):
        return (jg.normal(m, s) * m).sum() + jg.normal(0.5, 2.0, size=(3,)).sum()

    m0 = jg.tensor([0.5, -1.0, 2.0], dtype=jg.float64)
    s0 = jg.tensor([1.0, 0.5, 2.0], dtype=jg.float64)
    cf = jg.compile(f, backend=backend)
    for _ in range(2):
        ma, sa = m0.detach().requires_grad_(), s0.detach().requires_grad_()
        mb, sb = m0.detach().requires_grad_(), s0.detach().requires_grad_()
        jg.manual_seed(11)
        ra = f(ma, sa)
        jg.manual_seed(11)
        rb = cf(mb, sb)
        assert ra.tolist() == rb.tolist()
        ga = jg.autograd.grad(ra, [ma, sa])
        gb = jg.autograd.grad(rb, [mb, sb])
        assert [g.tolist() for g in ga] == [g.tolist() for g in gb]


def _flag_trace(T):
    out = [T.are_deterministic_algorithms_enabled(),
           T.is_deterministic_algorithms_warn_only_enabled(), T.get_deterministic_debug_mode()]
    T.use_deterministic_algorithms(True)
    out += [T.are_deterministic_algorithms_enabled(), T.get_deterministic_debug_mode()]
    T.use_deterministic_algorithms(True, warn_only=True)
    out += [T.is_deterministic_algorithms_warn_only_enabled(), T.get_deterministic_debug_mode()]
    for mode in ("error", 0, "warn", 2, "default", 1, 0):
        T.set_deterministic_debug_mode(mode)
        out += [T.get_deterministic_debug_mode(), T.are_deterministic_algorithms_enabled(),
                T.is_deterministic_algorithms_warn_only_enabled()]
    T.use_deterministic_algorithms(False)
    out.append(T.get_float32_matmul_precision())
    for p in ("high", "medium", "highest"):
        T.set_float32_matmul_precision(p)
        out.append(T.get_float32_matmul_precision())
    out.append(T.is_warn_always_enabled())
    T.set_warn_always(True)
    out.append(T.is_warn_always_enabled())
    T.set_warn_always(False)
    out.append(T.is_storage(T.ones(1)))
    return out


def test_global_flags():
    assert _flag_trace(jg) == _flag_trace(torch)
    for c in (lambda T: T.use_deterministic_algorithms("x"),
              lambda T: T.set_deterministic_debug_mode("x"),
              lambda T: T.set_deterministic_debug_mode(3),
              lambda T: T.set_float32_matmul_precision(1)):
        raises_like(lambda: c(jg), lambda: c(torch))
    with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
        jg.set_float32_matmul_precision("x")
    assert jg.get_float32_matmul_precision() == "highest"


def test_builtin_range_not_shadowed():
    """jitgrad.range exists, yet the package's own code still finds the
    builtin range (Tensor.T, iteration)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuple(jg.ones(2, 3).T.shape) == (3, 2)
        assert [v.item() for v in jg.arange(3)] == [0, 1, 2]
    from jitgrad import range as jrange

    assert jrange is jg.range
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        jg.nope
