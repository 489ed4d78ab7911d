"""A create_graph backward through a compiled call whose input (a captured
tensor) was changed in place after the call: the rerun cannot recompute the
forward-time values, so the values the forward saved get their
forward-time data back, and a rerun node that saved the changed input fails
as eager's node does (fuzz seeds 720828, 800644, 550)."""
import pytest

BACKENDS = ["interp", "c"]


def run(T, mode, body):
    C = T.tensor([0.75, -1.5], requires_grad=True)
    K = T.tensor([2.0, -0.5])

    def fn(x):
        return body(T, x, C, K)

    if mode != "eager":
        fn = T.compile(fn, backend=mode)
    x = T.tensor([0.5, 1.25], requires_grad=True)
    y = fn(x)
    with T.no_grad():
        C.mul_(0.5)
        K.mul_(3.0)
    try:
        (g,) = T.autograd.grad((y * y).sum(), [x], create_graph=True, allow_unused=True)
        if g is not None:
            (g * g).sum().backward()
    except RuntimeError as e:
        return "error: " + str(e).split(":")[0]
    return [None if g is None else g.tolist(),
            None if x.grad is None else x.grad.tolist(),
            None if C.grad is None else C.grad.tolist()]


BODIES = {
    # eager saves nothing of C: the second derivative works
    "scaled_capture": lambda T, x, C, K: x.exp() + C * 0.5,
    # exp saves its result, computed from C before the change
    "result_saved": lambda T, x, C, K: (x + C).exp(),
    # mul saves K for x's gradient: eager fails when it reads it
    "input_saved": lambda T, x, C, K: x * K,
    "input_saved_rg": lambda T, x, C, K: x * C,
}


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_stale_input_like_eager(jg, torch, body, backend):
    eager = run(jg, "eager", BODIES[body])
    ref = run(torch, "eager", BODIES[body])
    if isinstance(ref, str):
        assert isinstance(eager, str) and "modified by an inplace operation" in eager
    else:
        for a, b in zip(eager, ref):
            assert (a is None) == (b is None)
            if a is not None:
                assert all(abs(p - q) <= 1e-5 * max(1.0, abs(q)) for p, q in zip(a, b))
    assert run(jg, backend, BODIES[body]) == eager


def test_seed_720828(jg, torch):
    """minimized: call1's input is call0's output C * 0.5; C is changed in
    place between the calls; call1 differentiates twice through call0."""
    def prog(T, mode):
        C0 = T.tensor([0.75], requires_grad=True)

        def fn(x0):
            return C0 * 0.5, x0.tanh()

        if mode != "eager":
            fn = T.compile(fn, backend=mode)
        s = T.tensor([1.5, -0.25], requires_grad=True)
        a, _ = fn(s[:-1])
        (a * 2).sum().backward(retain_graph=True)
        with T.no_grad():
            C0.mul_(0.5)
        b, t = fn(a)
        loss = (b * 0.25).sum() + (t * 0.5).sum()
        gs = T.autograd.grad(loss, [s, C0], create_graph=True, allow_unused=True)
        return [None if g is None else g.tolist() for g in gs] + [C0.grad.tolist()]

    eager = prog(jg, "eager")
    ref = prog(torch, "eager")
    assert [x is None for x in eager] == [x is None for x in ref]
    for backend in BACKENDS:
        assert prog(jg, backend) == eager


def test_seed_241620_requires_grad_switched_on_after_call(jg, torch):
    """A captured tensor that did not require grad at the call, and does by
    the time a create_graph backward reruns the call: eager's node has no
    edge to it, so the rerun must not give it one (its gradient came out
    doubled)."""
    def prog(T, mode):
        C0 = T.tensor([[0.5], [-1.0], [2.0]])

        def fn(x0, x1):
            return (x0 - C0)[0], x1

        if mode != "eager":
            fn = T.compile(fn, backend=mode)
        a = T.tensor([0.25], requires_grad=True)
        b = T.tensor([1.5], requires_grad=True)
        y0, _ = fn(a, b)
        C0.requires_grad_(True)
        c = T.tensor([-0.75], requires_grad=True)
        y1, y0b = fn(c, y0)
        loss = (y1 * -0.625).sum() + (y0b * -0.625).sum()
        gs = T.autograd.grad(loss, [C0, a, c], create_graph=True, allow_unused=True)
        return [None if g is None else g.tolist() for g in gs]

    eager = prog(jg, "eager")
    assert eager == prog(torch, "eager")
    for backend in BACKENDS:
        assert prog(jg, backend) == eager


def test_seed_297102_requires_grad_switched_off_after_call(jg, torch):
    """The reverse: a captured tensor that required grad at the call and no
    longer does when a create_graph backward reruns it: what the rerun
    computes from it has no history, as eager's gradient has none."""
    def prog(T, mode):
        C0 = T.tensor([1.25], requires_grad=True)

        def fn(x):
            return x.mul(C0)

        if mode != "eager":
            fn = T.compile(fn, backend=mode)
        b = T.tensor([[0.5], [-1.5], [2.0]], requires_grad=True)
        y0 = fn(b[1:])
        C0.requires_grad_(False)
        y1 = fn(y0)
        (g,) = T.autograd.grad((y1 * 0.5).sum(), [b], create_graph=True)
        return [g.tolist(), g.requires_grad]

    eager = prog(jg, "eager")
    assert eager == prog(torch, "eager")
    for backend in BACKENDS:
        assert prog(jg, backend) == eager
