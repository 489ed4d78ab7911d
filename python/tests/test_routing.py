"""Gradient routing of compiled calls: which node receives which output's
gradient, which backward runs, and None versus zeros.  Each program runs
under PyTorch (the reference, eager) and under jitgrad eager and compiled
with both backends; compiled must equal eager bitwise (None vs tensor
included) and eager must equal PyTorch."""
import math

import pytest

MODES = ["eager", "interp", "c"]


def vals(t):
    return None if t is None else [float(v) for v in t.detach().reshape(-1).tolist()]


def close(a, b, rtol=2e-5, atol=2e-6):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if math.isnan(a):
        return math.isnan(b)
    return abs(a - b) <= atol + rtol * abs(b)


def maybe_compile(T, f, mode):
    if mode == "eager" or T.__name__ == "torch":
        return f
    return T.compile(f, fullgraph=True, backend=mode)


def check(torch, jg, program):
    want = program(torch, "eager")
    eager = program(jg, "eager")
    assert close(eager, want), (eager, want)
    for mode in MODES[1:]:
        got = program(jg, mode)
        assert got == eager, (mode, got, eager)  # bitwise, None included


def identity_fn(T):
    class Ident(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 3

    return Ident


# item 4: a Function returning its input; the program returns that input too
def prog_identity_and_input(T, mode):
    Ident = identity_fn(T)

    def f(p):
        a = p * 2
        return a, Ident.apply(a)

    p = T.tensor([1.0, 2.0], requires_grad=True)
    a, y = maybe_compile(T, f, mode)(p)
    (-0.5 * a).sum().backward()
    q = T.tensor([1.0, 2.0], requires_grad=True)
    a, y = maybe_compile(T, f, mode)(q)
    (g,) = T.autograd.grad((-0.5 * a).sum() + y.sum(), [q])
    return [vals(p.grad), vals(g)]


def test_identity_function_output_keeps_plain_output_gradient(torch, jg):
    check(torch, jg, prog_identity_and_input)


def prog_identity_of_program_input(T, mode):
    Ident = identity_fn(T)

    def f(p):
        return p, Ident.apply(p)

    p = T.tensor([1.0, 2.0], requires_grad=True)
    a, y = maybe_compile(T, f, mode)(p)
    (-1 * a).sum().backward()
    q = T.tensor([1.0, 2.0], requires_grad=True)
    a, y = maybe_compile(T, f, mode)(q)
    (g,) = T.autograd.grad((-1 * a).sum() + y.sum(), [q])
    return [vals(p.grad), vals(g), p.is_leaf, q.is_leaf]


def test_identity_function_of_program_input_leaves_input_a_leaf(torch, jg):
    check(torch, jg, prog_identity_of_program_input)


# item 4b: the identity Function under autograd.grad runs its backward
def prog_identity_autograd_grad(T, mode):
    Ident = identity_fn(T)

    def f(p):
        return Ident.apply(p)

    p = T.tensor([1.25], requires_grad=True)
    y = maybe_compile(T, f, mode)(p)
    (g,) = T.autograd.grad((y * 1.25).sum(), [p])
    return [vals(g), vals(p.grad)]


def test_identity_function_under_autograd_grad_runs_backward(torch, jg):
    check(torch, jg, prog_identity_autograd_grad)


# item 7: a Function feeding a slot whose backward answers None still runs
def none_slot_fns(T, reads_values=False, materialize=True):
    class B(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(materialize)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if g is None:
                return None
            if reads_values:
                float(g.sum().item())  # makes the compiled node opaque
            return g * 2

    class A(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x + y

        @staticmethod
        def backward(ctx, g):
            return g, None

    return A, B


@pytest.mark.parametrize("reads_values", [False, True])
@pytest.mark.parametrize("materialize", [True, False])
@pytest.mark.parametrize("between", ["none", "mul"])
def test_function_feeding_none_slot_runs_its_backward(torch, jg, reads_values, materialize,
                                                      between):
    def program(T, mode):
        A, B = none_slot_fns(T, reads_values, materialize)

        def f(x, y):
            b = B.apply(y)
            if between == "mul":
                b = b * 3
            return A.apply(x, b).sum()

        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = T.tensor([3.0, 4.0], requires_grad=True)
        maybe_compile(T, f, mode)(x, y).backward()
        x2 = T.tensor([1.0, 2.0], requires_grad=True)
        y2 = T.tensor([3.0, 4.0], requires_grad=True)
        g = T.autograd.grad(maybe_compile(T, f, mode)(x2, y2), [y2], allow_unused=True)
        return [vals(x.grad), vals(y.grad), vals(g[0])]

    check(torch, jg, program)


def test_plain_op_feeding_none_slot_gives_no_gradient(torch, jg):
    def program(T, mode):
        A, _ = none_slot_fns(T)

        def f(x, y):
            return A.apply(x, y * 2).sum()

        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = T.tensor([3.0, 4.0], requires_grad=True)
        maybe_compile(T, f, mode)(x, y).backward()
        return [vals(x.grad), vals(y.grad)]

    check(torch, jg, program)


# item 6: an opaque call (its forward reads values) whose backward answers
# None for a slot sends nothing upstream
def opaque_fn(T):
    class Opaq(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            s = float(x.sum().item())
            return x * s + y

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    return Opaq


@pytest.mark.parametrize("direct", [False, True])
def test_opaque_none_slot_sends_no_gradient(torch, jg, direct):
    def program(T, mode):
        Opaq = opaque_fn(T)

        def f(x, y):
            return Opaq.apply(x, y if direct else y * 1.0).sum()

        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = T.tensor([3.0, 4.0], requires_grad=True)
        maybe_compile(T, f, mode)(x, y).backward()
        return [vals(x.grad), vals(y.grad)]

    check(torch, jg, program)


def test_opaque_none_slot_that_depends_on_values_is_an_error(jg):
    class Odd(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(y)
            return x * float(x.sum().item()) + y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g, (g if float(y.sum().item()) != 0 else None)

    def f(x, y):
        return Odd.apply(x, y * 1.0).sum()

    for mode in MODES[1:]:
        x = jg.tensor([1.0, 2.0], requires_grad=True)
        y = jg.tensor([3.0, 4.0], requires_grad=True)
        out = jg.compile(f, fullgraph=True, backend=mode)(x, y)
        with pytest.raises(RuntimeError, match="None when traced"):
            out.backward()
        assert x.grad is None and y.grad is None


# item 9b: an opaque call honours mark_non_differentiable
def test_opaque_mark_non_differentiable(torch, jg):
    def program(T, mode):
        class Split(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                s = float(x.sum().item())
                m = (x * 0 + s)
                ctx.mark_non_differentiable(m)
                return x * s, m

            @staticmethod
            def backward(ctx, g, gm):
                return g * 2

        def f(x):
            a, m = Split.apply(x)
            return a, m

        x = T.tensor([1.0, 2.0], requires_grad=True)
        a, m = maybe_compile(T, f, mode)(x)
        res = [a.requires_grad, m.requires_grad]
        a.sum().backward()
        return res + [vals(x.grad)]

    check(torch, jg, program)


# item 9b: an op that validates its operands' values fails compiled even
# when its result is unused (dead code elimination keeps it)
@pytest.mark.parametrize("mode", MODES)
def test_unused_cross_entropy_with_bad_target_fails_compiled(jg, mode):
    F = jg.nn.functional

    def f(x, t):
        F.cross_entropy(x, t)
        return (x * 2).sum()

    x = jg.randn(3, 4, requires_grad=True)
    g = maybe_compile(jg, f, mode)
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        g(x, jg.tensor([0, 5, 1]))
    assert g(x, jg.tensor([0, 3, 1])).item() == (x * 2).sum().item()



# item 4c: contiguous() of a contiguous value is the value itself when
# traced, as eagerly, so gradients sum in eager's order (bitwise equal)
def test_contiguous_of_contiguous_input_is_the_input(jg):
    def f(x, a, b, d):
        c = x.contiguous()
        return (x * a).sum() + (c * b).sum() + (c * d).sum() + (x * d).sum()

    jg.manual_seed(0)
    x = jg.randn(1000, requires_grad=True)
    a, b, d = jg.randn(1000), jg.randn(1000), jg.randn(1000)
    res = {}
    for mode in MODES:
        x.grad = None
        maybe_compile(jg, f, mode)(x, a, b, d).backward()
        res[mode] = vals(x.grad)
    assert res["interp"] == res["eager"] and res["c"] == res["eager"]


# item 9b: view() of a transposed input fails compiled as eagerly; the
# input's strides are guarded, so a contiguous input of the same shape
# retraces and succeeds
@pytest.mark.parametrize("mode", MODES)
def test_view_of_transposed_input_fails_compiled(torch, jg, mode):
    def f(x):
        return x.view(-1) * 2

    for T in (torch, jg):
        y = T.ones(3, 4)
        g = maybe_compile(T, f, mode)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            g(y.t())
        assert vals(g(y.t().contiguous())) == [2.0] * 12
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            g(y.t())


@pytest.mark.parametrize("mode", MODES)
def test_view_of_traced_transpose_fails_compiled(torch, jg, mode):
    for T in (torch, jg):
        g = maybe_compile(T, lambda x: x.t().view(-1), mode)
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            g(T.ones(3, 4))
    h = maybe_compile(jg, lambda x: (x.t().contiguous().view(-1), x.t().reshape(-1)), mode)
    want = [vals(t) for t in (torch.arange(12.0).reshape(3, 4).t().reshape(-1),) * 2]
    assert [vals(t) for t in h(jg.arange(12.0).reshape(3, 4))] == want


# item 7 across a compiled call's boundary: an eager Function answers None
# for the slot a compiled output fills; the compiled call's inner Functions
# still run their backward (and only those the output leads to)
@pytest.mark.parametrize("between", ["none", "mul"])
def test_compiled_output_feeding_none_slot_runs_inner_backward(torch, jg, between):
    def program(T, mode):
        A, B = none_slot_fns(T)

        def prog(y, z):
            return B.apply(y) * 3, B.apply(z * 5)

        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = T.tensor([3.0, 4.0], requires_grad=True)
        z = T.tensor([5.0, 6.0], requires_grad=True)
        o1, o2 = maybe_compile(T, prog, mode)(y, z)
        if between == "mul":
            o1 = o1 * 2
        A.apply(x, o1).sum().backward()
        return [vals(x.grad), vals(y.grad), vals(z.grad)]

    check(torch, jg, program)


def test_compiled_without_functions_reached_without_gradient(torch, jg):
    def program(T, mode):
        A, _ = none_slot_fns(T)
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = T.tensor([3.0, 4.0], requires_grad=True)
        o = maybe_compile(T, lambda y: (y * 3).exp(), mode)(y)
        A.apply(x, o).sum().backward()
        return [vals(x.grad), vals(y.grad)]

    check(torch, jg, program)


# PyTorch frees the saved tensors of every node of the backward graph, also
# those no gradient reached
@pytest.mark.parametrize("retain", [False, True])
def test_node_reached_without_gradient_frees_saved_tensors(torch, jg, retain):
    def program(T, mode):
        A, _ = none_slot_fns(T)
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = T.tensor([3.0, 4.0], requires_grad=True)
        o = maybe_compile(T, lambda y: (y * y).exp(), mode)(y)
        A.apply(x, o).sum().backward(retain_graph=retain)
        first = vals(y.grad)
        try:
            o.sum().backward()
            second = vals(y.grad)
        except RuntimeError as e:
            second = "second time" in str(e)
        return [first, second]

    check(torch, jg, program)
