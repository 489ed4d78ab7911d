"""micrograd-style engine checks: scalar expression graphs (relu, powers
including negative ones, division, `+=` rebinding, reused subexpressions)
built from one-element float64 tensors made the legacy way
(`T.Tensor([v]).double()` then `requires_grad = True`), run under PyTorch
and jitgrad: values and gradients agree, and jitgrad's compiled program
gives eager's bits."""
import numpy as np
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


def moons(n=40, seed=0):
    """Two interleaved half circles with labels -1 / +1 (micrograd's demo
    data, made with NumPy)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, np.pi, n // 2)
    a = np.stack([np.cos(t), np.sin(t)], 1)
    b = np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1)
    x = np.concatenate([a, b]) + rng.normal(0, 0.1, (n, 2))
    y = np.concatenate([-np.ones(n // 2), np.ones(n // 2)])
    return x, y


def demo_training(T, steps=15):
    """micrograd's demo loop with tensors: a 2-16-16-1 ReLU MLP, max-margin
    loss plus L2, plain SGD through .data, accuracy from comparisons."""
    rng = np.random.default_rng(1)
    sizes = [2, 16, 16, 1]
    params = []
    for i in range(3):
        w = T.tensor(rng.uniform(-1, 1, (sizes[i], sizes[i + 1])), requires_grad=True)
        b = T.tensor(np.zeros(sizes[i + 1]), requires_grad=True)
        params += [w, b]
    xs, ys = moons()
    X, Y = T.tensor(xs), T.tensor(ys)
    history = []
    for k in range(steps):
        h = X
        for i in range(3):
            h = h @ params[2 * i] + params[2 * i + 1]
            if i < 2:
                h = h.relu()
        scores = h.squeeze(1)
        losses = (1 + -Y * scores).relu()
        data_loss = losses.sum() * (1.0 / len(losses))
        reg_loss = 1e-4 * sum((p * p).sum() for p in params)
        total = data_loss + reg_loss
        acc = ((Y > 0) == (scores > 0)).float().mean()
        for p in params:
            p.grad = None
        total.backward()
        lr = 1.0 - 0.9 * k / 100
        for p in params:
            p.data -= lr * p.grad
        history.append((total.item(), acc.item()))
    return history


def test_micrograd_demo_training_matches_torch():
    torch = pytest.importorskip("torch")
    want = demo_training(torch)
    got = demo_training(jitgrad)
    for k, ((gl, ga), (wl, wa)) in enumerate(zip(got, want)):
        assert gl == pytest.approx(wl, rel=1e-9), k
        assert ga == wa, k
    assert got[-1][0] < got[0][0]


def test_data_augmented_assignment_updates_in_place_like_torch():
    # `p.data -= lr * p.grad` reads .data, subtracts in place, then assigns
    # the result back to .data (which used to be read-only)
    torch = pytest.importorskip("torch")
    res = []
    for T in (torch, jitgrad):
        p = T.tensor([1.0, 2.0, 3.0], dtype=T.float64, requires_grad=True)
        (p * p).sum().backward()
        p.data -= 0.25 * p.grad
        p.data *= 2
        assert p.requires_grad and p.is_leaf and p.grad_fn is None
        res.append((p.tolist(), p.grad.tolist()))
    assert res[0] == res[1]


def test_data_assignment_of_same_shape_sets_values_without_history():
    torch = pytest.importorskip("torch")
    res = []
    for T in (torch, jitgrad):
        w = T.nn.Parameter(T.zeros(2, 3))
        src = T.ones(2, 3, requires_grad=True) * 3
        w.data = src
        assert isinstance(w, T.nn.Parameter) and w.is_leaf and w.requires_grad
        (w * 2).sum().backward()
        res.append((w.tolist(), w.grad.tolist(), src.grad_fn is not None))
    assert res[0] == res[1]


def test_data_assignment_errors():
    x = jitgrad.zeros(3, requires_grad=True)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        x.data = 5
    with pytest.raises(RuntimeError, match="Deleting tensor data is not allowed"):
        del x.data
    assert x.tolist() == [0.0, 0.0, 0.0] and x.requires_grad


def test_data_self_assignment_keeps_the_tensor():
    """`p.data -= g` assigns p's own data back: p stays the same tensor, so a
    compiled function capturing p does not trace again."""
    p = jitgrad.ones(3, requires_grad=True)

    def f(x):
        return x * p

    cf = jitgrad.compile(f)
    for _ in range(3):
        cf(jitgrad.ones(3)).sum().backward()
        p.data -= 0.5 * p.grad
        p.grad = None
    assert cf._jitgrad_compiled.entries() == 1
    assert p.tolist() == [-0.5, -0.5, -0.5]
