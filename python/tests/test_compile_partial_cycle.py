"""A program run in pieces (a value read splits it, docs/compiler.md "Graph
breaks") frees all it made once its results and the compiled function are
gone, also when a captured tensor is written through a view after a piece
ran, with an operand the piece computed.

Regression: the tensor's new history holds the piece's compiled node, and
the node held the tensor -- through the piece's entry, which kept the
call's tensors (a view made before the read), or through the inputs the
node saves for a create_graph rerun (a view made after a write of the
tensor) -- a reference cycle in C that Python's gc cannot see, so the
tensor, its views and the compiled pieces were never freed
(tests/c/test_compile_pieces.c, test_pieces_free_captured_views)."""
import gc

import pytest


def make_prog(jg, b, view_first):
    def prog(x):
        x.sum().item()  # a read: the program runs in pieces
        v = b[1:3] if view_first else None
        b.mul_(2)
        if v is None:
            v = b[1:3]
        v[0:1].add_(x[0:1])  # reaches b, with history from the piece
        return (v * v * x[0:2]).sum()

    return prog


def call_all(jg, backend, view_first, compiled):
    b = jg.ones(64)  # (64 floats: tensors of 64 bytes or less are not counted)
    prog = make_prog(jg, b, view_first)
    f = jg.compile(prog, backend=backend) if compiled else prog
    results = []
    for _ in range(3):
        x = jg.linspace(-1, 1, 64).requires_grad_()
        y = f(x)
        y.backward()
        results.append((y.item(), b.tolist(), x.grad.tolist()))
    if compiled:
        assert f._jitgrad_compiled.graphs_run() > 3  # (pieces ran)
    return results


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("view_first", [True, False])
def test_pieces_free_captured_views(jg, backend, view_first):
    gc.collect()
    base = jg.memory_allocated()
    eager = call_all(jg, backend, view_first, False)
    gc.collect()
    assert jg.memory_allocated() == base
    for _ in range(3):  # a fresh compiled function each time
        assert call_all(jg, backend, view_first, True) == eager
        gc.collect()
        assert jg.memory_allocated() == base
