"""Fuzz seed 2900044: a program split into pieces by a value read, calling a
custom Function that gets one tensor in two slots and again inside an
object argument, whose backward uses a tensor saved from that object.
autograd.grad(create_graph=True) of its output, then the backward of the
sum of squares of that gradient.  The object holds the piece's result
itself (the read made it real), so the saved tensor's history is the
compiled call's; its output stands at the node of the create_graph rerun
like the outputs that got a gradient, and the second-order terms meet in
that node in eager's order: x.grad is bitwise eager's, in pieces and in
one graph."""
import gc

import pytest


class Box:
    def __init__(self, t):
        self.t = t


def program(T):
    class F0(T.autograd.Function):
        @staticmethod
        def forward(ctx, k0, k1, a2, a3, a4):
            bt = k0.t * 1.0
            ctx.save_for_backward(a2, a3, a4, a3, bt, k0.t)
            return bt

        @staticmethod
        def backward(ctx, g0):
            s0, s1, s2, s3, s4, s5 = ctx.saved_tensors
            return None, None, g0 * 2.0, g0 + g0, g0 - s5 + g0 - s4

    def fn(x1, read):
        c = (1.0 if float(x1.sum()) > 0 else -2.0) if read else 1.0
        v2 = x1 * c
        return F0.apply(Box(v2), 3, v2, v2, x1)

    return fn


def second_order_grad(T, read, backend):
    fn = program(T)
    if backend:
        fn = T.compile(fn, backend=backend)
    x = T.tensor([0.13, -0.77], requires_grad=True)
    out = fn(x, read)
    loss = (out * T.tensor([0.3, 0.9])).sum()
    (g,) = T.autograd.grad(loss, [x], create_graph=True)
    (g * g).sum().backward()
    return g.tolist(), x.grad.tolist()


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_one_graph_double_backward_custom_object_slot(jg, backend):
    assert second_order_grad(jg, False, backend) == second_order_grad(jg, False, None)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pieces_double_backward_custom_object_slot(jg, backend):
    assert second_order_grad(jg, True, backend) == second_order_grad(jg, True, None)


def test_pieces_double_backward_custom_object_slot_vs_torch(jg, torch):
    got = second_order_grad(jg, True, "c")
    ref = second_order_grad(torch, True, None)
    for a, b in zip(got, ref):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("create_graph", [True, False])
def test_pieces_custom_object_slot_frees(jg, backend, create_graph):
    """Regression: the traced call's ctx kept the tensor the object held
    (the piece's result, whose history is the piece's compiled node, which
    holds the ctx through the piece's graph): a reference cycle in C that
    gc cannot see; the compiled pieces and the tensors never went away
    (tests/c/test_compile_pieces.c, test_double_backward_object_slot)."""
    gc.collect()
    base = jg.memory_allocated()
    for _ in range(2):  # a fresh compiled function each time
        fn = jg.compile(program(jg), backend=backend)
        for _ in range(3):
            # (64 floats: tensors of 64 bytes or less are not counted)
            x = jg.linspace(-1, 0.5, 64).requires_grad_()
            loss = (fn(x, True) * jg.linspace(0, 1, 64)).sum()
            if create_graph:
                (g,) = jg.autograd.grad(loss, [x], create_graph=True)
                (g * g).sum().backward()
            else:
                loss.backward()
            assert x.grad is not None
        assert fn._jitgrad_compiled.graphs_run() > 3  # (pieces ran)
        del fn, x, loss
        g = None
        gc.collect()
        assert jg.memory_allocated() == base
