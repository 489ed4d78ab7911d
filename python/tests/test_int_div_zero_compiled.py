"""Integer remainder / fmod / floor_divide by zero: PyTorch raises
ZeroDivisionError; jitgrad's eager ops did, but a compiled program (whose
divisor is only known when it runs) returned numbers.  The kernels now check,
so every mode raises, before anything is written."""

import pytest

import jitgrad as jg

torch = pytest.importorskip("torch")

OPS = {
    "remainder": lambda T, a, b: a % b,
    "fmod": lambda T, a, b: T.fmod(a, b),
    "floor_divide": lambda T, a, b: a // b,
    "traced_divisor": lambda T, a, b: a % (b * 1),
    "broadcast_divisor": lambda T, a, b: T.remainder(a.reshape(2, 1), b.reshape(1, 2)),
}


def call(T, mode, op, a, b):
    fn = lambda a, b: OPS[op](T, a, b)  # noqa: E731
    if mode != "eager":
        fn = jg.compile(fn, backend=mode)
    return fn


@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("mode", ["eager", "interp", "c"])
def test_int_div_zero_compiled(mode, op, dtype):
    def tensors(T):
        dt = getattr(T, dtype)
        return T.tensor([5, -7], dtype=dt), T.tensor([3, 2], dtype=dt), T.tensor([0, 2], dtype=dt)

    a, ok, zero = tensors(jg)
    ta, tok, tzero = tensors(torch)
    fn = call(jg, mode, op, None, None)
    assert fn(a, ok).tolist() == OPS[op](torch, ta, tok).tolist()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        OPS[op](torch, ta, tzero)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(a, zero)  # the same program, now with a zero divisor
    assert fn(a, ok).tolist() == OPS[op](torch, ta, tok).tolist()


@pytest.mark.parametrize("mode", ["interp", "c"])
def test_int_div_zero_compiled_state_intact(mode):
    """The failing call writes nothing: an in-place remainder's target keeps
    its values."""

    def step(x, b):
        x.remainder_(b)
        return x

    fn = jg.compile(step, backend=mode)
    x = jg.tensor([5, 7])
    fn(x, jg.tensor([3, 4]))
    assert x.tolist() == [2, 3]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn(x, jg.tensor([1, 0]))
    assert x.tolist() == [2, 3]
