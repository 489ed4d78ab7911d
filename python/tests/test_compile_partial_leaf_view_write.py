"""Known, open: in a program run in pieces (a value read splits it,
docs/compiler.md "Graph breaks"), an in-place write after the read on a
view of an input leaf that requires grad does not raise eager's (and
PyTorch's) error: the compiled call writes the leaf.  Without the read
(one graph) the call fails before writing, though its message names the
leaf ("a leaf Variable that requires grad ...") where eager names the
view."""
import pytest

def prog_read(x):
    v = x[1:3]
    if float(x.sum()) > -100:
        v.mul_(2)
    return (v * 3).sum()


def prog_one_graph(x):
    v = x[1:3]
    v.mul_(2)
    return (v * 3).sum()


def run(T, prog, backend, match="view of a leaf Variable"):
    x = T.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    f = prog if backend is None else T.compile(prog, backend=backend)
    with pytest.raises(RuntimeError, match=match):
        f(x)
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_eager_and_torch_refuse(jg, torch):
    for T in (jg, torch):
        run(T, prog_read, None)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_one_graph_refuses(jg, backend):
    run(jg, prog_one_graph, backend, match="leaf Variable that requires grad is being used")


@pytest.mark.xfail(strict=True, reason="pieces: the write after the read skips eager's "
                   "view-of-a-leaf check")
@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pieces_refuse(jg, backend):
    run(jg, prog_read, backend)
