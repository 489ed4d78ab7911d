"""A program that calls loss.backward() (or autograd.grad()) without
retain_graph frees the graph it went through, as eager's backward frees its
saved tensors (also run in pieces, where a read splits it): a
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
        if kind == "pieces":  # a read: the backward runs eagerly between two pieces
            float(loss)
        if kind == "grad":  # autograd.grad frees the graph the same way
            T.autograd.grad(loss, [w])
        else:
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
    first = None if w.grad is None else w.grad.tolist()
    try:
        (loss if again == "loss" else other).backward()
    except RuntimeError as e:
        assert (None if w.grad is None else w.grad.tolist()) == first  # intact
        return "error", str(e), first
    return "ok", first, w.grad.tolist()


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("kind", ["free", "grad", "pieces"])
def test_second_backward_after_in_program_backward_raises(jg, torch, backend, kind):
    eager = run(jg, kind, None)
    assert eager[0] == "error" and eager[1].startswith(FREED)
    assert run(torch, kind, None)[1].startswith(FREED)
    assert run(jg, kind, backend) == eager


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("kind,again", [("retain", "loss"), ("sum", "loss"), ("free", "other")])
def test_second_backward_allowed_as_eager(jg, torch, backend, kind, again):
    eager = run(jg, kind, None, again)
    assert eager[0] == "ok"
    assert run(torch, kind, None, again)[0] == "ok"
    assert run(jg, kind, backend, again) == eager
