"""Fuzz seeds 2501017 and 2501930: a program run in pieces (a value read
splits it, docs/compiler.md "Graph breaks") makes a view of a tensor of its
own (a clone), then writes that tensor in place and returns the view or
uses it.  The view's history is rebased on the written tensor (PyTorch's
CopySlices / AsStridedBackward); the compiled call's gradients are bitwise
eager's and match PyTorch's.

Regression: a piece output that is a view kept the value it had when it
was made, so its gradient skipped the write (x.grad 1.25 where eager and
PyTorch give 0.000375)."""
import pytest


def prog(T, read_between, use_after):
    def f(x, w):
        s = 1.0 if float(x.detach().sum()) > 0 else -2.0
        v1 = x * s
        v2 = v1 / (v1 * v1 + 1.0)
        y = v1.clone()
        v = y[0:2]
        if read_between and float(w.detach().sum()) > 100:
            v = v * 0.0
        y.sub_(v2.contiguous())
        return (v * w[1:3]) if use_after else v

    return f


def run(T, backend, read_between, use_after):
    out = []
    for k in range(3):
        x = T.tensor([0.5 - k, -1.25, 2.0, 0.75 * k], requires_grad=True)
        w = T.tensor([0.25, -1.5, 0.625 + k, 3.0], requires_grad=True)
        f = prog(T, read_between, use_after)
        if backend is not None:
            f = T.compile(f, backend=backend)
        v = f(x, w)
        (v * T.tensor([-0.625, 1.5])).sum().backward()
        out.append((v.tolist(), x.grad.tolist(), None if w.grad is None else w.grad.tolist()))
    return out


CASES = [(r, u) for r in (False, True) for u in (False, True)]


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("read_between,use_after", CASES)
def test_rebased_view_grads_bitwise_eager(jg, backend, read_between, use_after):
    assert run(jg, backend, read_between, use_after) == run(jg, None, read_between, use_after)


@pytest.mark.parametrize("read_between,use_after", CASES)
def test_rebased_view_grads_match_torch(jg, torch, read_between, use_after):
    got = run(jg, "interp", read_between, use_after)
    want = run(torch, None, read_between, use_after)
    for g, e in zip(got, want):
        for a, b in zip(g, e):
            assert (a is None) == (b is None)
            assert a is None or a == pytest.approx(b, rel=1e-5, abs=1e-6)
