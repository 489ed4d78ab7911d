"""After a create_graph backward through a compiled call, later backwards
send the call's output gradients into the eager nodes its forward was rerun
with (the engine's redirect hook), as eager mode has one set of forward
nodes: second derivatives equal jitgrad eager bitwise when the second loss
depends on an output itself, nonlinearly, and when one compiled call's output
feeds another compiled call (fuzz seeds 700119, 700283, 700306, 700318,
700524)."""


from test_double_backward_order import check, leaf


def test_second_loss_depends_on_output_nonlinearly(jg, torch):
    def prog(T, mode):
        x = leaf(T, 8, seed=3)

        def f(x):
            h = x * x
            return h * h, x.tanh()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        y, t = f(x)
        loss = (y * 0.7).sum() + (t * t).sum()
        (g,) = T.autograd.grad(loss, [x], create_graph=True)
        s = (g * g).sum() + (y * y * t).sum()
        s.backward()
        return [g.detach().tolist(), x.grad.tolist()]

    check(jg, torch, prog)


def test_compiled_output_feeds_compiled_call(jg, torch):
    """seed 700119, minimized: call1's input is call0's output."""
    def prog(T, mode):
        x = leaf(T, 4, seed=5)

        def f(x0):
            v3 = x0 * x0
            return v3 * v3, x0

        if mode != "eager":
            f = T.compile(f, backend=mode)
        w = T.tensor([0.125, 0.375, -0.5, 0.25])
        a, _ = f(x)
        (a * w).sum().backward(retain_graph=True)
        b, a2 = f(a)
        loss = (b * w).sum() + (a2 * w).sum()
        (g,) = T.autograd.grad(loss, [x], create_graph=True)
        (g * g).sum().backward()
        return [g.detach().tolist(), x.grad.tolist()]

    check(jg, torch, prog)


def test_third_derivative_after_redirect(jg, torch):
    """A second create_graph backward reaches the redirected output: the
    rerun's eager nodes serve it, no second rerun."""
    def prog(T, mode):
        x = leaf(T, 6, seed=7)

        def f(x):
            return (x.sin() * x).exp()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        y = f(x)
        (g,) = T.autograd.grad(y.sum(), [x], create_graph=True)
        (h,) = T.autograd.grad((g * y).sum(), [x], create_graph=True)
        (h * h).sum().backward()
        return [g.detach().tolist(), h.detach().tolist(), x.grad.tolist()]

    check(jg, torch, prog)


def test_redirect_keeps_unreached_output_on_compiled_graph(jg, torch):
    """Only outputs that received a gradient are redirected; the other one
    still differentiates through the compiled node, with the right values."""
    def prog(T, mode):
        x = leaf(T, 5, seed=11)

        def f(x):
            return x.exp() * x, x.cos()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        y, z = f(x)
        (g,) = T.autograd.grad(y.sum(), [x], create_graph=True)
        (g.sum() + (z * z).sum()).backward()
        return [g.detach().tolist(), x.grad.tolist()]

    eager = prog(jg, "eager")
    ref = prog(torch, "eager")
    for a, b in zip(eager, ref):
        assert all(abs(p - q) <= 1e-4 * max(1.0, abs(q)) for p, q in zip(a, b))
    for backend in ("interp", "c"):
        got = prog(jg, backend)
        for a, b in zip(got, eager):
            assert all(abs(p - q) <= 1e-5 * max(1.0, abs(q)) for p, q in zip(a, b)), backend





def test_contributions_sum_in_eager_order_at_shared_gradient(jg, torch):
    """seed 805231, minimized: a Function returning one of its inputs (both
    slots the same tensor), an op after it and the input also returned.  The
    first derivatives of the call's uses are one tensor passed to several
    places; the second backward sums what comes back to it in the order of
    the nodes that used it, which is eager's only when the rerun's nodes run
    inside the same backward, in the call's place."""
    def prog(T, mode):
        class F0(T.autograd.Function):
            @staticmethod
            def forward(ctx, a0, a1):
                return a1

            @staticmethod
            def backward(ctx, g0):
                return g0 * -1.0, g0 * 2.0

        def fn(x0):
            v3 = F0.apply(x0, x0) + x0
            return v3.sigmoid(), x0

        if mode != "eager":
            fn = T.compile(fn, backend=mode)
        x = leaf(T, 3, seed=13)
        w = T.tensor([-0.375, 0.875, -0.125])
        a, b = fn(x)
        (g,) = T.autograd.grad((a * w).sum() + (b * w).sum(), [x], create_graph=True)
        (g * g).sum().backward()
        return [g.detach().tolist(), x.grad.tolist()]

    check(jg, torch, prog)
