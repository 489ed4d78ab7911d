"""A compiled backward adds an existing .grad inside its own graph and the
result replaces .grad (docs/compiler.md, "Adding into an existing .grad"):
accumulating over several backwards gives eager's bits on both backends,
and a .grad the caller still holds (a Python reference, a NumPy view of it)
is updated in place as in eager mode, never replaced behind its back."""
import numpy as np
import pytest

BACKENDS = ["interp", "c"]


def f(a, b, c):
    return (a * b + c).relu().sum()


def leaves(T, n=5000):
    T.manual_seed(3)
    return [T.randn(n, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_accumulated_grads_match_eager(jg, backend):
    e, c = leaves(jg), leaves(jg)
    g = jg.compile(f, backend=backend)
    for _ in range(4):
        f(*e).backward()
        g(*c).backward()
        for x, y in zip(e, c):
            assert x.grad.numpy().tobytes() == y.grad.numpy().tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_grad_sees_the_update(jg, backend):
    e, c = leaves(jg), leaves(jg)
    g = jg.compile(f, backend=backend)
    for _ in range(2):
        f(*e).backward()
        g(*c).backward()
    held = c[0].grad
    view = c[1].grad.numpy()  # shares the gradient's memory
    f(*e).backward()
    g(*c).backward()
    assert c[0].grad is held or c[0].grad.numpy().tobytes() == held.numpy().tobytes()
    assert held.numpy().tobytes() == e[0].grad.numpy().tobytes()
    assert np.array_equal(view, e[1].grad.numpy())
