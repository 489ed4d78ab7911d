"""A program that calls loss.backward() without retain_graph frees the
graph it went through, as eager's backward frees its saved tensors: a
second backward through the returned loss after the compiled call raises
eager's (PyTorch's) "Trying to backward through the graph a second time"
and leaves .grad as the first backward left it.  Regression: the returned
loss kept a compiled node that could be backpropagated again.  With
retain_graph=True in the program, or through outputs whose backward
reaches no freed node that saved tensors, the second backward works as in
eager."""
import pytest

FREED = "Trying to backward through the graph a second time"


def program(T, w, kind):
    def prog(x):
        if kind == "sum":  # sum saves no tensors: eager backpropagates again
            loss = (w + x).sum()
        else:
            loss = (w * x).tanh().sum()
        loss.backward(retain_graph=kind == "retain")
        other = (w * x * 2.0).sum()  # not reached by the in-program backward
        return loss, other
    return prog


def run(T, kind, backend, again="loss"):
    w = T.tensor([0.5, -1.0, 2.0], requires_grad=True)
    x = T.tensor([1.0, 2.0, 3.0])
    f = program(T, w, kind)
    if backend is not None:
        f = T.compile(f, backend=backend)
    loss, other = f(x)
    first = w.grad.tolist()
    try:
        (loss if again == "loss" else other).backward()
    except RuntimeError as e:
        assert w.grad.tolist() == first  # intact
        return "error", str(e), first
    return "ok", first, w.grad.tolist()


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_second_backward_after_in_program_backward_raises(jg, torch, backend):
    eager = run(jg, "free", None)
    assert eager[0] == "error" and eager[1].startswith(FREED)
    assert run(torch, "free", None)[1].startswith(FREED)
    assert run(jg, "free", backend) == eager


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("kind,again", [("retain", "loss"), ("sum", "loss"), ("free", "other")])
def test_second_backward_allowed_as_eager(jg, torch, backend, kind, again):
    eager = run(jg, kind, None, again)
    assert eager[0] == "ok"
    assert run(torch, kind, None, again)[0] == "ok"
    assert run(jg, kind, backend, again) == eager
