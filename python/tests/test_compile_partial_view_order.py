"""Fuzz seed 2402013: a program run in pieces (a value read splits it,
docs/compiler.md "Graph breaks") that returns a view of a tensor its last
piece computed.  The view is a piece output of its own (aliasing its base),
so its gradient and the piece's own use of the view are added at the view,
in eager's order: the .grad is bitwise eager's, as for the same program
without the read (one graph).  Remade from its base only, the view's
gradient reached the piece through the base and differed in the last bit."""
import pytest

SEEDS = (7, 8, 24, 40)


def grads(T, backend, read):
    def prog(x, c):
        s = (1.0 if float(c.sum()) > 0 else -2.0) if read else 1.0
        y = x.clone()
        v = y[0:1]
        z = T.mul(y, v.tanh())
        return T.nn.functional.mse_loss(x, z) * s, v

    out = []
    for seed in SEEDS:
        T.manual_seed(seed)
        x = T.randn(3, requires_grad=True)
        c = T.randn(4, requires_grad=True)
        w = T.randn(1)
        f = prog if backend is None else T.compile(prog, backend=backend)
        loss, v = f(x, c)
        (loss * 1.5 + (v * w).sum()).backward()
        out.append(x.grad.tolist())
    return out


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_one_graph_view_output_grad_bitwise(jg, backend):
    assert grads(jg, backend, read=False) == grads(jg, None, read=False)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pieces_view_output_grad_bitwise(jg, backend):
    assert grads(jg, backend, read=True) == grads(jg, None, read=True)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pieces_view_output_grad_close(jg, backend):
    got, want = grads(jg, backend, read=True), grads(jg, None, read=True)
    for g, e in zip(got, want):
        assert g == pytest.approx(e, rel=1e-6, abs=1e-7)
