"""A leaf made by requires_grad_() on a view of a tensor that does not
require grad (reshape, view, transpose, slice, expand, a view of a view):
its first- and second-order gradients and its .grad are PyTorch's, eagerly
and through jitgrad.compile (compiled == eager, bitwise), also after an
in-place write of the view's base.  Regression: such a leaf, saved for
backward, became another leaf, so create_graph gradients through saved
tensors never reached it."""
import pytest

KINDS = {
    "reshape": lambda b: b.reshape(6),
    "view": lambda b: b.view(3, 2),
    "transpose": lambda b: b.t(),
    "slice": lambda b: b[:, 1:3],
    "view_of_view": lambda b: b[0:1].t(),
    "expand": lambda b: b[1:2].expand(4, 3),
    "clone": lambda b: b.clone(),  # not a view: the reference case
}


def close(a, b):
    return abs(a - b) <= 1e-12 * (1 + abs(b))


def flat(v):
    return [v] if isinstance(v, float) else [e for s in v for e in flat(s)]


def make(T, kind, written):
    base = T.tensor([[0.5, 2.0, -1.3], [0.7, -0.2, 1.1]], dtype=T.float64)
    w = KINDS[kind](base)
    w.requires_grad_(True)
    if written:  # the base (no grad) written afterwards: w stays the same leaf
        base.mul_(2.0)
    x = T.linspace(-1.0, 1.5, w.numel(), dtype=T.float64).reshape(w.shape)
    x.requires_grad_(True)
    return x, w


def penalty(T, x, w):
    f = (((x - x.mean(-1, keepdim=True)) * w).sin() + w * w * w).sum()
    gx, gw = T.autograd.grad(f, [x, w], create_graph=True)
    return (gx * gx).sum() + (gw * gw).sum(), gw


def grads(T, fn, kind, written):
    x, w = make(T, kind, written)
    assert w.is_leaf and w.requires_grad
    s, gw = fn(x, w)
    d = T.autograd.grad(s, [x, w], retain_graph=True)
    s.backward()  # .grad accumulates the same
    return [s.item(), gw.tolist(), d[0].tolist(), d[1].tolist(), x.grad.tolist(), w.grad.tolist()]


@pytest.mark.parametrize("written", [False, True])
@pytest.mark.parametrize("kind", list(KINDS))
def test_view_leaf_grads_match_torch(jg, torch, kind, written):
    got = grads(jg, lambda x, w: penalty(jg, x, w), kind, written)
    want = grads(torch, lambda x, w: penalty(torch, x, w), kind, written)
    for g, t in zip(got, want):
        g, t = flat(g), flat(t)
        assert len(g) == len(t) and all(close(a, b) for a, b in zip(g, t)), (g, t)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_view_leaf_grads_compiled_equal_eager(jg, kind, backend):
    eager = grads(jg, lambda x, w: penalty(jg, x, w), kind, False)
    cf = jg.compile(lambda x, w: penalty(jg, x, w), backend=backend)
    assert grads(jg, cf, kind, False) == eager


def test_view_leaf_issue_repro(jg, torch):
    def run(T, view):
        x = T.tensor([[0.3, -1.2], [0.7, 0.1]], dtype=T.float64, requires_grad=True)
        w = T.tensor([0.5, 2.0], dtype=T.float64)
        w = w.reshape(2) if view else w.clone()
        w.requires_grad_(True)
        f = (((x - x.mean(-1, keepdim=True)) * w).sin()).sum()
        gx, gw = T.autograd.grad(f, [x, w], create_graph=True)
        s = (gx * gx).sum() + (gw * gw).sum()
        return flat([v.tolist() for v in T.autograd.grad(s, [x, w])])

    want = run(torch, True)
    for view in (True, False):
        got = run(jg, view)
        assert all(close(a, b) for a, b in zip(got, want)), (got, want)


def test_view_leaf_in_place_refused(jg):
    base = jg.zeros(2, 3, dtype=jg.float64)
    w = base.reshape(6)
    w.requires_grad_(True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.mul_(2.0)
