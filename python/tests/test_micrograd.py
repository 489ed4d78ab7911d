"""micrograd-style engine checks: scalar expression graphs (relu, powers
including negative ones, division, `+=` rebinding, reused subexpressions)
built from one-element float64 tensors made the legacy way
(`T.Tensor([v]).double()` then `requires_grad = True`), run under PyTorch
and jitgrad: values and gradients agree, and jitgrad's compiled program
gives eager's bits."""
import pytest

import jitgrad


def leaf(T, v):
    x = T.Tensor([v]).double()
    x.requires_grad = True
    return x


def chain(T):
    """One input reused everywhere: relu of a negative and of a positive value."""
    x = leaf(T, -3.0)
    u = 3 * x + 1 + x
    p = u.relu() + u * x
    s = (u * u).relu()
    out = s + p + p * x
    out.backward()
    return out, (x,)


def mixed(T):
    """Two inputs, accumulated with +=, squared, divided, and 1/f."""
    a = leaf(T, -2.5)
    b = leaf(T, 1.5)
    c = a + b
    d = a * b + b ** 3
    c += c + 1
    c += 2 + c + (-a)
    d += d * 3 + (b + a).relu()
    d += 2 * d + (b - a).relu()
    e = c - d
    f = e ** 2
    g = f / 3.0
    g += 5.0 / f
    g += f ** -0.5 - (a * a + 1) ** -2
    g.backward()
    return g, (a, b)


def values(out, leaves):
    return [out.item()] + [t.grad.item() for t in leaves]


@pytest.mark.parametrize("expr", [chain, mixed])
def test_micrograd_expressions_match_torch(expr):
    torch = pytest.importorskip("torch")
    want = values(*expr(torch))
    got = values(*expr(jitgrad))
    if expr is chain:  # + * relu only: the same roundings as PyTorch's
        assert got == want
    else:  # powers may round differently in the last bit
        assert got == pytest.approx(want, rel=1e-12, abs=0)


def test_micrograd_leaf_is_a_double_leaf():
    x = leaf(jitgrad, 2.0)
    assert x.dtype == jitgrad.float64 and x.shape == (1,)
    assert x.is_leaf and x.requires_grad and x.grad is None


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_micrograd_compiled_equals_eager(backend):
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C backend")

    def body(a, b):
        c = a + b
        d = a * b + b ** 3
        c += c + 1
        c += 2 + c + (-a)
        d += d * 3 + (b + a).relu()
        d += 2 * d + (b - a).relu()
        f = (c - d) ** 2
        g = f / 3.0
        g += 5.0 / f
        return g + f ** -0.5 - (a * a + 1) ** -2

    fn = jitgrad.compile(body, backend=backend, fullgraph=True)
    results = []
    for run in (body, fn):
        a, b = leaf(jitgrad, -2.5), leaf(jitgrad, 1.5)
        g = run(a, b)
        g.backward()
        results.append([g.item(), a.grad.item(), b.grad.item()])
    assert results[0] == results[1]
