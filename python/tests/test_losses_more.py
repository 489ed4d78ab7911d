"""F.binary_cross_entropy(_with_logits), one_hot, pad, normalize,
cosine_similarity, logsigmoid, softsign, softmin, kl_div, huber_loss and their
modules against PyTorch 1.13: values and input gradients (f32 / f64, every
reduction, weights), PyTorch's errors, and compiled (interp) == eager bitwise."""
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
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(jg.tensor([0.5, 1.5]), jg.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"Target size \(torch.Size\(\[3\]\)\) must be the same "
                       r"as input size \(torch.Size\(\[2\]\)\)"):
        F.binary_cross_entropy_with_logits(x, jg.tensor([1.0, 0.0, 1.0]))
    for fn in (F.binary_cross_entropy, F.binary_cross_entropy_with_logits):
        with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
            fn(x, x, reduction="bogus")


def test_bce_compiled_equals_eager_bitwise(jg):
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
        got = jg.compile(prog, backend="interp", fullgraph=True)(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
