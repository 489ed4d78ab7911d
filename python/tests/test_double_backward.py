"""Double backward (create_graph=True) through compiled functions: gradients
of gradients equal jitgrad eager bitwise on both backends, and PyTorch's to
rounding: through autograd.grad and .backward, custom Functions (traced and
opaque), a gradient penalty, mixed eager and compiled code."""
import random

import pytest

BACKENDS = ["interp", "c"]


def leaf(T, *shape, seed=0, dtype=None):
    # values exact in float32, so every library starts from the same numbers
    rng = random.Random(seed)
    n = 1
    for s in shape:
        n *= s
    vals = [round(rng.uniform(-2.0, 2.0) * 64) / 64 for _ in range(n)]
    t = T.tensor(vals, dtype=dtype or T.float64).reshape(*shape).detach().clone()
    return t.requires_grad_(True)


def functions(T):
    class Cube(T.autograd.Function):
        """x**3 with a backward that is itself differentiable"""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    class Ident(T.autograd.Function):
        """returns its input; saved it; backward g * x"""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x

    class OpaqueSquare(T.autograd.Function):
        """backward reads a value (compiled: an opaque node)"""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            two = float((x * 0 + 2).sum().item()) / x.numel()
            return g * two * x

    return {"Cube": Cube, "Ident": Ident, "OpaqueSquare": OpaqueSquare}


# each program: (input shapes, fn(T, F, *inputs) -> scalar)
PROGRAMS = {
    "cube": ([(5,)], lambda T, F, x: (x ** 3).sum()),
    "tanh_exp": ([(2, 3)], lambda T, F, x: (x.tanh().exp() * x).sum()),
    "matmul": ([(2, 3), (3, 4)], lambda T, F, a, b: (a @ b).tanh().sum()),
    "square": ([(4,)], lambda T, F, x: (x * x).sum()),
    "custom_cube": ([(4,), (4,)], lambda T, F, x, w: (F["Cube"].apply(x.tanh()) * w).sum()),
    "identity_saved_input": ([(3,)], lambda T, F, x: (F["Ident"].apply(x) * x).sum()),
    "opaque": ([(3,), (3,)], lambda T, F, x, w: (F["OpaqueSquare"].apply(x.exp()) * w).sum()),
    "abs_mean": ([(4,)], lambda T, F, p: p.mean().abs()),
    "softmax_ce": ([(3, 4)], lambda T, F, x: (x.softmax(1) * x).sum()),
    # a spread of ops, each differentiated twice
    "detach": ([(4, 3), (4, 3)], lambda T, F, x, w: ((x * x.detach()).tanh() * w).sum()),
    "max_dim": ([(4, 3), (4, 3)], lambda T, F, x, w: (x.max(1).values * w[:, 0]).sum()),
    "views": ([(4, 3), (4, 3)],
              lambda T, F, x, w: (x.reshape(12)[2:10].reshape(2, 4).t() @ w[:2, :2].exp()).sum()),
    "cross_entropy": ([(4, 3), (4, 3)], lambda T, F, x, w: T.nn.functional.cross_entropy(
        x * w.sum(), T.tensor([0, 2, 1, 1]))),
    "log_softmax": ([(4, 3), (4, 3)],
                    lambda T, F, x, w: (x.log_softmax(1) * w.sigmoid().sum()).sum()),
    "mean_expand": ([(4, 3), (4, 3)], lambda T, F, x, w: (
        x.mean(1, keepdim=True).expand(4, 3) * w.relu().sum()).pow(2).sum()),
    "div_sqrt": ([(4, 3), (4, 3)],
                 lambda T, F, x, w: ((x * x + 1).sqrt() / (w.abs().sum() + 1)).sum()),
}


def run(T, name, mode, how):
    """how: "grad" (autograd.grad then a gradient penalty) or "backward"
    (.backward(create_graph=True), then backward of the .grad's sum)"""
    shapes, fn = PROGRAMS[name]
    F = functions(T)
    xs = [leaf(T, *s, seed=i) for i, s in enumerate(shapes)]

    def f(*a):
        return fn(T, F, *a)

    if mode != "eager":
        f = T.compile(f, backend=mode)
    out = f(*xs)
    if how == "grad":
        gs = T.autograd.grad(out, xs, create_graph=True, allow_unused=True)
        first = [None if g is None else g.detach().tolist() for g in gs]
        pen = None
        for g in gs:
            if g is not None and g.requires_grad:
                pen = (g * g).sum() if pen is None else pen + (g * g).sum()
        if pen is not None:
            pen.backward()
    else:
        out.backward(create_graph=True)
        gs = [x.grad for x in xs]
        first = [None if g is None else g.detach().tolist() for g in gs]
        for x in xs:
            x.grad = None
        pen = None
        for g in gs:
            if g is not None and g.requires_grad:
                pen = g.sum() if pen is None else pen + g.sum()
        if pen is not None:
            pen.backward()
    return {"first": first, "second": [None if x.grad is None else x.grad.tolist() for x in xs]}


def close(a, b, tol=1e-9):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return abs(a - b) <= tol * (1 + abs(b))


@pytest.mark.parametrize("how", ["grad", "backward"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_compiled_equals_eager_and_torch(jg, torch, name, how):
    eager = run(jg, name, "eager", how)
    ref = run(torch, name, "eager", how)
    assert close(eager["first"], ref["first"]), (eager, ref)
    assert close(eager["second"], ref["second"]), (eager, ref)
    for backend in BACKENDS:
        got = run(jg, name, backend, how)
        assert got == eager, (backend, got, eager)


def test_abs_mean_second_derivative_is_zeros(jg, torch):
    for T in (torch, jg):
        for mode in ["eager"] + ([] if T is torch else BACKENDS):
            got = run(T, "abs_mean", mode, "grad")
            assert got["second"] == [[0.0] * 4], (T.__name__, mode, got)


def test_gradient_penalty_mixed_eager_compiled(jg, torch):
    def prog(T, mode):
        x = leaf(T, 4, seed=3)
        w = leaf(T, 4, seed=4)

        def f(h, w):
            return (h.tanh().exp() * w).sum()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        h = x.sigmoid() * 1.5  # eager before the call
        z = f(h, w) * 3 + (x * x).sum()  # and after it
        gx, gw = T.autograd.grad(z, [x, w], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        return [gx.detach().tolist(), gw.detach().tolist(), x.grad.tolist(), w.grad.tolist()]

    eager = prog(jg, "eager")
    assert close(eager, prog(torch, "eager"))
    for backend in BACKENDS:
        assert prog(jg, backend) == eager, backend


def test_third_derivative(jg, torch):
    def prog(T, mode):
        x = leaf(T, 3, seed=5)

        def f(x):
            return (x ** 3).sum()

        if mode != "eager":
            f = T.compile(f, backend=mode)
        (g,) = T.autograd.grad(f(x), [x], create_graph=True)
        (h,) = T.autograd.grad(g.sum(), [x], create_graph=True)
        h.sum().backward()
        return [g.detach().tolist(), h.detach().tolist(), x.grad.tolist()]

    eager = prog(jg, "eager")
    assert close(eager, prog(torch, "eager"))
    assert eager[2] == [6.0, 6.0, 6.0]
    for backend in BACKENDS:
        assert prog(jg, backend) == eager, backend
