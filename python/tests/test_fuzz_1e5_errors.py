"""Compiled calls that failed or dropped a gradient where eager does not,
found by a 10^5-program fuzz run (fuzz/, features fn_object_arg and
double_backward off): each minimized program runs eager, compiled (interp
and c, bitwise equal to eager) and under PyTorch (within float tolerance)."""
import os
import sys

import pytest

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


# seed 116821: a tensor kept as a ctx attribute (not saved) and read by backward
# is read as it is then, as in eager: an in-place change between the forward
# and the backward is no error (only saved tensors are version-checked)
CTX_ATTRIBUTE_MODIFIED_BETWEEN_CALLS = r'''
class F0(T.autograd.Function):

    @staticmethod
    def forward(ctx, a0, a1, k2, k3, a4, a5):
        ctx.keep = a1
        return a4

    @staticmethod
    def backward(ctx, g0):
        return (g0, g0 * ctx.keep, None, None, None, g0)

def make_fn():
    C0 = L('C0', (1,), True)

    def fn(x0):
        v1 = F0.apply(C0, C0, True, False, C0, C0)
        v3 = v1 - x0
        return (v3,)
    return (fn, C0)
fn, C0 = make_fn()

def call0(prev):
    l1 = L('c0l1', (4,), True)
    return [l1]

def call1(prev):
    l1 = L('c1l1', (4, 4, 4), True)
    return [l1]

def call2(prev):
    p = [o for o in prev if hasattr(o, 'shape') and tuple(o.shape) == (4, 4, 4)]
    return [p[0]]

def step2():
    with T.no_grad():
        C0.add_(1.0)
CALLS = [(call0, 'backward'), (call1, 'grad'), (call2, 'backward')]
BETWEEN = {2: step2}
'''


def test_ctx_attribute_modified_in_place_after_forward(jg):
    check(jg, CTX_ATTRIBUTE_MODIFIED_BETWEEN_CALLS)


def test_ctx_attribute_modified_in_place_after_forward_matches_torch(jg, torch):
    check(jg, CTX_ATTRIBUTE_MODIFIED_BETWEEN_CALLS, torch)


# seed 134308: an opaque call's output marked non-differentiable has no history
# in the replay: the compiled backward passes nothing through it (as eager)
# instead of differentiating it
NON_DIFFERENTIABLE_INPUT_RETURNED = r'''
class F0(T.autograd.Function):

    @staticmethod
    def forward(ctx, a0, a1, k2, a3, k4, a5):
        sign = 1.0 if float(a0.sum()) >= 0 else -1.0
        ctx.mark_non_differentiable(a1)
        return (a0, a1)

    @staticmethod
    def backward(ctx, g0, g1):
        return (g0, g0, None, g0, None, g1)

class F1(T.autograd.Function):

    @staticmethod
    def forward(ctx, a0, a1, k2, k3, a4):
        return (a0, a1, a1)

    @staticmethod
    def backward(ctx, g0, g1, g2):
        return (g1, g0, None, None, None)

def fn(x1):
    v3, v4 = F0.apply(x1, x1, 'one', x1, 0.5, x1)
    r8 = F0.apply(v3, v4, 'both', v3, 3, v3)
    v6 = r8[0]
    v7 = r8[1]
    v10, v11, v12 = F1.apply(v7, v3, 'one', False, v6)
    return v12

def call1(prev):
    l2 = L('c1l2', (3,), True)
    return [l2]
CALLS = [(call1, 'backward')]
'''


def test_non_differentiable_returned_input_chain(jg):
    check(jg, NON_DIFFERENTIABLE_INPUT_RETURNED)


def test_non_differentiable_returned_input_chain_matches_torch(jg, torch):
    check(jg, NON_DIFFERENTIABLE_INPUT_RETURNED, torch)


# seed 164279: an opaque call (set_materialize_grads(False)) reached without
# gradients still runs its backward with None, as eager does: the slot it
# answers with zeros gets a zero .grad, not None
NO_MATERIALIZE_INPUT_RETURNED = r'''
class F0(T.autograd.Function):

    @staticmethod
    def forward(ctx, a0, a1):
        sign = 1.0 if float(a0) >= 0 else -1.0
        ctx.set_materialize_grads(False)
        ctx.shape = tuple(a0.shape)
        return (a1, a1, a0)

    @staticmethod
    def backward(ctx, g0, g1, g2):
        g0 = T.zeros(ctx.shape)
        return (g0, None)

def fn(x0, x1):
    v2, v3, v4 = F0.apply(x1, x0)
    return (v2,)

def call1(prev):
    b0 = L('c1b0', (4,), True)
    l1 = L('c1l1', (1,), True)
    return [b0.expand(4, 4), l1]

def call2(prev):
    p = [o for o in prev if hasattr(o, 'shape') and tuple(o.shape) == (4, 4)]
    shared = L('c2shared(2,)', (2,), True)
    return [p[0], shared[1:]]
CALLS = [(call1, 'grad'), (call2, 'backward')]
'''


def test_opaque_returned_input_grad_kept(jg):
    check(jg, NO_MATERIALIZE_INPUT_RETURNED)


def test_opaque_returned_input_grad_kept_matches_torch(jg, torch):
    check(jg, NO_MATERIALIZE_INPUT_RETURNED, torch)
