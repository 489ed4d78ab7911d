"""A captured tensor used as the operand of an in-place op on a traced tensor
(`v.copy_(K)`, `v.add_(K)`) is a lifted input of the graph, read at every
call, not a snapshot taken at trace time (fuzz seed 2273)."""
import pytest

import jitgrad as jg

BACKENDS = ["interp"] + (["c"] if jg.HAS_COMPILER else [])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["copy_", "add_", "mul_"])
def test_captured_operand_of_inplace_is_read_each_call(backend, op):
    K = jg.tensor([1.0, 2.0], requires_grad=True)

    def fn(x):
        v = x.clone()
        getattr(v, op)(K)
        return v * 1

    f = jg.compile(fn, backend=backend)
    x = jg.tensor([3.0, 5.0], requires_grad=True)
    for _ in range(3):
        got, want = f(x), fn(x)
        assert got.tolist() == want.tolist()
        got.sum().backward()
        g_c = (x.grad.tolist(), K.grad.tolist())
        x.grad = K.grad = None
        want.sum().backward()
        assert g_c == (x.grad.tolist(), K.grad.tolist())
        x.grad = K.grad = None
        with jg.no_grad():
            K.mul_(0.5)
