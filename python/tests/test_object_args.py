"""autograd.Function calls whose forward reads tensors of the program through
a non-tensor argument (an object holding tensors) or a closure.  As in
PyTorch, forward runs without grad: such tensors get no gradient through the
call.  Compiled (interp and c, fullgraph) must equal eager bitwise, and eager
must match PyTorch."""
import pytest


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def backends(jg):
    return ["interp", "c"] if jg.HAS_COMPILER else ["interp"]


def make(T, kind):
    """The program for one kind of Function call (T: jitgrad or torch)."""

    class Scale(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, box):
            ctx.save_for_backward(x, box.t)
            return x * box.t.tanh(), box.t * 1.0

        @staticmethod
        def backward(ctx, g0, g1):
            x, t = ctx.saved_tensors
            return g0 * t.tanh() + g1 * x, None

    class Same(T.autograd.Function):  # the object holds the call's own input
        @staticmethod
        def forward(ctx, k, a, box, b):
            ctx.save_for_backward(a, box.t)
            ctx.k = k
            return (a + b) * box.t, box.t * 1.0

        @staticmethod
        def backward(ctx, g0, g1):
            a, t = ctx.saved_tensors
            return None, g0 * t * ctx.k, None, g1 + g0

    if kind == "field_of_program_value":
        def prog(x, w):
            y, z = Scale.apply(x, Box(t=w * 2.0))
            return (y * z).sum()
    elif kind == "field_is_an_argument":
        def prog(x, w):
            y, z = Same.apply(1.5, x, Box(t=x), w)
            return (y - z).sum()
    elif kind == "field_used_twice":
        def prog(x, w):
            b = Box(t=(x * w).exp())
            y, _ = Scale.apply(x, b)
            u, v = Scale.apply(y, b)
            return (u + v * y).sum()
    elif kind == "closure":
        held = {}

        class Closure(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * held["t"]

            @staticmethod
            def backward(ctx, g):
                return g * 3.0

        def prog(x, w):
            # taken out again: a dict left changed is a graph break
            # (test_compile_container_mutation.py), and this runs fullgraph
            held["t"] = w.exp()
            try:
                return Closure.apply(x).sum()
            finally:
                del held["t"]
    return prog


KINDS = ["field_of_program_value", "field_is_an_argument", "field_used_twice", "closure"]


def outcome(T, prog, xs):
    x = T.tensor(xs[0], requires_grad=True)
    w = T.tensor(xs[1], requires_grad=True)
    y = prog(x, w)
    y.backward()
    return y.tolist(), [None if t.grad is None else t.grad.tolist() for t in (x, w)]


INPUTS = [([0.5, -1.25, 2.0], [0.75, 1.5, -0.5]), ([1.0, 2.0], [-0.25, 0.5])]


@pytest.mark.parametrize("kind", KINDS)
def test_object_arg_tensor_compiled_equals_eager(jg, kind):
    """regression: "forward used a traced tensor that is not one of its
    tensor arguments" — the tensor is now a lifted slot of the traced call."""
    for be in backends(jg):
        f = jg.compile(make(jg, kind), backend=be, fullgraph=True)
        for xs in INPUTS:  # the second shape traces again
            for _ in range(2):  # and the entry is reused
                assert outcome(jg, f, xs) == outcome(jg, make(jg, kind), xs), (be, xs)


@pytest.mark.parametrize("kind", KINDS)
def test_object_arg_tensor_eager_matches_torch(jg, torch, kind):
    """No gradient reaches a tensor read through an object or a closure
    (forward runs without grad), as in PyTorch."""
    for xs in INPUTS:
        got = outcome(jg, make(jg, kind), xs)
        ref = outcome(torch, make(torch, kind), xs)
        assert got[0] == pytest.approx(ref[0], rel=1e-5)
        for g, r in zip(got[1], ref[1]):
            assert (g is None) == (r is None)
            if g is not None:
                assert g == pytest.approx(r, rel=1e-5, abs=1e-6)


def test_object_arg_tensor_written_in_place_is_a_graph_break(jg):
    """An in-place write into a tensor reached through an object cannot be
    captured: fullgraph fails, otherwise the program runs eagerly."""

    class W(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x, box):
            box.t.mul_(2.0)
            return x * box.t

        @staticmethod
        def backward(ctx, g):
            return g, None

    def prog(x, w):
        return W.apply(x, Box(t=w * 1.0)).sum()

    with pytest.raises(RuntimeError, match="W.forward"):
        outcome(jg, jg.compile(prog, fullgraph=True), INPUTS[0])
    assert outcome(jg, jg.compile(prog), INPUTS[0]) == outcome(jg, prog, INPUTS[0])


def test_object_arg_new_object_at_recycled_address(jg):
    """regression: the key named a plain object argument by its address
    only, so a new object at a recycled address (or the same object with an
    attribute changed) reused the trace made with the old attribute values."""

    def fn(x, b):
        return (x * b.s + b.t).sum()

    t = jg.tensor([1.0, 2.0], requires_grad=True)
    f = jg.compile(fn)
    x = jg.tensor([1.0, 1.0])
    addresses = set()
    for s in [2.0, 3.0, 5.0]:
        b = Box(s=s, t=t)
        addresses.add(id(b))
        assert f(x, b).tolist() == fn(x, b).tolist() == 2 * s + 3.0
        del b
    b = Box(s=1.0, t=t)
    assert f(x, b).tolist() == 5.0
    b.s = 4.0  # the same object, an attribute changed
    assert f(x, b).tolist() == fn(x, b).tolist() == 11.0
    b.u = "new attribute"
    assert f(x, b).tolist() == 11.0


def test_opaque_function_with_traced_object_tensor_runs(jg):
    """regression: a Function whose forward reads values (opaque) and reads a
    traced tensor through an object failed the trace (jg_copy_to on a traced
    tensor); the tensor is now a lifted slot of the opaque node, and the
    object is rebuilt around it at run time (test_object_args_run.py)."""

    class Sign(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a, box):
            sign = 1.0 if float(a.detach().sum()) >= 0 else -1.0
            return (a + box.t) * sign

        @staticmethod
        def backward(ctx, g):
            return g, None

    def prog(x, w):
        return Sign.apply(x, Box(t=w * 2.0)).sum()

    for xs in INPUTS:
        assert outcome(jg, jg.compile(prog), xs) == outcome(jg, prog, xs)
        assert outcome(jg, jg.compile(prog, fullgraph=True), xs) == outcome(jg, prog, xs)
