"""A compiled call's output that is a view of one of its inputs is a view of
it after the call, as in eager mode: an in-place op on the input afterwards
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
