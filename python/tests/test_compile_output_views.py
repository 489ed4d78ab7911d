"""A compiled call's output that is a view of one of its inputs (an argument,
or a tensor the program captures) is a view of it after the call, as in
eager mode: an in-place op on the input afterwards
remakes the output's history (before, the output kept the compiled call's
history, so q below got no gradient and a's was wrong, silently), and an
in-place op on the output writes the input's history (CopySlices)."""
import pytest

VIEWS = {
    "slice": lambda b: b[0:2],
    "transpose": lambda b: b.t(),
    "reshape": lambda b: b.reshape(-1),
    "chain": lambda b: b.t()[1:3],
}
MODES = ["eager", "interp", "c"]


def run(T, mode, view, write_output):
    a = T.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    q = T.tensor([[2.0, 3.0, 4.0], [0.5, -1.0, 1.5]], requires_grad=True)

    def fn(b):
        return view(b)

    f = T.compile(fn, backend=mode) if mode != "eager" else fn
    b = a.clone()
    v = f(b)
    if write_output:
        v.mul_(3.0)
        out = (b * q).sum()
    else:
        b.mul_(q)
        out = (v * T.arange(float(v.numel())).reshape(v.shape)).sum()
    out.backward()
    return [v.tolist(), a.grad.tolist(), None if q.grad is None else q.grad.tolist()]


@pytest.mark.parametrize("write_output", [False, True])
@pytest.mark.parametrize("name", sorted(VIEWS))
@pytest.mark.parametrize("mode", MODES)
def test_output_view_of_input(jg, torch, mode, name, write_output):
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    want = run(torch, "eager", VIEWS[name], write_output)
    assert run(jg, mode, VIEWS[name], write_output) == want


def run_captured(T, mode):
    a = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
    q = T.tensor([2.0, 3.0, 4.0], requires_grad=True)
    b = a.clone()

    def fn(x):
        return b[0:2] * 1 + x, b.flatten()

    f = T.compile(fn, backend=mode) if mode != "eager" else fn
    _, v = f(T.ones(2))
    b.mul_(q)
    v.sum().backward()
    return [a.grad.tolist(), None if q.grad is None else q.grad.tolist()]


@pytest.mark.parametrize("mode", MODES)
def test_output_view_of_captured(jg, torch, mode):
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    assert run_captured(jg, mode) == run_captured(torch, "eager")


# fuzz seed 901137: the output view of a captured leaf, passed to the next
# call after the leaf was written in place, remakes its history when first
# used after the call, as eagerly, so the leaf's contributions add up in
# eager's order (bitwise)
SEED_901137 = r'''
class Box:
    def __init__(self, **kw):
        pass

def make_fn():
    C0 = L('C0', (3,), True)

    def fn(x0, x1):
        v2 = C0.mean(0, keepdim=True)
        v3 = C0.flatten()
        return (v3, v2, x0)
    return (fn, C0)
fn, C0 = make_fn()

def call0(prev):
    return [L('c0l1', (3,), True), Box(t0=L('c0l2', (3,), True))]

def call1(prev):
    p = [o for o in prev if hasattr(o, 'shape') and tuple(o.shape) == (3,)]
    return [p[0], Box(t0=L('c1l2', (3,), True))]

def step1():
    with T.no_grad():
        C0.add_(1.0)
CALLS = [(call0, 'backward'), (call1, 'backward')]
BETWEEN = {1: step1}
'''


@pytest.mark.parametrize("mode", ["interp", "c"])
def test_seed_901137_bitwise(jg, mode):
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "fuzz"))
    import runner
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    eager = runner.run_mode(jg, SEED_901137, "eager")
    assert all("error" not in r for r in eager), eager
    assert runner.diff(runner.run_mode(jg, SEED_901137, mode), eager, exact=True) is None
