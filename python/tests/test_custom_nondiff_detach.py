"""PyTorch's rules for a custom Function's non-differentiable outputs (no
input requires grad, or ctx.mark_non_differentiable) that other code can
see: a returned tensor that requires grad and is none of the inputs is
detached in place; a returned input that does not require grad is a view
of it made without grad mode, whose requires_grad follows the input's.
Fuzz seed 279320.  Each case runs on jitgrad, eager and compiled, and on
PyTorch where it is installed."""
import pytest


class Box:
    def __init__(self, t):
        self.t = t


def functions(T):
    class FromObject(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, box):
            return box.t

        @staticmethod
        def backward(ctx, g):
            return g, None

    class MarkedOther(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, box):
            ctx.mark_non_differentiable(box.t)
            return a * 2, box.t

        @staticmethod
        def backward(ctx, g, h):
            return g * 2, None

    class PassInput(T.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a

        @staticmethod
        def backward(ctx, g, h):
            return g * 2

    class BothSlots(T.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.mark_non_differentiable(a)
            return a, b

        @staticmethod
        def backward(ctx, g, h):
            return g, h

    return FromObject, MarkedOther, PassInput, BothSlots


def object_leaf_detached(T, compile_mode=None):
    FromObject, _, _, _ = functions(T)
    c = T.tensor([1.0])

    def fn(x):
        FromObject.apply(c, Box(x))
        return x * 1

    if compile_mode:
        fn = T.compile(fn, backend=compile_mode)
    x = T.tensor([2.0], requires_grad=True)
    out = fn(x)
    return x.requires_grad, out.requires_grad


def marked_other_detached(T):
    _, MarkedOther, _, _ = functions(T)
    a = T.tensor([1.0], requires_grad=True)
    w = T.tensor([3.0], requires_grad=True)
    y = w * 1  # has history: detached in place too
    o, p = MarkedOther.apply(a, Box(y))
    return (o.requires_grad, p.requires_grad, y.requires_grad, y.grad_fn is None,
            w.requires_grad)


def input_alias_follows(T, compile_mode=None):
    _, _, PassInput, _ = functions(T)
    c = T.tensor([1.0])
    _, alias = PassInput.apply(c)
    before = alias.requires_grad
    c.requires_grad_(True)
    after = alias.requires_grad

    def fn(x):
        return x * 1, x

    if compile_mode:
        fn = T.compile(fn, backend=compile_mode)
    o, same = fn(alias)
    return before, after, alias.is_leaf, o.requires_grad, same.requires_grad


def view_follows_base(T):
    x = T.zeros(3)
    v = x[0:2]
    x.requires_grad_(True)
    (v * 2).sum().backward()
    return v.requires_grad, v.is_leaf, v.grad is None, x.grad is None


def both_slots_marked(T):
    _, _, _, BothSlots = functions(T)
    x = T.tensor([1.0, 2.0], requires_grad=True)
    a, b = BothSlots.apply(x, x)
    return a.requires_grad, b.requires_grad


def test_object_leaf_detached_in_place(jg):
    assert object_leaf_detached(jg) == (False, False)


@pytest.mark.parametrize("mode", ["interp", "c"])
def test_object_leaf_detached_compiled(jg, mode):
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    assert object_leaf_detached(jg, mode) == object_leaf_detached(jg)


def test_object_leaf_detached_matches_torch(jg, torch):
    assert object_leaf_detached(jg) == object_leaf_detached(torch)


def test_marked_other_detached_in_place(jg):
    assert marked_other_detached(jg) == (True, False, False, True, True)


def test_marked_other_detached_matches_torch(jg, torch):
    assert marked_other_detached(jg) == marked_other_detached(torch)


def test_input_alias_follows_input(jg):
    assert input_alias_follows(jg) == (False, True, True, True, True)


@pytest.mark.parametrize("mode", ["interp", "c"])
def test_input_alias_follows_input_compiled(jg, mode):
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    assert input_alias_follows(jg, mode) == input_alias_follows(jg)


def test_input_alias_follows_input_matches_torch(jg, torch):
    assert input_alias_follows(jg) == input_alias_follows(torch)


def test_view_follows_base_requires_grad(jg):
    assert view_follows_base(jg) == (True, True, True, True)


def test_view_follows_base_matches_torch(jg, torch):
    assert view_follows_base(jg) == view_follows_base(torch)


def test_view_follows_base_inplace_error(jg):
    x = jg.zeros(3)
    v = x[0:2]
    x.requires_grad_(True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        v.mul_(2)


def test_mark_matches_every_output_that_is_the_tensor(jg):
    assert both_slots_marked(jg) == (False, False)


def test_mark_matches_every_output_matches_torch(jg, torch):
    assert both_slots_marked(jg) == both_slots_marked(torch)
