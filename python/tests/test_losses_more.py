"""F.binary_cross_entropy(_with_logits), one_hot, pad, normalize,
cosine_similarity, logsigmoid, softsign, softmin, kl_div, huber_loss and their
modules against PyTorch 1.13: values and input gradients (f32 / f64, every
reduction, weights), PyTorch's errors, and compiled (interp, c) == eager bitwise."""
import pytest

DTYPES = [("float64", 1e-12), ("float32", 2e-5)]
LOGITS = [-200.0, -30.0, -3.0, -1.0, -0.25, 0.0, 0.0, 0.5, 1.0, 2.5, 30.0, 200.0]
PROBS = [1e-6, 0.01, 0.2, 0.3, 0.5, 0.5, 0.6, 0.75, 0.9, 0.99, 0.5, 1 - 1e-6]
TARGETS = [0.0, 1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.25, 1.0, 0.0, 0.9, 1.0]
WEIGHTS = [0.5 + 0.125 * i for i in range(12)]


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    return len(a) == len(b) and all(
        (x == y) or abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def pair(jg, torch, data, dtype, grad=True, shape=None):
    j = jg.tensor(data, dtype=getattr(jg, dtype))
    t = torch.tensor(data, dtype=getattr(torch, dtype))
    if shape is not None:
        j, t = j.reshape(*shape), t.reshape(*shape)
    if grad:
        j.requires_grad_(True)
        t.requires_grad_(True)
    return j, t


def check(jy, ty, jx, tx, tol):
    """Values equal within tol; then input gradients under one seed."""
    import jitgrad
    import torch
    assert tuple(jy.shape) == tuple(ty.shape)
    assert close(vals(jy), vals(ty), tol), (vals(jy), vals(ty))
    seed = [0.5 + 0.25 * i for i in range(ty.numel())]
    jy.backward(jitgrad.tensor(seed, dtype=jy.dtype).reshape(*jy.shape))
    ty.backward(torch.tensor(seed, dtype=ty.dtype).reshape(ty.shape))
    for j, t in zip(jx, tx):
        assert close(vals(j.grad), vals(t.grad), tol), (vals(j.grad), vals(t.grad))


# ---- group 1: binary cross entropy
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_bce_matches_torch(jg, torch, dtype, tol, reduction, weighted):
    jx, tx = pair(jg, torch, PROBS, dtype, shape=(3, 4))
    jt, tt = pair(jg, torch, TARGETS, dtype, grad=False, shape=(3, 4))
    kw = {"reduction": reduction}
    if weighted:  # a weight broadcast over the rows
        kw_j = dict(kw, weight=jg.tensor(WEIGHTS[:4], dtype=getattr(jg, dtype)))
        kw_t = dict(kw, weight=torch.tensor(WEIGHTS[:4], dtype=getattr(torch, dtype)))
    else:
        kw_j = kw_t = kw
    jy = jg.nn.functional.binary_cross_entropy(jx, jt, **kw_j)
    ty = torch.nn.functional.binary_cross_entropy(tx, tt, **kw_t)
    check(jy, ty, [jx], [tx], tol)
    jm = jg.nn.BCELoss(weight=kw_j.get("weight"), reduction=reduction)
    tm = torch.nn.BCELoss(weight=kw_t.get("weight"), reduction=reduction)
    assert repr(jm) == repr(tm)
    assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
    assert close(vals(jm(jx, jt)), vals(tm(tx, tt)), tol)


def test_bce_clamps_log_at_minus_100(jg, torch):
    # log(0) is clamped at -100, as PyTorch's; the gradient stays finite
    x = [0.0, 1.0, 0.0, 1.0, 1e-45, 0.5]
    t = [0.0, 0.0, 1.0, 1.0, 1.0, 0.5]
    for dtype in ("float32", "float64"):
        jx, tx = pair(jg, torch, x, dtype)
        jy = jg.nn.functional.binary_cross_entropy(jx, jg.tensor(t, dtype=getattr(jg, dtype)),
                                                   reduction="none")
        ty = torch.nn.functional.binary_cross_entropy(
            tx, torch.tensor(t, dtype=getattr(torch, dtype)), reduction="none")
        assert close(vals(jy), vals(ty), 1e-6), (vals(jy), vals(ty))
        jy.sum().backward()
        assert all(g == g and abs(g) != float("inf") for g in vals(jx.grad))


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted,pos", [(False, False), (True, False), (False, True),
                                          (True, True)])
def test_bce_with_logits_matches_torch(jg, torch, dtype, tol, reduction, weighted, pos):
    jx, tx = pair(jg, torch, LOGITS, dtype, shape=(3, 4))
    jt, tt = pair(jg, torch, TARGETS, dtype, grad=False, shape=(3, 4))
    kj, kt = {"reduction": reduction}, {"reduction": reduction}
    if weighted:
        kj["weight"] = jg.tensor(WEIGHTS, dtype=getattr(jg, dtype)).reshape(3, 4)
        kt["weight"] = torch.tensor(WEIGHTS, dtype=getattr(torch, dtype)).reshape(3, 4)
    if pos:  # one per class (the last dim)
        kj["pos_weight"] = jg.tensor([0.5, 1.0, 2.0, 3.0], dtype=getattr(jg, dtype))
        kt["pos_weight"] = torch.tensor([0.5, 1.0, 2.0, 3.0], dtype=getattr(torch, dtype))
    jy = jg.nn.functional.binary_cross_entropy_with_logits(jx, jt, **kj)
    ty = torch.nn.functional.binary_cross_entropy_with_logits(tx, tt, **kt)
    check(jy, ty, [jx], [tx], tol)
    jm, tm = jg.nn.BCEWithLogitsLoss(**kj), torch.nn.BCEWithLogitsLoss(**kt)
    assert repr(jm) == repr(tm)
    assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
    assert close(vals(jm(jx, jt)), vals(tm(tx, tt)), tol)
    # torch.binary_cross_entropy_with_logits takes ATen's reduction enum
    enum = {"none": 0, "mean": 1, "sum": 2}[reduction]
    jz = jg.binary_cross_entropy_with_logits(jx, jt, kj.get("weight"), kj.get("pos_weight"),
                                             enum)
    tz = torch.binary_cross_entropy_with_logits(tx, tt, kt.get("weight"), kt.get("pos_weight"),
                                                enum)
    assert close(vals(jz), vals(tz), tol)


def test_bce_errors_match_torch(jg, torch):
    F = jg.nn.functional
    x = jg.tensor([0.5, 0.25])
    with pytest.raises(ValueError, match=r"Using a target size \(torch.Size\(\[3\]\)\) that is "
                       r"different to the input size \(torch.Size\(\[2\]\)\) is deprecated"):
        F.binary_cross_entropy(x, jg.tensor([1.0, 0.0, 1.0]))
    with pytest.raises(RuntimeError):  # weight must expand to the target's shape
        F.binary_cross_entropy(x, x, weight=jg.ones(2, 1))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(jg.tensor([0.5, 1.5]), jg.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"Target size \(torch.Size\(\[3\]\)\) must be the same "
                       r"as input size \(torch.Size\(\[2\]\)\)"):
        F.binary_cross_entropy_with_logits(x, jg.tensor([1.0, 0.0, 1.0]))
    for fn in (F.binary_cross_entropy, F.binary_cross_entropy_with_logits):
        with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
            fn(x, x, reduction="bogus")


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_bce_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    F = jg.nn.functional
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(LOGITS, dtype=dtype, requires_grad=True)
        t = jg.tensor(TARGETS, dtype=dtype)
        w = jg.tensor(WEIGHTS, dtype=dtype)

        def prog(x):
            a = F.binary_cross_entropy_with_logits(x, t, w, pos_weight=w * 2)
            b = F.binary_cross_entropy(x.sigmoid(), t, reduction="sum")
            return a + b * 0.5

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        got = jg.compile(prog, backend=backend, fullgraph=True)(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)


# ---- group 2: functional helpers, kl_div, huber_loss
@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("name,kw", [("logsigmoid", {}), ("softsign", {}),
                                     ("softmin", {"dim": 1}), ("softmin", {"dim": 0}),
                                     ("normalize", {}), ("normalize", {"p": 1.0, "dim": 0}),
                                     ("normalize", {"p": 3.0, "dim": -1, "eps": 1e-3})])
def test_unary_helpers_match_torch(jg, torch, dtype, tol, name, kw):
    jx, tx = pair(jg, torch, LOGITS, dtype, shape=(3, 4))
    if name == "normalize":  # a zero row: the norm is clamped at eps
        jx, tx = pair(jg, torch, [0.0] * 4 + LOGITS[4:], dtype, shape=(3, 4))
    jy = getattr(jg.nn.functional, name)(jx, **kw)
    ty = getattr(torch.nn.functional, name)(tx, **kw)
    check(jy, ty, [jx], [tx], tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("dim,eps,shapes", [(1, 1e-8, ((3, 4), (3, 4))),
                                            (0, 1e-8, ((3, 4), (3, 4))),
                                            (-1, 0.5, ((3, 4), (1, 4))),
                                            (1, 1e-8, ((2, 3, 2), (2, 3, 2))),
                                            (1, 1e-8, ((3, 3), (3, 3)))])
def test_cosine_similarity_matches_torch(jg, torch, dtype, tol, dim, eps, shapes):
    n1 = 1
    for s in shapes[0]:
        n1 *= s
    n2 = 1
    for s in shapes[1]:
        n2 *= s
    # leading zeros: norms clamped at eps (PyTorch's gradient there too), and
    # in the [3, 3] case an all-zero row
    a = [0.0, 0.0, 0.0] + [0.1 * i - 0.3 for i in range(n1 - 3)]
    b = [0.5 - 0.07 * i * i for i in range(n2)]
    jx, tx = pair(jg, torch, a, dtype, shape=shapes[0])
    jz, tz = pair(jg, torch, b, dtype, shape=shapes[1])
    jy = jg.nn.functional.cosine_similarity(jx, jz, dim, eps)
    ty = torch.nn.functional.cosine_similarity(tx, tz, dim, eps)
    check(jy, ty, [jx, jz], [tx, tz], tol * 10)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("delta", [1.0, 0.5, 2.5])
def test_huber_matches_torch(jg, torch, dtype, tol, reduction, delta):
    a = [0.0, 0.2, -0.5, 0.5, 1.0, -1.0, 2.5, -2.5, 3.0, 10.0, -0.1, 1.7]
    jx, tx = pair(jg, torch, a, dtype, shape=(3, 4))
    jt, tt = pair(jg, torch, [0.0] * 12, dtype, grad=False, shape=(3, 4))
    jy = jg.nn.functional.huber_loss(jx, jt, reduction=reduction, delta=delta)
    ty = torch.nn.functional.huber_loss(tx, tt, reduction=reduction, delta=delta)
    check(jy, ty, [jx], [tx], tol)  # |d| == delta included: PyTorch's gradient there
    jm, tm = jg.nn.HuberLoss(reduction, delta), torch.nn.HuberLoss(reduction, delta)
    assert repr(jm) == repr(tm)
    assert close(vals(jm(jx, jt)), vals(tm(tx, tt)), tol)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values "
                       "for delta."):
        jg.nn.functional.huber_loss(jx, jt, delta=0.0)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(jg, torch, dtype, tol, reduction, log_target):
    jx, tx = pair(jg, torch, LOGITS, dtype, shape=(3, 4))
    jx2, tx2 = jx.log_softmax(1), tx.log_softmax(1)
    # a zero probability: 0 * log(0) counts as 0
    t = [0.0, 0.25, 0.25, 0.5, 0.1, 0.2, 0.3, 0.4, 1.0, 0.0, 0.0, 0.0]
    if log_target:
        t = [-0.5 * i for i in range(12)]
    jt, tt = pair(jg, torch, t, dtype, grad=False, shape=(3, 4))
    jy = jg.nn.functional.kl_div(jx2, jt, reduction=reduction, log_target=log_target)
    ty = torch.nn.functional.kl_div(tx2, tt, reduction=reduction, log_target=log_target)
    check(jy, ty, [jx], [tx], tol)
    jm = jg.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    tm = torch.nn.KLDivLoss(reduction=reduction, log_target=log_target)
    assert repr(jm) == repr(tm)
    assert close(vals(jm(jx2, jt)), vals(tm(tx2, tt)), tol)


def test_one_hot_matches_torch(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    for data, n in (([0, 2, 1, 2], -1), ([[0, 3], [1, 1]], 5), ([3], -1), (2, 4)):
        jy, ty = F.one_hot(jg.tensor(data), n), TF.one_hot(torch.tensor(data), n)
        assert jy.dtype == jg.int64
        assert tuple(jy.shape) == tuple(ty.shape)
        assert vals(jy) == vals(ty)
    with pytest.raises(RuntimeError, match="Class values must be non-negative."):
        F.one_hot(jg.tensor([0, -1]), 3)
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes."):
        F.one_hot(jg.tensor([0, 3]), 3)
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor."):
        F.one_hot(jg.tensor([0.0, 1.0]))
    with pytest.raises(RuntimeError, match="Can not infer total number of classes from empty "
                       "tensor."):
        F.one_hot(jg.tensor([], dtype=jg.int64))
    assert tuple(F.one_hot(jg.tensor([], dtype=jg.int64), 3).shape) == (0, 3)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("pad,value", [((1, 2), 0.0), ((0, 0, 2, 1), -1.5), ((1, -1, -1, 2), 3.0),
                                       ((1, 1, 1, 1), 0.5), ((-2, 0), None)])
def test_pad_matches_torch(jg, torch, dtype, pad, value):
    jx, tx = pair(jg, torch, LOGITS, dtype, shape=(3, 4))
    kw = {} if value is None else {"value": value}
    jy = jg.nn.functional.pad(jx, pad, **kw)
    ty = torch.nn.functional.pad(tx, pad, **kw)
    check(jy, ty, [jx], [tx], 0.0)


def test_pad_errors(jg):
    F = jg.nn.functional
    x = jg.ones(2, 3)
    with pytest.raises(AssertionError, match="Padding length must be divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(AssertionError, match="Padding length too large"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError, match="resulted in a negative output size"):
        F.pad(x, (-2, -2))
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode foo"):
        F.pad(x, (1, 1), mode="foo")  # (the other modes: test_nn_pad_shuffle.py)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_helpers_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    F = jg.nn.functional
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(LOGITS, dtype=dtype, requires_grad=True)
        t = jg.tensor(PROBS, dtype=dtype).reshape(3, 4)
        z = jg.tensor(WEIGHTS, dtype=dtype).reshape(3, 4)

        def prog(x):
            h = x.reshape(3, 4) * 0.25
            out = F.logsigmoid(h).sum() + F.softsign(h).sum() + F.softmin(h, 1)[0].sum()
            out = out + F.normalize(h).sum() + F.cosine_similarity(h, z).sum()
            out = out + F.kl_div(h.log_softmax(1), t, reduction="batchmean")
            out = out + F.huber_loss(h, z, delta=0.5) + F.pad(h, (1, 2, -1, 0), value=2.0).sum()
            return out * F.one_hot(jg.tensor([1, 0]), 2)[0].sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        got = jg.compile(prog, backend=backend, fullgraph=True)(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
