"""Every scenario of scenarios.py under PyTorch (the reference, eager) and
under jitgrad: eager, compiled with the interpreter and with the C backend.
Values and gradients must agree to float32 rounding; a leaf without a
gradient must have none in both."""
import math

import pytest

from scenarios import SCENARIOS

def close(a, b, rtol=2e-5, atol=2e-6):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return abs(a - b) <= atol + rtol * abs(b)


def run(T, name, mode):
    make, fn = SCENARIOS[name]
    leaves = make(T)

    def f(*a):
        return fn(T, *a)

    if mode != "eager":
        f = T.compile(f, fullgraph=True, backend=mode)
    out = f(*leaves)
    loss = out if out.dim() == 0 else out.sum()
    loss.backward()
    return {"out": out.detach().tolist(), "loss": loss.item(),
            "grads": [None if x.grad is None else x.grad.tolist() for x in leaves]}


_ref_cache = {}


def reference(torch, name):
    if name not in _ref_cache:
        _ref_cache[name] = run(torch, name, "eager")
    return _ref_cache[name]


@pytest.mark.parametrize("mode", ["eager", "interp", "c"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(torch, jg, name, mode):
    want = reference(torch, name)
    got = run(jg, name, mode)
    assert close(got["out"], want["out"]), (got["out"], want["out"])
    assert [g is None for g in got["grads"]] == [g is None for g in want["grads"]]
    for i, (g, w) in enumerate(zip(got["grads"], want["grads"])):
        assert close(g, w), (i, g, w)


def test_needs_input_grad_matches(torch, jg):
    from scenarios import det, fns

    seen = {}
    for T in (torch, jg):
        cls = fns(T)["NeedsGrad"]
        cls.seen.clear()
        a = det(T, 3, seed=1)
        b = det(T, 3, seed=2, requires_grad=False)
        cls.apply(a, 7, b).sum().backward()
        seen[T.__name__] = list(cls.seen)
    assert seen["jitgrad"] == seen["torch"] == [(True, False, False)] * 2
