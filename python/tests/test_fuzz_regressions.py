"""Eager differences from PyTorch found by the differential fuzzer (fuzz/),
each against PyTorch where it is installed: which operands an op's backward
saves, AccumulateGrad on a leaf that stopped requiring grad, and
mark_non_differentiable on a temporary."""
import pytest


def run_or_error(f):
    try:
        return f()
    except RuntimeError as e:
        return "error: " + str(e).split(":")[0]


def values(t):
    return None if t is None else t.detach().tolist()


def close(a, b):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5 + 1e-5 * abs(b)
    return a == b


# ---- fuzz seed 335

def leaf_stops_requiring_grad(T, compiled=False):
    x = T.tensor([1.0, 2.0], requires_grad=True)
    c = T.tensor([2.0, 4.0], requires_grad=True)

    def f(a):
        return (a / c).sum()

    y = (T.compile(f, backend="interp") if compiled else f)(x)
    y.backward(retain_graph=True)
    first = values(c.grad)
    c.requires_grad_(False)
    y.backward()
    return first, values(c.grad), values(x.grad)


def test_leaf_requires_grad_cleared_after_graph_gets_no_grad(jg):
    got = leaf_stops_requiring_grad(jg)
    assert got == ([-0.25, -0.125], [-0.25, -0.125], [1.0, 0.5])


def test_leaf_requires_grad_cleared_matches_torch(jg, torch):
    assert leaf_stops_requiring_grad(jg) == leaf_stops_requiring_grad(torch)


def test_leaf_requires_grad_cleared_compiled(jg):
    assert leaf_stops_requiring_grad(jg, compiled=True) == leaf_stops_requiring_grad(jg)


# ---- fuzz seed 1788: an op saves only what its backward formula reads

OPS = {
    "mul": lambda T, a, b: a * b,
    "div": lambda T, a, b: a / b,
    "matmul": lambda T, a, b: a @ b.reshape(2, 1),
    "masked_fill": lambda T, a, b: a.masked_fill(b > 0, 0.5) + b,
    "where": lambda T, a, b: T.where(a.detach() > 1.5, a, b),
}
CASES = [(op, ra, rb, which) for op in OPS for ra, rb in ((True, False), (False, True), (True, True))
         for which in (0, 1)]


def inplace_after_forward(T, op, ra, rb, which):
    a = T.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=ra)
    b = T.tensor([2.0, -4.0], requires_grad=rb)
    y = OPS[op](T, a, b)
    with T.no_grad():
        (a if which == 0 else b).add_(1.0)

    def bw():
        y.sum().backward()
        return values(a.grad), values(b.grad)

    return run_or_error(bw)


@pytest.mark.parametrize("op,ra,rb,which", CASES)
def test_inplace_on_operand_after_forward_matches_torch(jg, torch, op, ra, rb, which):
    got = inplace_after_forward(jg, op, ra, rb, which)
    want = inplace_after_forward(torch, op, ra, rb, which)
    assert close(got, want), (got, want)


def test_div_numerator_changed_in_place(jg):
    # the fuzz program: C0 / C1 with only C0 requiring grad, C0 += 1 under no_grad
    c0 = jg.tensor([[1.0], [2.0]], requires_grad=True)
    c1 = jg.tensor([2.0, 4.0])
    y = c0 / c1
    with jg.no_grad():
        c0.add_(1.0)
    y.sum().backward()
    assert c0.grad.tolist() == [[0.75], [0.75]]


# ---- mark_non_differentiable of a temporary forward drops

def temp_marked(T):
    class F(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            for _ in range(4):
                t = x * 3
                ctx.mark_non_differentiable(t)
                del t
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = T.tensor([1.0, 2.0], requires_grad=True)
    y = F.apply(x)
    y.sum().backward()
    return y.requires_grad, values(x.grad)


def test_mark_non_differentiable_temporary(jg):
    assert temp_marked(jg) == (True, [2.0, 2.0])


def test_mark_non_differentiable_temporary_matches_torch(jg, torch):
    assert temp_marked(jg) == temp_marked(torch)


# ---- fuzz seeds 830 and 1319: x * x and x.square() both returned

def merged_outputs(T, backend=None):
    def fn(x):
        v1 = x * x
        v4 = x.square()
        v3 = v1.max(1)[0]
        return v4, v3, v1

    f = T.compile(fn, backend=backend) if backend else fn
    x = T.tensor([[0.3, -1.7], [0.77, 1.3], [0.31, -0.9]], requires_grad=True)
    outs = f(x)
    loss = None
    for k, o in enumerate(outs):
        w = T.tensor([0.125 * (i * 5 % 7 - 3) + 0.1 * k for i in range(o.numel())]).reshape(*o.shape)
        t = (o * w).sum()
        loss = t if loss is None else loss + t
    loss.backward()
    with T.no_grad():
        outs[0].add_(1.0)  # the outputs do not share memory, as in eager
    return x.grad.tolist(), outs[2].tolist()


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_cse_merged_outputs_keep_their_own_gradient(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    assert merged_outputs(jg, backend) == merged_outputs(jg)
