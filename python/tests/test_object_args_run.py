"""autograd.Function calls given objects that hold tensors, when the library
runs the forward by itself after the trace: a double backward replays the
traced forward eagerly, and the object is rebuilt around the real tensors
(the call's lifted slots).  Compiled (interp and c) must equal eager
bitwise, and eager must match PyTorch."""
import pytest


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def backends(jg):
    return ["interp", "c"] if jg.HAS_COMPILER else ["interp"]


def make(T, kind):
    class Mul(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, box):
            ctx.save_for_backward(x, box.t)
            return x * x * box.t

        @staticmethod
        def backward(ctx, g):
            x, t = ctx.saved_tensors
            return g * 2.0 * x * t, None

    class Pair(T.autograd.Function):  # two tensors, read in another order
        @staticmethod
        def forward(ctx, x, box):
            ctx.save_for_backward(x, box.b, box.a)
            return x.tanh() * box.b + box.a

        @staticmethod
        def backward(ctx, g):
            x, b, a = ctx.saved_tensors
            return g * (1.0 - x.tanh() * x.tanh()) * b, None

    if kind == "field":
        def prog(x, w):
            return Mul.apply(x, Box(t=w * 2.0)).sum()
    elif kind == "field_is_an_argument":
        def prog(x, w):
            return (Mul.apply(x, Box(t=x)) * w).sum()
    elif kind == "two_fields_and_a_list":
        def prog(x, w):
            box = Box(a=w.exp(), b=[w * 0.5][0], unused=3)
            return (Pair.apply(x, box) * Mul.apply(w, Box(t=x * 1.5))).sum()
    return prog


KINDS = ["field", "field_is_an_argument", "two_fields_and_a_list"]
INPUTS = [([0.5, -1.25, 2.0], [0.75, 1.5, -0.5]), ([1.0, 2.0], [-0.25, 0.5])]


def double_backward(T, prog, xs):
    x = T.tensor(xs[0], requires_grad=True)
    w = T.tensor(xs[1], requires_grad=True)
    y = prog(x, w)
    (gx,) = T.autograd.grad(y, (x,), create_graph=True)
    (gx * gx).sum().backward()
    return y.tolist(), gx.tolist(), [None if t.grad is None else t.grad.tolist() for t in (x, w)]


@pytest.mark.parametrize("kind", KINDS)
def test_object_arg_double_backward_compiled_equals_eager(jg, kind):
    """regression: "cannot rebuild the argument Box@... of a custom function
    called outside its Python call" when a double backward replayed the
    compiled call."""
    for be in backends(jg):
        f = jg.compile(make(jg, kind), backend=be, fullgraph=True)
        for xs in INPUTS:
            for _ in range(2):
                assert double_backward(jg, f, xs) == double_backward(jg, make(jg, kind), xs), (
                    be, xs)


@pytest.mark.parametrize("kind", KINDS)
def test_object_arg_double_backward_eager_matches_torch(jg, torch, kind):
    for xs in INPUTS:
        got = double_backward(jg, make(jg, kind), xs)
        ref = double_backward(torch, make(torch, kind), xs)
        assert got[0] == pytest.approx(ref[0], rel=1e-5)
        assert got[1] == pytest.approx(ref[1], rel=1e-5, abs=1e-6)
        for g, r in zip(got[2], ref[2]):
            assert (g is None) == (r is None)
            if g is not None:
                assert g == pytest.approx(r, rel=1e-5, abs=1e-6)


def make_opaque(T, kind):
    """A Function whose forward reads values (an opaque node when compiled)
    and reads tensors through an object argument."""

    class Sign(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, box):
            sign = 1.0 if float(a.detach().sum()) >= 0 else -1.0
            ctx.sign = sign
            ctx.save_for_backward(a, box.t)
            return (a * box.t + box.u[0]) * sign, box.t * 1.0

        @staticmethod
        def backward(ctx, g0, g1):
            a, t = ctx.saved_tensors
            return g0 * t * ctx.sign + g1, None

    if kind == "fields":
        def prog(x, w):
            y, z = Sign.apply(x, Box(t=w * 2.0, u=[w.exp()], name="b"))
            return (y * z).sum()
    elif kind == "field_is_an_argument":
        def prog(x, w):
            y, z = Sign.apply(x, Box(t=x, u=(w,)))
            return (y + z * w).sum()
    return prog


OPAQUE_KINDS = ["fields", "field_is_an_argument"]
OPAQUE_INPUTS = [([0.5, -1.25, 2.0], [0.75, 1.5, -0.5]), ([-1.0, -2.0], [-0.25, 0.5])]


def first_order(T, prog, xs):
    x = T.tensor(xs[0], requires_grad=True)
    w = T.tensor(xs[1], requires_grad=True)
    y = prog(x, w)
    ag = T.autograd.grad(y, (x, w), retain_graph=True, allow_unused=True)
    y.backward()
    return (y.tolist(), [None if g is None else g.tolist() for g in ag],
            [None if t.grad is None else t.grad.tolist() for t in (x, w)])


@pytest.mark.parametrize("kind", OPAQUE_KINDS)
def test_opaque_object_arg_fullgraph_compiled_equals_eager(jg, kind):
    """regression: with fullgraph, the opaque call's forward ran with the
    trace-time object ("jg_copy_to: cannot read the values of a traced
    tensor"); its lifted slots now rebuild the object at run time."""
    for be in backends(jg):
        f = jg.compile(make_opaque(jg, kind), backend=be, fullgraph=True)
        for xs in OPAQUE_INPUTS:  # the second one flips the sign
            for _ in range(2):
                assert first_order(jg, f, xs) == first_order(jg, make_opaque(jg, kind), xs), (
                    be, xs)


@pytest.mark.parametrize("kind", OPAQUE_KINDS)
def test_opaque_object_arg_eager_matches_torch(jg, torch, kind):
    for xs in OPAQUE_INPUTS:
        got = first_order(jg, make_opaque(jg, kind), xs)
        ref = first_order(torch, make_opaque(torch, kind), xs)
        assert got[0] == pytest.approx(ref[0], rel=1e-5)
        for gs, rs in zip(got[1:], ref[1:]):
            for g, r in zip(gs, rs):
                assert (g is None) == (r is None)
                if g is not None:
                    assert g == pytest.approx(r, rel=1e-5, abs=1e-6)
