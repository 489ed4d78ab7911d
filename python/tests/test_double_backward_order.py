"""Double backward through compiled calls adds each use's contribution where
eager does: first and second derivatives equal jitgrad eager bitwise when the
call's inputs also get gradients from eager code, when an input is also
returned, and when a tensor only an unused part of the call reads was changed
in place since the call."""
import random

BACKENDS = ["interp", "c"]


def leaf(T, *shape, seed=0):
    rng = random.Random(seed)
    n = 1
    for s in shape:
        n *= s
    vals = [rng.uniform(-2.0, 2.0) for _ in range(n)]
    return T.tensor(vals, dtype=T.float32).reshape(*shape).detach().clone().requires_grad_(True)


def close(a, b, tol=1e-4):
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return abs(a - b) <= tol * max(1.0, abs(b))


def second(T, loss, ins):
    gs = T.autograd.grad(loss, ins, create_graph=True, allow_unused=True)
    s = None
    for g in gs:
        if g is not None and g.requires_grad:
            s = (g * g).sum() if s is None else s + (g * g).sum()
    if s is not None:
        s.backward()
    return [None if g is None else g.detach().tolist() for g in gs] + [
        None if t.grad is None else t.grad.tolist() for t in ins
    ]


def check(jg, torch, prog):
    eager = prog(jg, "eager")
    assert close(eager, prog(torch, "eager"))
    for backend in BACKENDS:
        assert prog(jg, backend) == eager, backend


def test_uses_interleaved_with_eager_uses(jg, torch):
    def prog(T, mode):
        x = leaf(T, 16, seed=1)

        def f(x):
            return (x.tanh().exp() * x + x * x).sum()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        loss = f(x) * 0.3 + (x.tanh() * x).sum()
        return second(T, loss, [x])

    check(jg, torch, prog)


def test_input_returned_and_squared(jg, torch):
    def prog(T, mode):
        x = leaf(T, 8, seed=2)
        w = leaf(T, 8, seed=3)

        def f(x, w):
            return x, (x * x * w).sum()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        a, b = f(x, w)
        loss = (a * a.tanh()).sum() + b
        return second(T, loss, [x, w])

    check(jg, torch, prog)


def test_captured_changed_in_place_read_by_unused_output(jg, torch):
    def prog(T, mode):
        c = leaf(T, 4, seed=4)
        x = leaf(T, 3, seed=5)

        def f(x):
            return c.sum(0, keepdim=True), x.tanh().exp()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        _, y = f(x)
        with T.no_grad():
            c.add_(1.0)
        return second(T, (y * 0.5).sum(), [x])

    check(jg, torch, prog)
