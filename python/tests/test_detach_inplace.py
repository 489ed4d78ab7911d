"""Tensor.detach_() against PyTorch 1.13: a computed tensor or a leaf
becomes a leaf without grad in place; views are refused with torch's text
and left intact; inside a compiled function the call breaks the graph and
equals eager mode."""
import pytest

import jitgrad

torch = pytest.importorskip("torch")


def _make(lib, kind):
    x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    return {
        "leaf": lambda: x,
        "computed": lambda: x * 2,
        "no_grad": lambda: lib.tensor([1.0, 2.0]),
        "detached": lambda: x.detach(),
        "view_of_computed": lambda: (x * 2)[1:],
        "view_of_leaf": lambda: x[0:2],
        "view_without_grad": lambda: lib.zeros(3)[0:2],
        "reshape_view": lambda: (x * 1).view(3, 1),
    }[kind]()


KINDS = ["leaf", "computed", "no_grad", "detached", "view_of_computed", "view_of_leaf",
         "view_without_grad", "reshape_view"]


@pytest.mark.parametrize("kind", KINDS)
def test_detach_inplace_as_torch(kind):
    res = []
    for lib in (torch, jitgrad):
        t = _make(lib, kind)
        try:
            r = t.detach_()
            res.append(("ok", r is t, t.requires_grad, t.is_leaf, t.grad_fn is None, t.tolist()))
        except RuntimeError as e:
            res.append(("error", str(e), t.requires_grad, t.grad_fn is None))
    assert res[1] == res[0]


def test_detach_inplace_keeps_recorded_history():
    """Ops recorded before detach_() still backpropagate through the old
    history; ops after it see a constant."""
    grads = []
    for lib in (torch, jitgrad):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        z = y + 1
        y.detach_()
        (z.sum() + (y * x).sum()).backward()
        grads.append(x.grad.tolist())
    assert grads[1] == grads[0] == [3.0 + 3.0, 3.0 + 6.0]


def test_detach_inplace_of_saved_tensor():
    """A tensor an op saved, detached afterwards: the op's backward still
    uses the saved value (PyTorch 1.13 fails an internal assert here)."""
    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = y * y
    y.detach_()
    z.sum().backward()
    assert x.grad.tolist() == [18.0, 36.0]


def test_detach_inplace_of_leaf_keeps_grad():
    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    assert x.detach_() is x
    assert not x.requires_grad and x.grad.tolist() == [2.0, 4.0]
    x.requires_grad_(True)  # a leaf again: it may require grad
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


@pytest.mark.parametrize("backend", ["interp"] + (["c"] if jitgrad.HAS_COMPILER else []))
def test_detach_inplace_in_compiled_function(backend):
    """detach_() inside a compiled function is a graph break: every call
    runs eagerly and equals eager mode (outputs and gradients); with
    fullgraph the call fails naming it."""

    def f(a):
        h = a * 2
        h.detach_()
        return h * a, h

    a = jitgrad.tensor([1.5, -2.0], requires_grad=True)
    eo, eh = f(a)
    eo.sum().backward()
    eg = a.grad.tolist()
    a.grad = None
    cf = jitgrad.compile(f, backend=backend)
    for _ in range(3):
        o, h = cf(a)
        assert o.tolist() == eo.tolist() and h.tolist() == eh.tolist()
        assert not h.requires_grad and h.is_leaf and o.requires_grad
        o.sum().backward()
        assert a.grad.tolist() == eg
        a.grad = None
    assert cf._jitgrad_compiled.fallbacks() == 3
    full = jitgrad.compile(f, backend=backend, fullgraph=True)
    with pytest.raises(RuntimeError, match=r"detach_\(\) inside a compiled program"):
        full(a)
