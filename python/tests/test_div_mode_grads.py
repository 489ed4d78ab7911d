"""div(rounding_mode='floor' / 'trunc') as one node with PyTorch 1.13's
DivBackward2 (zero gradients without history: +0, not requiring grad,
where a composition gave -0 with history from the divisor), and remainder /
fmod, whose divisor gradient uses it: a create_graph gradient through them
stays connected to self with a zero derivative, so the second-order
gradient of self is zeros (was None: fuzz seed 6310552).  floor_divide's
output requires grad and its backward fails, as PyTorch's.  Eager against
PyTorch, compiled (interp, c) == eager bitwise."""
import math

import pytest

A = [-2.5, -1.5, -0.7, -0.2, 0.3, 0.6, 1.2, 2.7]
B = [0.8, -1.1, 1.7, 0.45, -0.9, 2.2, 0.35, -1.3]


def bits(t):
    if t is None:
        return None
    return [(v, math.copysign(1, v)) for v in t.detach().reshape(-1).tolist()]


def first_order(T, mode, a, b):
    y = T.div(a, b, rounding_mode=mode)
    return y, T.autograd.grad((y * y).sum(), (a, b), create_graph=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_mode_gradients_are_plain_zeros(jg, torch, mode, dtype):
    got, want = [], []
    for T, out in ((jg, got), (torch, want)):
        a = T.tensor(A, dtype=getattr(T, dtype), requires_grad=True)
        b = T.tensor(B, dtype=getattr(T, dtype), requires_grad=True)
        y, (ga, gb) = first_order(T, mode, a, b)
        out.append((bits(y), type(y.grad_fn).__name__, bits(ga), bits(gb), ga.requires_grad,
                    gb.requires_grad))
    assert got == want


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_mode_integers_and_scalars(jg, torch, mode):
    for a, b in (([7, -7, 5, -5], [2, 2, -3, -3]), ([7.5, -7.5], [2.0, -2.0])):
        j = jg.div(jg.tensor(a), jg.tensor(b), rounding_mode=mode)
        t = torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode)
        assert str(j.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        assert j.tolist() == t.tolist()
        j = jg.tensor(a).div(3, rounding_mode=mode)
        t = torch.tensor(a).div(3, rounding_mode=mode)
        assert j.tolist() == t.tolist()
    for T in (jg, torch):  # PyTorch's error: a RuntimeError saying ZeroDivisionError
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            T.div(T.tensor([1]), T.tensor([0]), rounding_mode=mode)


def remainder_second_order(T, op, a, b):
    r = getattr(T, op)(a, b)
    ga, gb = T.autograd.grad((r * r).sum(), (a, b), create_graph=True)
    h = T.autograd.grad((gb * 1.5).sum(), (a, b), allow_unused=True)
    return r, ga, gb, h


@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_remainder_second_order_matches_torch(jg, torch, op):
    got, want = [], []
    for T, out in ((jg, got), (torch, want)):
        a = T.tensor(A, dtype=T.float64, requires_grad=True)
        b = T.tensor(B, dtype=T.float64, requires_grad=True)
        r, ga, gb, (ha, hb) = remainder_second_order(T, op, a, b)
        out.append([bits(r), bits(ga), bits(gb), gb.requires_grad, bits(ha), bits(hb)])
    assert got == want


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("op", ["remainder", "fmod", "floor", "trunc"])
def test_compiled_equals_eager(jg, backend, op):
    def f(a, b):
        if op in ("floor", "trunc"):
            y = jg.div(a * 3, b, rounding_mode=op) + a
        else:
            y = getattr(jg, op)(a * 3, b)
        ga, gb = jg.autograd.grad((y * y).sum(), (a, b), create_graph=True)
        return y, ga, gb, (ga * gb).sum()

    cf = jg.compile(f, backend=backend)
    for seed in range(3):
        jg.manual_seed(seed)
        a0, b0 = jg.randn(6), jg.randn(6) + 2.5
        outs = []
        for fn in (f, cf):
            a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
            res = fn(a, b)
            h = jg.autograd.grad(res[-1], (a, b), allow_unused=True)
            outs.append([bits(t) for t in list(res) + list(h)])
        assert outs[1] == outs[0]


@pytest.mark.parametrize("backend", [None, "interp", "c"])
def test_floor_divide_requires_grad_and_refuses_backward(jg, torch, backend):
    for T in (jg, torch):
        x = T.tensor([1.5, -2.5, 4.0], requires_grad=True)
        (x * x).sum().backward()
        q = T.floor_divide(x, 2.0)
        assert q.requires_grad and type(q.grad_fn).__name__ == "NotImplemented"
        assert (x // 2).requires_grad and not (x.detach() // 2).requires_grad
        f = lambda x: (x // 0.5 + x).sum()  # noqa: E731
        if backend and T is jg:
            f = jg.compile(f, backend=backend)
        with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not "
                                               "implemented"):
            f(x).backward()
        assert x.grad.tolist() == [3.0, -5.0, 8.0]
