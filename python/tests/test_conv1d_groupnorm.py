"""F.conv1d / nn.Conv1d, F.group_norm / nn.GroupNorm and the 1-D pools
(max_pool1d, avg_pool1d, adaptive_avg_pool1d and their modules) against PyTorch
1.13: values and every gradient (f64 tight, f32 looser), PyTorch's errors
with its 1-D shapes, module repr / state_dict / init, compiled == eager
bitwise."""
import re

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _np(t):
    return np.array(t.detach().tolist())


def _pair(shape, dtype, seed):
    a = np.random.RandomState(seed).standard_normal(shape)
    jd = jitgrad.float64 if dtype == "f64" else jitgrad.float32
    td = torch.float64 if dtype == "f64" else torch.float32
    return (jitgrad.tensor(a.tolist(), dtype=jd, requires_grad=True),
            torch.tensor(a, dtype=td, requires_grad=True))


def _tol(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype == "f64" else dict(rtol=1e-4, atol=1e-4)


def _compare(jfn, tfn, shapes, dtype, seed=0):
    pairs = [_pair(s, dtype, seed + i) if s is not None else (None, None)
             for i, s in enumerate(shapes)]
    y = jfn(*[p[0] for p in pairs])
    ty = tfn(*[p[1] for p in pairs])
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(_np(y), _np(ty), **_tol(dtype))
    g, tg = _pair(tuple(ty.shape), dtype, 99)
    (y * g.detach()).sum().backward()
    (ty * tg.detach()).sum().backward()
    for a, ta in pairs:
        if a is not None:
            np.testing.assert_allclose(_np(a.grad), _np(ta.grad), **_tol(dtype))


# (x shape, w shape, stride, padding, dilation, groups, bias)
CONV1D_CASES = [
    ((2, 3, 10), (4, 3, 3), 1, 0, 1, 1, True),
    ((2, 3, 11), (4, 3, 4), 2, 1, 1, 1, False),
    ((1, 4, 12), (6, 2, 3), (3,), [2], (2,), 2, True),
    ((3, 4, 9), (4, 1, 3), 1, 1, 1, 4, True),  # depthwise
    ((2, 3, 9), (2, 3, 4), 1, "same", 2, 1, True),  # even dilated kernel: one more at the end
    ((2, 3, 9), (2, 3, 3), 1, "valid", 1, 1, False),
    ((6, 7), (4, 3, 2), 2, 1, 1, 2, True),  # unbatched
]


@pytest.mark.parametrize("case", CONV1D_CASES, ids=[str(i) for i in range(len(CONV1D_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_conv1d_values_and_gradients(case, dtype):
    xs, ws, stride, padding, dilation, groups, bias = case
    _compare(lambda x, w, b: F.conv1d(x, w, b, stride, padding, dilation, groups),
             lambda x, w, b: TF.conv1d(x, w, b, stride, padding, dilation, groups),
             [xs, ws, (ws[0],) if bias else None], dtype)


def _conv1d_errors(T):
    w = T.randn(4, 3, 3)
    f = T.nn.functional.conv1d
    return [
        lambda: f(T.randn(2, 3, 4, 5), w),
        lambda: f(T.randn(3), w),
        lambda: f(T.randn(2, 5, 10), w),
        lambda: f(T.randn(5, 10), w),  # unbatched: PyTorch's message shows [1, 5, 10]
        lambda: f(T.randn(2, 3, 2), w),
        lambda: f(T.randn(2, 3, 10), T.randn(4, 3, 3, 3)),
        lambda: f(T.randn(2, 3, 10), w, stride=0),
        lambda: f(T.randn(2, 3, 10), w, padding=-1),
        lambda: f(T.randn(2, 3, 10), w, dilation=0),
        lambda: f(T.randn(2, 3, 10), w, stride=(1, 2)),
        lambda: f(T.randn(2, 3, 10), w, padding="same", stride=2),
        lambda: f(T.randn(2, 3, 10), w, padding="foo"),
        lambda: f(T.randn(2, 3, 10), w, T.randn(3)),
        lambda: f(T.randn(2, 4, 10), T.randn(4, 2, 3), groups=3),
        lambda: f(T.randn(2, 3, 3), w, dilation=3, padding=1),
    ]


@pytest.mark.parametrize("i", range(len(_conv1d_errors(torch))))
def test_conv1d_errors_like_torch(i):
    with pytest.raises(Exception) as te:
        _conv1d_errors(torch)[i]()
    with pytest.raises(Exception) as je:
        _conv1d_errors(jitgrad)[i]()
    assert type(je.value) is type(te.value)
    assert str(je.value) == str(te.value).split("\n")[0]


def test_conv1d_module_like_torch():
    for args, kw in (((3, 8, 3), {}),
                     ((3, 8, 3), dict(stride=2, padding=1, dilation=2, bias=False)),
                     ((4, 4, (3,)), dict(padding="same", groups=2))):
        m, tm = jitgrad.nn.Conv1d(*args, **kw), torch.nn.Conv1d(*args, **kw)
        assert repr(m) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in m.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        bound = 1 / np.sqrt(args[0] // kw.get("groups", 1) * 3)
        for p in m.parameters():
            assert bound / 2 < np.abs(_np(p)).max() <= bound
        m.load_state_dict({k: jitgrad.tensor(v.tolist()) for k, v in tm.state_dict().items()})
        x, tx = _pair((2, args[0], 9), "f32", 13)
        np.testing.assert_allclose(_np(m(x)), _np(tm(tx)), rtol=1e-5, atol=1e-5)
    for kw, exc, msg in ((dict(groups=2), ValueError, "in_channels must be divisible by groups"),
                         (dict(padding="same", stride=2), ValueError,
                          "padding='same' is not supported for strided"),
                         (dict(padding="foo"), ValueError, "Invalid padding string 'foo'"),
                         (dict(padding_mode="foo"), ValueError,
                          "but got padding_mode='foo'")):
        with pytest.raises(exc) as te:
            torch.nn.Conv1d(3, 8, 3, **kw)
        with pytest.raises(exc) as je:
            jitgrad.nn.Conv1d(3, 8, 3, **kw)
        # PyTorch prints the choices from a set, in hash order
        assert _sorted_sets(str(je.value)) == _sorted_sets(str(te.value))
        assert msg in str(je.value)
    with pytest.raises(NotImplementedError, match="padding_mode='reflect'"):
        jitgrad.nn.Conv1d(3, 8, 3, padding_mode="reflect")


def _sorted_sets(msg):
    return re.sub(r"\{([^}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}",
                  msg)


# (input shape, num_groups, affine, eps)
GN_CASES = [
    ((2, 6, 5), 2, True, 1e-5),
    ((3, 6, 4, 5), 3, True, 1e-3),
    ((2, 6), 3, True, 1e-5),
    ((4, 4, 7), 1, False, 1e-5),  # one group: layer norm over (C, L)
    ((2, 4, 3), 4, True, 1e-5),  # one channel per group: instance norm
]


@pytest.mark.parametrize("case", GN_CASES, ids=[str(i) for i in range(len(GN_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_group_norm_values_and_gradients(case, dtype):
    shape, g, affine, eps = case
    c = shape[1]
    _compare(lambda x, w, b: F.group_norm(x, g, w, b, eps),
             lambda x, w, b: TF.group_norm(x, g, w, b, eps),
             [shape, (c,) if affine else None, (c,) if affine else None], dtype, seed=3)


def test_group_norm_weight_only_and_module():
    _compare(lambda x, w: F.group_norm(x, 2, w), lambda x, w: TF.group_norm(x, 2, w),
             [(2, 4, 3), (4,)], "f64")
    for args in ((2, 6), (3, 6, 1e-3, False)):
        m, tm = jitgrad.nn.GroupNorm(*args), torch.nn.GroupNorm(*args)
        assert repr(m) == repr(tm)
        assert list(m.state_dict()) == list(tm.state_dict())
        for k, v in tm.state_dict().items():
            assert _np(m.state_dict()[k]).tolist() == v.tolist()  # ones and zeros
        x, tx = _pair((3, 6, 4), "f32", 5)
        np.testing.assert_allclose(_np(m(x)), _np(tm(tx)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="^num_channels must be divisible by num_groups$"):
        jitgrad.nn.GroupNorm(2, 5)


def _gn_errors(T):
    f = T.nn.functional.group_norm
    return [
        lambda: f(T.randn(2, 5, 3), 2),
        lambda: f(T.randn(5), 1),
        lambda: f(T.randn(2, 6, 3), 2, T.randn(5)),
        lambda: f(T.randn(1, 6), 6),
        lambda: T.nn.GroupNorm(2, 6)(T.randn(2, 4, 3)),
    ]


@pytest.mark.parametrize("i", range(len(_gn_errors(torch))))
def test_group_norm_errors_like_torch(i):
    with pytest.raises(Exception) as te:
        _gn_errors(torch)[i]()
    with pytest.raises(Exception) as je:
        _gn_errors(jitgrad)[i]()
    assert type(je.value) is type(te.value)
    assert str(je.value) == str(te.value).split("\n")[0]


def _net(x, w1, b1, w2, gw, gb):
    h = F.relu(F.conv1d(x, w1, b1, padding=1))
    h = F.group_norm(h, 2, gw, gb)
    h = F.conv1d(h, w2, None, stride=2, padding="valid", groups=2)
    return (h * h).sum()


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_equals_eager_bitwise(backend, dtype):
    dt = getattr(jitgrad, dtype)
    jitgrad.manual_seed(3)
    shapes = [(3, 4, 11), (6, 4, 3), (6,), (4, 3, 2), (6,), (6,)]
    ins = [jitgrad.randn(*s, dtype=dt, requires_grad=True) for s in shapes]
    out = _net(*ins)
    out.backward()
    grads = [t.grad.clone() for t in ins]
    for t in ins:
        t.grad = None
    fn = jitgrad.compile(_net, backend=backend, fullgraph=True)
    cout = fn(*ins)
    cout.backward()
    assert _np(cout).tobytes() == _np(out).tobytes()
    for t, g in zip(ins, grads):
        assert _np(t.grad).tobytes() == _np(g).tobytes()
    assert fn._jitgrad_compiled.fallbacks() == 0


# (fn, x shape, args)
POOL1D_CASES = [
    ("max_pool1d", (2, 3, 9), (3,)),
    ("max_pool1d", (2, 3, 10), (3, 2, 1, 2, True)),
    ("max_pool1d", (3, 8), ([2], None, 1)),  # unbatched
    ("avg_pool1d", (2, 3, 9), (3,)),
    ("avg_pool1d", (2, 3, 10), (3, 2, 1, True, False)),
    ("avg_pool1d", (3, 8), (2,)),
    ("adaptive_avg_pool1d", (2, 3, 10), (4,)),
    ("adaptive_avg_pool1d", (3, 7), ((3,),)),
]


@pytest.mark.parametrize("case", POOL1D_CASES, ids=[str(i) for i in range(len(POOL1D_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_pool1d_values_and_gradients(case, dtype):
    fn, xs, args = case
    _compare(lambda x: getattr(F, fn)(x, *args), lambda x: getattr(TF, fn)(x, *args), [xs],
             dtype)


def test_max_pool1d_indices_and_modules_like_torch():
    x, tx = _pair((2, 3, 11), "f32", 7)
    for kw in (dict(), dict(stride=2, padding=1, dilation=2, ceil_mode=True)):
        v, i = F.max_pool1d(x, 3, return_indices=True, **kw)
        tv, ti = TF.max_pool1d(tx, 3, return_indices=True, **kw)
        assert _np(i).tolist() == ti.tolist() and _np(v).tolist() == _np(tv).tolist()
    for name, args in (("MaxPool1d", (3,)), ("MaxPool1d", (3, 2, 1, 2, False, True)),
                       ("AvgPool1d", (3,)), ("AvgPool1d", (3, 2, 1, True, False)),
                       ("AdaptiveAvgPool1d", (4,))):
        m, tm = getattr(jitgrad.nn, name)(*args), getattr(torch.nn, name)(*args)
        assert repr(m) == repr(tm)
        np.testing.assert_allclose(_np(m(x)), _np(tm(tx)), rtol=1e-6, atol=1e-6)


def _pool1d_errors(T):
    f = T.nn.functional
    return [
        lambda: f.max_pool1d(T.randn(2, 3, 4, 5), 2),
        lambda: f.max_pool1d(T.randn(3), 2),
        lambda: f.max_pool1d(T.randn(2, 3, 8), 3, padding=2),
        lambda: f.max_pool1d(T.randn(2, 3, 8), 0),
        lambda: f.max_pool1d(T.randn(2, 3, 8), (2, 3)),
        lambda: f.avg_pool1d(T.randn(2, 3, 4, 5), 2),
        lambda: f.avg_pool1d(T.randn(2, 3, 8), 3, padding=2),
        lambda: f.avg_pool1d(T.randn(2, 3, 2), 3),
        lambda: f.avg_pool1d(T.randn(2, 3, 8), (2, 3)),
        lambda: f.adaptive_avg_pool1d(T.randn(2, 3, 4, 5), 2),
        lambda: f.adaptive_avg_pool1d(T.randn(2, 3, 8), (2, 3)),
    ]


@pytest.mark.parametrize("i", range(len(_pool1d_errors(torch))))
def test_pool1d_errors_like_torch(i):
    with pytest.raises(Exception) as te:
        _pool1d_errors(torch)[i]()
    with pytest.raises(Exception) as je:
        _pool1d_errors(jitgrad)[i]()
    assert type(je.value) is type(te.value)
    assert str(je.value) == str(te.value).split("\n")[0]
