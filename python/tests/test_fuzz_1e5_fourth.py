"""Differences found by the fourth 10^5-program fuzz run (seed 1200000):
each minimized program runs eager, compiled (interp and c, bitwise equal to
eager) and under PyTorch (within the fuzzer's tolerance)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fuzz"))

import runner  # noqa: E402


def check(T, src, torch=None):
    eager = runner.run_mode(T, src, "eager")
    assert all("error" not in r for r in eager), eager
    modes = ["interp"] + (["c"] if T.HAS_COMPILER else [])
    for m in modes:
        assert runner.diff(runner.run_mode(T, src, m), eager, exact=True) is None, m
    if torch is not None:
        assert runner.diff(eager, runner.run_mode(torch, src, "torch"), exact=False) is None


# seed 1277080: F0's output bt is computed from an object's tensor only
# (k1.t * 1.0), so the c backend's inlined body derived it as not requiring
# grad, while the call's output does (as in eager).  The opaque F1 reading
# it then made a leaf without requires_grad for that slot and its backward
# failed: "One of the differentiated Tensors does not require grad".
INLINED_OUTPUT_FROM_OBJECT_TENSOR = r'''
class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)

class F0(T.autograd.Function):
    @staticmethod
    def forward(ctx, a0, k1, a2, a3, k4):
        bt = k1.t * 1.0
        a2 = a0 + a3
        t2 = a0 + a3
        return (a2, bt, t2)

    @staticmethod
    def backward(ctx, g0, g1, g2):
        return (g2, None, g2, g2, None)

class F1(T.autograd.Function):
    @staticmethod
    def forward(ctx, a0, a1, a2):
        sign = 1.0 if float(a0) >= 0 else -1.0
        return (a2, a2)

    @staticmethod
    def backward(ctx, g0, g1):
        return (g0, g0, g1)
C0 = L('C0', (1,), True)

def fn():
    bx2 = Box(t=C0)
    r5 = F0.apply(C0, bx2, C0, C0, 'both')
    v3 = r5[1]
    v6, v7 = F1.apply(v3, v3, C0)
    return (v6,)

def call0(prev):
    return []
CALLS = [(call0, 'grad')]
'''


def test_inlined_custom_output_from_object_tensor(jg):
    check(jg, INLINED_OUTPUT_FROM_OBJECT_TENSOR)


def test_inlined_custom_output_from_object_tensor_matches_torch(jg, torch):
    check(jg, INLINED_OUTPUT_FROM_OBJECT_TENSOR, torch)


# seed 1273221: a captured C0 changed in place between a compiled call and a
# create_graph backward through it.  The rerun of the call's forward gives
# the values eager's nodes saved their forward-time data back; those a
# custom function's ctx saved (t0 below) were missed, and the second
# derivative used t0 computed from the new C0.
STALE_CAPTURE_CUSTOM_SAVED = r'''
class F0(T.autograd.Function):
    @staticmethod
    def forward(ctx, a0):
        t0 = a0 * a0
        ctx.save_for_backward(a0, t0, t0)
        return t0

    @staticmethod
    def backward(ctx, g0):
        s0, s1, s2 = ctx.saved_tensors
        return s2

def make_fn():
    C0 = L('C0', (1,), True)

    def fn(x0, x1, x2):
        v2 = 2.0 - C0
        v3 = x0 * v2
        v4 = F0.apply(v3)
        return (v4,)
    return (fn, C0)
fn, C0 = make_fn()

def call0(prev):
    return [L('c0l1', (2,), True), L('c0b1', (2,), True), L('c0b2', (4,), True)[:-1]]

def call1(prev):
    return [L('c1l1', (1, 2), True), L('c1l2', (2,), True), L('c1l3', (4,), True)]

def call2(prev):
    p = [o for o in prev if hasattr(o, 'shape') and tuple(o.shape) == (1, 2)]
    return [p[0], L('c2l2', (2,), True), L('c2shared(2, 4)', (4,), True)[1:]]

def step2():
    with T.no_grad():
        C0.mul_(0.5)
CALLS = [(call0, 'backward'), (call1, 'backward'), (call2, 'double')]
BETWEEN = {2: step2}
'''


def test_stale_capture_custom_saved(jg):
    check(jg, STALE_CAPTURE_CUSTOM_SAVED)


def test_stale_capture_custom_saved_matches_torch(jg, torch):
    check(jg, STALE_CAPTURE_CUSTOM_SAVED, torch)


def _stale_run(T, mode, body):
    """body(x, C0) compiled (or eager, mode None), called, C0 changed in
    place, called on the first output, then a create_graph gradient: the
    gradients, or eager's in-place error."""
    c0 = T.tensor([0.7], requires_grad=True)
    f = T.compile(lambda x: body(x, c0), backend=mode) if mode else (lambda x: body(x, c0))
    x = T.tensor([[1.5, 0.5]], requires_grad=True)
    o = f(x)
    with T.no_grad():
        c0.mul_(0.5)
    y = f(o)
    try:
        g = T.autograd.grad((y * y).sum(), [c0, x], create_graph=True)
        return [t.tolist() for t in g]
    except RuntimeError as e:
        return str(e).split(".")[0]


def test_stale_capture_rerun_equals_eager(jg):
    bodies = [lambda x, c: x * c,  # eager's node saved c: the in-place error
              lambda x, c: (x * (2.0 - c)).sin(),
              lambda x, c: (x * (2.0 - c)).exp() * x,
              lambda x, c: (x.exp() * c.exp()).relu()]
    modes = ["interp"] + (["c"] if jg.HAS_COMPILER else [])
    for b in bodies:
        want = _stale_run(jg, None, b)
        for m in modes:
            assert _stale_run(jg, m, b) == want, m
    assert "modified by an inplace operation" in _stale_run(jg, None, bodies[0])
