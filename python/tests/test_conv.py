"""Convolution and pooling against PyTorch 1.13: F.conv2d / max_pool2d /
avg_pool2d values and every gradient over a grid of shapes, strides,
paddings, dilations and groups (f64 tight, f32 looser), PyTorch's errors,
compiled == eager bitwise (interp, c), nn.Conv2d / MaxPool2d / AvgPool2d /
Dropout2d."""
import itertools

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _np(t):
    return np.array(t.detach().tolist())


def _pair(shape, dtype, seed):
    """The same random values as a jitgrad and a torch tensor, both leaves
    requiring grad."""
    a = np.random.RandomState(seed).standard_normal(shape)
    jd = jitgrad.float64 if dtype == "f64" else jitgrad.float32
    td = torch.float64 if dtype == "f64" else torch.float32
    return (jitgrad.tensor(a.tolist(), dtype=jd, requires_grad=True),
            torch.tensor(a, dtype=td, requires_grad=True))


def _tol(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype == "f64" else dict(rtol=1e-4, atol=1e-4)


# (x shape, w shape, stride, padding, dilation, groups, bias)
CONV_CASES = [
    ((2, 3, 7, 6), (4, 3, 3, 3), 1, 0, 1, 1, True),
    ((2, 3, 7, 6), (4, 3, 3, 2), 2, 1, 1, 1, False),
    ((1, 4, 8, 9), (6, 2, 3, 3), (2, 1), (1, 2), (2, 1), 2, True),
    ((3, 4, 6, 6), (4, 1, 3, 3), 1, 1, 1, 4, True),  # depthwise
    ((2, 2, 5, 5), (3, 2, 1, 1), 1, 0, 1, 1, True),  # 1x1: the image is the column matrix
    ((2, 3, 9, 8), (2, 3, 2, 4), 1, "same", (1, 2), 1, True),  # even kernel: one more at the end
    ((2, 3, 9, 8), (2, 3, 3, 3), 1, "valid", 1, 1, False),
    ((6, 6, 5), (4, 3, 2, 2), (1, 2), 1, 1, 2, True),  # unbatched
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_conv2d_values_and_gradients(case, dtype):
    xs, ws, stride, padding, dilation, groups, bias = case
    x, tx = _pair(xs, dtype, 1)
    w, tw = _pair(ws, dtype, 2)
    b, tb = _pair((ws[0],), dtype, 3) if bias else (None, None)
    y = F.conv2d(x, w, b, stride, padding, dilation, groups)
    ty = TF.conv2d(tx, tw, tb, stride, padding, dilation, groups)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(_np(y), _np(ty), **_tol(dtype))
    g, tg = _pair(tuple(ty.shape), dtype, 4)
    (y * g.detach()).sum().backward()
    (ty * tg.detach()).sum().backward()
    for a, ta in ((x, tx), (w, tw), (b, tb)):
        if a is not None:
            np.testing.assert_allclose(_np(a.grad), _np(ta.grad), **_tol(dtype))


def test_conv2d_double_backward():
    x, tx = _pair((2, 4, 6, 5), "f64", 5)
    w, tw = _pair((4, 2, 3, 2), "f64", 6)
    b, tb = _pair((4,), "f64", 7)
    res = []
    for T, X, W, B in ((jitgrad, x, w, b), (torch, tx, tw, tb)):
        y = T.nn.functional.conv2d(X, W, B, stride=(2, 1), padding=1, groups=2)
        gx, gw = T.autograd.grad((y * y).sum(), (X, W), create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        res.append([_np(t) for t in (X.grad, W.grad, B.grad)])
    for a, ta in zip(*res):
        np.testing.assert_allclose(a, ta, rtol=1e-9, atol=1e-9)


def test_conv2d_grad_fn_names():
    x = jitgrad.randn(1, 2, 5, 5, requires_grad=True)
    w = jitgrad.randn(3, 2, 3, 3, requires_grad=True)
    assert type(F.conv2d(x, w).grad_fn).__name__ == "ConvolutionBackward0"
    m = F.max_pool2d(x, 2)
    assert type(m.grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"
    assert type(F.avg_pool2d(x, 2).grad_fn).__name__ == "AvgPool2DBackward0"


# (x shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 6, 6), 2, None, 0, 1, False),
    ((2, 3, 7, 5), 3, 2, 1, 1, True),
    ((1, 2, 9, 8), (3, 2), (2, 1), (1, 0), (2, 1), False),
    ((2, 5, 5), 2, 2, 1, 1, True),  # unbatched
    ((2, 2, 7, 7), 3, 1, 1, 2, False),
]


@pytest.mark.parametrize("case", MAX_CASES, ids=[str(i) for i in range(len(MAX_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_max_pool2d(case, dtype):
    xs, k, s, p, d, ceil = case
    x, tx = _pair(xs, dtype, 8)
    y, idx = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
    ty, tidx = TF.max_pool2d(tx, k, s, p, d, ceil_mode=ceil, return_indices=True)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_array_equal(_np(y), _np(ty))
    np.testing.assert_array_equal(_np(idx), _np(tidx))
    g, tg = _pair(tuple(ty.shape), dtype, 9)
    (y * g.detach()).sum().backward()
    (ty * tg.detach()).sum().backward()
    np.testing.assert_allclose(_np(x.grad), _np(tx.grad), **_tol(dtype))


# (x shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CASES = [
    ((2, 3, 6, 6), 2, None, 0, False, True, None),
    ((2, 3, 7, 5), 3, 2, 1, True, True, None),
    ((2, 3, 7, 5), 3, 2, 1, True, False, None),
    ((1, 2, 9, 8), (3, 2), (2, 1), (1, 0), False, False, None),
    ((2, 5, 5), 2, 1, 1, False, True, 3),  # unbatched, divisor_override
]


@pytest.mark.parametrize("case", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_avg_pool2d(case, dtype):
    xs, k, s, p, ceil, incl, div = case
    x, tx = _pair(xs, dtype, 10)
    y = F.avg_pool2d(x, k, s, p, ceil, incl, div)
    ty = TF.avg_pool2d(tx, k, s, p, ceil, incl, div)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(_np(y), _np(ty), **_tol(dtype))
    g, tg = _pair(tuple(ty.shape), dtype, 11)
    (y * g.detach()).sum().backward()
    (ty * tg.detach()).sum().backward()
    np.testing.assert_allclose(_np(x.grad), _np(tx.grad), **_tol(dtype))


def test_create_graph_gradient_requires_grad_like_torch():
    """Regression (fuzzer, conv feature): with create_graph, the input's
    gradient through conv2d / avg_pool2d / max_pool2d with a constant
    weight requires grad as PyTorch's does (its backward functions take the
    input as an operand), and the input then gets PyTorch's second-order
    gradient: none through conv, zeros through avg_pool, the gathered
    gradient through max_pool."""
    cases = [("conv", lambda T, x, w: T.nn.functional.conv2d(x, w, padding=1)),
             ("avg", lambda T, x, w: T.nn.functional.avg_pool2d(x, 3, 1, 1)),
             ("max", lambda T, x, w: T.nn.functional.max_pool2d(x, 3, 1, 1))]
    for name, f in cases:
        got = []
        for T in (jitgrad, torch):
            x = T.tensor(np.random.RandomState(17).standard_normal((1, 1, 5, 4)).tolist(),
                         dtype=T.float64, requires_grad=True)
            w = T.tensor(np.random.RandomState(18).standard_normal((1, 1, 3, 3)).tolist(),
                         dtype=T.float64)
            y = f(T, x, w)
            (g,) = T.autograd.grad((y * y).sum() if name == "max" else y.sum(), x,
                                   create_graph=True)
            (g * g).sum().backward()
            got.append((g.requires_grad, type(g.grad_fn).__name__,
                        None if x.grad is None else _np(x.grad)))
        (jr, jn, jgrad), (tr, tn, tgrad) = got
        assert (jr, jn) == (tr, tn), name
        assert (jgrad is None) == (tgrad is None), name
        if tgrad is not None:
            np.testing.assert_allclose(jgrad, tgrad, rtol=1e-10, atol=1e-12)
    # the weight's gradient requires grad through the weight alone
    for T in (jitgrad, torch):
        x = T.ones(1, 1, 4, 4, dtype=T.float64)
        w = T.ones(1, 1, 3, 3, dtype=T.float64, requires_grad=True)
        (gw,) = T.autograd.grad(T.nn.functional.conv2d(x, w).sum(), w, create_graph=True)
        assert gw.requires_grad and type(gw.grad_fn).__name__ == "ConvolutionBackwardBackward0"


ADAPTIVE_CASES = [((2, 3, 7, 5), (3, 2)), ((2, 3, 7, 5), (7, 5)), ((3, 8, 6), (4, 4)),
                  ((1, 2, 5, 9), (None, 4)), ((2, 2, 4, 4), 1), ((1, 2, 3, 3), (5, 2))]


@pytest.mark.parametrize("case", ADAPTIVE_CASES, ids=[str(i) for i in range(len(ADAPTIVE_CASES))])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_adaptive_avg_pool2d(case, dtype):
    xs, osz = case
    x, tx = _pair(xs, dtype, 19)
    y = F.adaptive_avg_pool2d(x, osz)
    ty = TF.adaptive_avg_pool2d(tx, osz)
    assert tuple(y.shape) == tuple(ty.shape)
    assert type(y.grad_fn).__name__ == type(ty.grad_fn).__name__
    np.testing.assert_allclose(_np(y), _np(ty), **_tol(dtype))
    g, tg = _pair(tuple(ty.shape), dtype, 20)
    (y * g.detach()).sum().backward()
    (ty * tg.detach()).sum().backward()
    np.testing.assert_allclose(_np(x.grad), _np(tx.grad), **_tol(dtype))
    assert repr(jitgrad.nn.AdaptiveAvgPool2d(osz)) == repr(torch.nn.AdaptiveAvgPool2d(osz))


def test_adaptive_avg_pool2d_double_backward_and_errors():
    x, tx = _pair((2, 3, 7, 5), "f64", 21)
    res = []
    for T, X in ((jitgrad, x), (torch, tx)):
        y = T.nn.functional.adaptive_avg_pool2d(X, (3, 2))
        (gx,) = T.autograd.grad((y * y).sum(), (X,), create_graph=True)
        (gx * gx).sum().backward()
        res.append(_np(X.grad))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-10, atol=1e-12)
    for f in (lambda T: T.nn.functional.adaptive_avg_pool2d(T.zeros(2, 3, 4, 4), (3,)),
              lambda T: T.nn.functional.adaptive_avg_pool2d(T.zeros(2, 3, 4, 4), (-1, 2)),
              lambda T: T.nn.functional.adaptive_avg_pool2d(T.zeros(5, 5), 2),
              lambda T: T.nn.functional.adaptive_avg_pool2d(T.zeros(2, 3, 4, 4,
                                                                    dtype=T.int64), 2)):
        with pytest.raises(RuntimeError) as te:
            f(torch)
        with pytest.raises(RuntimeError) as je:
            f(jitgrad)
        assert str(je.value) == str(te.value).split("\n")[0]


def test_pools_double_backward():
    x, tx = _pair((2, 3, 6, 5), "f64", 12)
    res = []
    for T, X in ((jitgrad, x), (torch, tx)):
        y = T.nn.functional.max_pool2d(X, 3, 2, 1) * T.nn.functional.avg_pool2d(X, 3, 2, 1)
        (gx,) = T.autograd.grad((y * y).sum(), (X,), create_graph=True)
        (gx * gx).sum().backward()
        res.append(_np(X.grad))
    np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-9)


ERRORS = [
    lambda T: T.nn.functional.conv2d(T.zeros(5, 5), T.zeros(4, 3, 3, 3)),
    lambda T: T.nn.functional.conv2d(T.zeros(1, 2, 3, 5, 5), T.zeros(4, 3, 3, 3)),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 1, 5, 5), T.zeros(4, 3, 3, 3)),
    lambda T: T.nn.functional.conv2d(T.zeros(1, 5, 5), T.zeros(4, 3, 3, 3)),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 2, 2), T.zeros(4, 3, 3, 3)),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), T.zeros(3)),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), stride=0),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), padding=-1),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), dilation=0),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), groups=2),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 4, 5, 5), T.zeros(3, 2, 3, 3), groups=2),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), groups=0),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), padding="same",
                                     stride=2),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), padding="foo"),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3), stride=(1, 1, 1)),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3, dtype=T.float64)),
    lambda T: T.nn.functional.conv2d(T.zeros(2, 3, 5, 5), T.zeros(4, 3, 3, 3),
                                     T.zeros(4, dtype=T.float64)),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 5, 5), 3, padding=2),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 2, 2), 3),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 5, 5), 0),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 5, 5), 0, stride=1),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 5, 5), 2, padding=-1),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 5, 5), 2, dilation=0),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 5, 5, dtype=T.int64), 2),
    lambda T: T.nn.functional.max_pool2d(T.zeros(2, 3, 0, 5), 2),
    lambda T: T.nn.functional.avg_pool2d(T.zeros(2, 3, 5, 5), 3, padding=2),
    lambda T: T.nn.functional.avg_pool2d(T.zeros(2, 3, 2, 2), 3),
    lambda T: T.nn.functional.avg_pool2d(T.zeros(2, 3, 5, 5), 2, stride=0),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_like_torch(i):
    with pytest.raises(RuntimeError) as te:
        ERRORS[i](torch)
    with pytest.raises(RuntimeError) as je:
        ERRORS[i](jitgrad)
    assert str(je.value) == str(te.value).split("\n")[0]


def test_bad_input_leaves_state_intact():
    x = jitgrad.randn(2, 3, 5, 5, requires_grad=True)
    w = jitgrad.randn(4, 2, 3, 3, requires_grad=True)
    with pytest.raises(RuntimeError):
        F.conv2d(x, w)
    assert x.grad is None and w.grad is None and x.is_leaf and x._version == 0
    y = F.conv2d(x[:, :2], w)  # a good call afterwards works
    y.sum().backward()
    assert tuple(x.grad.shape) == (2, 3, 5, 5) and _np(x.grad)[:, 2].max() == 0


def _cnn(x, w1, b1, w2, w3):
    h = F.relu(F.conv2d(x, w1, b1, padding=1))
    h = F.max_pool2d(h, 2)
    h = F.avg_pool2d(h, 2, stride=1)
    g = F.conv2d(x, w2, None, stride=2, dilation=(1, 3))
    h2 = F.conv2d(h, w3, None, padding="same", groups=2)
    h2 = F.avg_pool2d(h2, 3, stride=1, padding=1, count_include_pad=False)
    h2 = h2 + F.adaptive_avg_pool2d(h2, (2, 2)).sum()
    return (h * g).sum() + (h2 * h2).sum()


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_equals_eager_bitwise(backend, dtype):
    dt = getattr(jitgrad, dtype)
    jitgrad.manual_seed(3)
    shapes = [(3, 4, 8, 9), (4, 4, 3, 3), (4,), (4, 4, 3, 2), (4, 2, 2, 3)]
    ins = [jitgrad.randn(*s, dtype=dt, requires_grad=True) for s in shapes]
    out = _cnn(*ins)
    out.backward()
    grads = [t.grad.clone() for t in ins]
    for t in ins:
        t.grad = None
    fn = jitgrad.compile(_cnn, backend=backend, fullgraph=True)
    cout = fn(*ins)
    cout.backward()
    assert _np(cout).tobytes() == _np(out).tobytes()
    for t, g in zip(ins, grads):
        assert _np(t.grad).tobytes() == _np(g).tobytes()
    assert fn._jitgrad_compiled.fallbacks() == 0


def test_conv2d_module_like_torch():
    m = jitgrad.nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1)
    tm = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1)
    assert repr(m) == repr(tm)
    assert list(m.state_dict().keys()) == list(tm.state_dict().keys()) == ["weight", "bias"]
    assert tuple(m.weight.shape) == tuple(tm.weight.shape)
    # PyTorch's init bounds: weight within 1/sqrt(fan_in) (kaiming_uniform,
    # a=sqrt(5)), bias too
    bound = 1 / np.sqrt(3 * 3 * 3)
    assert np.abs(_np(m.weight)).max() <= bound and np.abs(_np(m.bias)).max() <= bound
    assert np.abs(_np(m.weight)).max() > bound / 2  # not all zeros
    for args, kw in (((2, 4, (3, 2)), dict(bias=False, dilation=2)),
                     ((4, 4, 3), dict(groups=2, padding="same"))):
        assert repr(jitgrad.nn.Conv2d(*args, **kw)) == repr(torch.nn.Conv2d(*args, **kw))
    m.load_state_dict({k: jitgrad.tensor(v.tolist()) for k, v in tm.state_dict().items()})
    x, tx = _pair((2, 3, 7, 7), "f32", 13)
    np.testing.assert_allclose(_np(m(x)), _np(tm(tx)), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        jitgrad.nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        jitgrad.nn.Conv2d(3, 4, 3, stride=2, padding="same")


def test_pool_modules_like_torch():
    for args, kw in (((2,), {}), ((3, 2, 1), dict(ceil_mode=True))):
        assert repr(jitgrad.nn.MaxPool2d(*args, **kw)) == repr(torch.nn.MaxPool2d(*args, **kw))
        assert repr(jitgrad.nn.AvgPool2d(*args, **kw)) == repr(torch.nn.AvgPool2d(*args, **kw))
    x, tx = _pair((2, 3, 7, 7), "f64", 14)
    y, i = jitgrad.nn.MaxPool2d(3, 2, 1, return_indices=True)(x)
    ty, ti = torch.nn.MaxPool2d(3, 2, 1, return_indices=True)(tx)
    np.testing.assert_array_equal(_np(y), _np(ty))
    np.testing.assert_array_equal(_np(i), _np(ti))
    np.testing.assert_allclose(_np(jitgrad.nn.AvgPool2d(2)(x)), _np(torch.nn.AvgPool2d(2)(tx)),
                               rtol=1e-12)


def test_dropout2d_zeroes_whole_channels():
    jitgrad.manual_seed(0)
    x = jitgrad.ones(8, 16, 3, 4, requires_grad=True)
    y = F.dropout2d(x, 0.5)
    v = _np(y).reshape(8, 16, 12)
    per_channel = v.min(axis=2) == v.max(axis=2)
    assert per_channel.all()
    assert set(np.unique(v)) <= {0.0, 2.0} and 0 < (v == 0).mean() < 1
    y.sum().backward()
    np.testing.assert_array_equal(_np(x.grad).reshape(8, 16, 12), v)
    m = jitgrad.nn.Dropout2d(0.5)
    m.eval()
    assert m(x) is x
    assert repr(m) == repr(torch.nn.Dropout2d(0.5))


def test_conv_loops_match_itertools_grid():
    """A coarse sweep: every combination of stride, padding, dilation over a
    kernel that only just fits, f64, forward and input gradient."""
    for s, p, d in itertools.product((1, 2, 3), (0, 1, 2), (1, 2)):
        x, tx = _pair((1, 2, 6, 7), "f64", 15)
        w, tw = _pair((3, 2, 3, 2), "f64", 16)
        if 6 + 2 * p < d * 2 + 1:
            continue
        y = F.conv2d(x, w, None, s, p, d)
        ty = TF.conv2d(tx, tw, None, s, p, d)
        np.testing.assert_allclose(_np(y), _np(ty), rtol=1e-10, atol=1e-10)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(_np(x.grad), _np(tx.grad), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(_np(w.grad), _np(tw.grad), rtol=1e-10, atol=1e-10)
