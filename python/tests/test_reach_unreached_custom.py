"""A custom Function whose output only reaches a compiled call through an
edge its reached outputs do not lead to is not part of the backward graph:
its backward does not run (eager: the node is never found), so its input's
gradient stays None rather than a materialized zero.  Also when that node is
the eager rerun a create_graph backward left behind (fuzz seed 711480)."""
import pytest


def make_fn(T, calls):
    class F(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * 2

    return F


@pytest.mark.parametrize("backend", ["eager", "interp", "c"])
def test_custom_fn_behind_unreached_edge_does_not_run(jg, backend):
    calls = []
    F = make_fn(jg, calls)
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    a = jg.tensor([3.0, 4.0], requires_grad=True)

    def f(a, u):
        return a * 2, u * 3

    if backend != "eager":
        f = jg.compile(f, backend=backend)
    u = F.apply(x)
    y, z = f(a, u)
    y.sum().backward()
    assert calls == []
    assert x.grad is None
    assert a.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("backend", ["eager", "interp", "c"])
def test_rerun_node_behind_unreached_edge_does_not_run(jg, torch, backend):
    """seed 711480, minimized"""
    def prog(T, mode):
        class F0(T.autograd.Function):
            @staticmethod
            def forward(ctx, a0, k1):
                return a0, a0, a0

            @staticmethod
            def backward(ctx, g0, g1, g2):
                return g0, None

        class F1(T.autograd.Function):
            @staticmethod
            def forward(ctx, a0):
                return (a0,)

        def fn(x1, x2):
            v1, v2, v3 = F0.apply(x1, -1.5)
            F1.apply(x2)
            return (v2,)

        if mode != "eager":
            fn = T.compile(fn, backend=mode)
        p = T.tensor([-1.5], requires_grad=True)
        q = T.tensor([0.25], requires_grad=True)
        (o1,) = fn(p, T.tensor([1.0]))
        (o2,) = fn(o1, T.tensor([2.0]))
        gs = T.autograd.grad((o2 * 0.5).sum(), [p], create_graph=True)
        (o3,) = fn(q, o2)
        gs2 = T.autograd.grad((o3 * 0.5).sum(), [p, q], create_graph=True, allow_unused=True)
        return [None if g is None else g.tolist() for g in list(gs) + list(gs2)]

    ref = prog(torch, "eager")
    assert ref[1] is None  # p does not reach o3
    assert prog(jg, backend) == ref
