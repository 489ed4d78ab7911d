"""Tensors a custom Function reaches through an object argument are lifted
into the compiled call as extra slots, but in eager mode they are no inputs
of the call's node.  So nothing before them is part of the backward graph
through the call: an earlier custom Function there must not run its
backward on zeros (fuzz seed 710138), and the eager rerun of a create_graph
backward must give them no edge either (fuzz seed 151717)."""
import pytest

BACKENDS = ["interp", "c"]


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def seed_710138(T, mode):
    class F0(T.autograd.Function):
        @staticmethod
        def forward(ctx, k0, k1, a2, k3):
            ctx.save_for_backward(a2, k0.t, k0.t)
            return a2

        @staticmethod
        def backward(ctx, g0):
            s0, s1, s2 = ctx.saved_tensors
            return None, None, g0 - s2, None  # not linear in g0

    C0 = T.tensor([[1.37, -0.378, 1.572, -0.794]], requires_grad=True)

    def fn(x0):
        v1 = T.where(C0 > x0, C0, x0)
        return F0.apply(Box(t=v1), None, C0, True)

    if mode != "eager":
        fn = T.compile(fn, backend=mode)
    x = T.tensor([1.387, -1.317, 1.686, -1.411], requires_grad=True)
    o = fn(x)
    o.sum().backward(retain_graph=True)
    o2 = fn(o)
    (g,) = T.autograd.grad(o2.sum(), [C0])
    return [g.tolist(), C0.grad.tolist(), None if x.grad is None else x.grad.tolist()]


def seed_151717(T, mode):
    class F0(T.autograd.Function):
        @staticmethod
        def forward(ctx, a0, k1):
            ctx.save_for_backward(a0, k1.t)
            return k1.t  # a tensor of the object, returned

        @staticmethod
        def backward(ctx, g0):
            s0, s1 = ctx.saved_tensors
            return s0, None

    def fn(x0):
        v5 = F0.apply(x0, Box(t=x0))
        return F0.apply(x0, Box(t=-v5))

    if mode != "eager":
        fn = T.compile(fn, backend=mode)
    x = T.tensor([1.387, -1.317, 1.686, -1.411], requires_grad=True)
    y = fn(x)
    (g,) = T.autograd.grad((y * 0.5).sum(), [x], create_graph=True)
    (g * g).sum().backward()
    return [g.tolist(), x.grad.tolist()]


@pytest.mark.parametrize("prog", [seed_710138, seed_151717])
@pytest.mark.parametrize("backend", BACKENDS)
def test_lifted_slots_have_no_edges(jg, torch, prog, backend):
    eager = prog(jg, "eager")
    ref = prog(torch, "eager")
    for a, b in zip(eager, ref):
        assert (a is None) == (b is None)
        if a is not None:
            flat_a = [v for row in a for v in (row if isinstance(row, list) else [row])]
            flat_b = [v for row in b for v in (row if isinstance(row, list) else [row])]
            assert all(abs(p - q) <= 1e-5 * max(1.0, abs(q)) for p, q in zip(flat_a, flat_b))
    assert prog(jg, backend) == eager


def seed_206126(T, mode):
    """A Function saves a tensor it receives inside an object and returns it
    as a gradient: the second derivative passes through that tensor's own
    node, which the create_graph rerun makes; it must run where eager's
    does (no output of the call leads to it, so it was left out of the
    rerun's placement)."""
    class F0(T.autograd.Function):
        @staticmethod
        def forward(ctx, k0, k1, a2):
            ctx.save_for_backward(a2, k1.t)
            return a2

        @staticmethod
        def backward(ctx, g0):
            s0, s2 = ctx.saved_tensors
            return None, None, s2

    def fn(x0):
        v3 = x0 * 1.5
        v5 = (x0 * x0).sqrt()
        return F0.apply(True, Box(t=v3), v5)

    if mode != "eager":
        fn = T.compile(fn, backend=mode)
    x = T.tensor([1.387, -1.317, 1.686, -1.411], requires_grad=True)
    y = fn(x)
    w = T.tensor([0.5, -0.25, 0.75, 1.0])
    (g,) = T.autograd.grad((y * w).sum(), [x], create_graph=True)
    (g * g).sum().backward()
    return [g.tolist(), x.grad.tolist()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_tensor_returned_as_gradient_second_derivative(jg, torch, backend):
    eager = seed_206126(jg, "eager")
    ref = seed_206126(torch, "eager")
    for a, b in zip(eager, ref):
        assert all(abs(p - q) <= 1e-5 * max(1.0, abs(q)) for p, q in zip(a, b))
    assert seed_206126(jg, backend) == eager


def seed_296053(T, mode):
    """A compiled call's output given to a later call only inside an object:
    the later call's backward must not reach the earlier call (a custom
    Function there whose backward ignores its gradient added its result a
    second time)."""
    class F0(T.autograd.Function):
        @staticmethod
        def forward(ctx, a0, k1):
            ctx.save_for_backward(a0, k1.t)
            return a0 * 1.0

        @staticmethod
        def backward(ctx, g0):
            s0, s1 = ctx.saved_tensors
            return s0, None  # not linear in g0

    def fn(x0, box):
        return F0.apply(x0 * 2.0, Box(t=box["k1"]))

    if mode != "eager":
        fn = T.compile(fn, backend=mode)
    a = T.tensor([0.5, -1.5], requires_grad=True)
    b = T.tensor([2.0, 0.25], requires_grad=True)
    y0 = fn(a, {"k1": b})
    y0.sum().backward()
    c = T.tensor([1.25, -0.75], requires_grad=True)
    y1 = fn(c, {"k1": y0})
    y1.sum().backward()
    return [a.grad.tolist(), None if b.grad is None else b.grad.tolist(), c.grad.tolist()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_passed_inside_object_does_not_reach_earlier_call(jg, torch, backend):
    eager = seed_296053(jg, "eager")
    assert eager == seed_296053(torch, "eager")
    assert seed_296053(jg, backend) == eager
