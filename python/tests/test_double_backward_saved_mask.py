"""A create_graph backward through a compiled call takes a value without
history that the forward saved (a comparison's mask) as saved, instead of
recomputing it from a captured tensor that was changed in place since the
call: eager's backward never reads that tensor, so it must not fail
(fuzz seed 720620)."""
import pytest


@pytest.mark.parametrize("backend", ["eager", "interp", "c"])
def test_mask_from_captured_tensor_modified_after_call(jg, torch, backend):
    def prog(T, mode):
        C0 = T.tensor([0.75], requires_grad=True)

        def fn(x0):
            return x0 / (C0 != x0)

        if mode != "eager":
            fn = T.compile(fn, backend=mode)
        x = T.tensor([[0.5, 0.7, -1.0], [2.0, 0.25, 1.5]], requires_grad=True)
        y = fn(x)
        with T.no_grad():
            C0.mul_(0.5)
        (g,) = T.autograd.grad((y * y).sum(), [x], create_graph=True)
        (g * g).sum().backward()
        return [y.tolist(), g.tolist(), x.grad.tolist()]

    ref = prog(torch, "eager")
    got = prog(jg, backend)
    assert got[0] == ref[0]
    for a, b in zip(got[1:], ref[1:]):
        for ra, rb in zip(a, b):
            assert all(abs(p - q) <= 1e-5 * max(1.0, abs(q)) for p, q in zip(ra, rb))
    if backend != "eager":
        assert got == prog(jg, "eager")
