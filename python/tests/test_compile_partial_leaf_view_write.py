"""In-place writes on an input leaf, directly or through a view of it, in
one graph and in a program run in pieces (a value read splits it,
docs/compiler.md "Graph breaks").  Eager mode and PyTorch refuse a write
with grad mode on into a leaf that requires grad ("a leaf Variable ...") or
into a view of one ("a view of a leaf Variable ..."); the compiled call
raises the same message at the same point, having written nothing, and
allows (and applies identically) what eager allows: the write under
no_grad, a leaf that does not require grad.

Regression: in pieces, a view of an input made before the read came back
from the first piece without its view record, so a write through it after
the read was not refused and wrote the leaf; a traced view of a captured
tensor written before the read did not reach the tensor at all."""
import contextlib
import itertools

import pytest

LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW = "a view of a leaf Variable that requires grad is being used in an in-place operation."


def prog_read(x):
    v = x[1:3]
    if float(x.sum()) > -100:
        v.mul_(2)
    return (v * 3).sum()


def prog_one_graph(x):
    v = x[1:3]
    v.mul_(2)
    return (v * 3).sum()


def prog_one_graph_direct(x):
    x.mul_(2)
    return (x * 3).sum()


def raises(T, prog, backend, rg=True):
    x = T.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=rg)
    f = prog if backend is None else T.compile(prog, backend=backend)
    with pytest.raises(RuntimeError) as e:
        f(x)
    assert x.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert x.grad is None
    return str(e.value)


def test_eager_and_torch_refuse(jg, torch):
    for T in (jg, torch):
        assert raises(T, prog_read, None) == VIEW


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_one_graph_message_names_the_view(jg, torch, backend):
    """The message says what was written, the view or the leaf, as
    PyTorch's does."""
    assert raises(jg, prog_one_graph, backend) == raises(torch, prog_one_graph, None) == VIEW
    assert raises(jg, prog_one_graph_direct, backend) == raises(
        torch, prog_one_graph_direct, None) == LEAF


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pieces_refuse(jg, torch, backend):
    assert raises(jg, prog_read, backend) == raises(torch, prog_read, None) == VIEW


def no_grad(T, on):
    return T.no_grad() if on else contextlib.nullcontext()


def make_prog(T, read, depth, grad_write, captured, grad_view=True, op="mul_"):
    """read: 0 none, 1 before the view is made, 2 between the view and the
    write, 3 after the write; depth: 0 the leaf itself, 1 a view, 2 a view
    of a view; grad_write: grad mode on at the write; captured: the leaf is
    a global the program reaches instead of its argument; grad_view: grad
    mode on where the view is made; op: the write (mul_ or copy_)."""
    cell = {}

    def body(x):
        if read == 1:
            float(x.sum())
        v = x
        with no_grad(T, not grad_view):
            if depth >= 1:
                v = v[1:4]
            if depth >= 2:
                v = v[0:2]
        if read == 2:
            float(v.sum())
        with no_grad(T, not grad_write):
            if op == "mul_":
                v.mul_(2)
            else:
                v.copy_(T.ones_like(v) * 7)
        if read == 3:
            float(x.sum())
        return (x * 3).sum() + v.sum()

    if captured:
        def prog(y):
            return body(cell["x"]) + y.sum()
    else:
        def prog(x, y):
            return body(x) + y.sum()
    return prog, cell


def outcome(T, case, backend, calls=2):
    read, depth, grad_write, rg, captured = case[:5]
    prog, cell = make_prog(T, read, depth, grad_write, captured, *case[5:])
    f = prog if backend is None else T.compile(prog, backend=backend)
    got = []
    for _ in range(calls):
        x = T.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=rg)
        y = T.tensor([0.5, -1.0], requires_grad=True)
        cell["x"] = x
        try:
            out = f(y) if captured else f(x, y)
        except RuntimeError as e:
            got.append(("error", str(e), x.tolist(), x.grad, y.grad))
            continue
        out.backward()
        grad = None if x.grad is None else x.grad.tolist()
        got.append((out.item(), x.tolist(), x._version, grad, y.grad.tolist()))
    return got


CASES = list(itertools.product(range(4), range(3), (True, False), (True, False), (False, True),
                               (True,), ("mul_", "copy_")))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "read%d-depth%d-%s-%s-%s-%s" % (
    c[0], c[1], "grad" if c[2] else "nograd", "rg" if c[3] else "norg",
    "captured" if c[4] else "arg", c[6]))
def test_sweep_compiled_as_eager(jg, torch, case):
    """Read position x view depth x grad mode x requires_grad x input or
    captured x mul_ or copy_: the compiled calls give eager's results (values, the leaf
    after the call, its version and gradient) or eager's error, and
    eager's error is PyTorch's."""
    eager = outcome(jg, case, None)
    assert outcome(jg, case, "interp") == eager
    ref = outcome(torch, case, None, calls=1)[0]
    if ref[0] == "error" or eager[0][0] == "error":
        assert eager[0][:3] == ref[:3]


@pytest.mark.parametrize("case", list(itertools.product(range(4), (1, 2), (True, False), (True, False),
                                                        (False, True), (False,))))
def test_sweep_view_made_without_grad(jg, torch, case):
    """The same with the view made under no_grad: eager's "A view was
    created in no_grad mode ..." where grad mode is on at the write and the
    leaf requires grad, in one graph and in pieces.  (PyTorch 1.13 also
    refuses a later use of such a view written under no_grad, which jitgrad
    allows eagerly: compared with PyTorch where grad mode is on at the
    write.)"""
    eager = outcome(jg, case, None)
    assert outcome(jg, case, "interp") == eager
    if case[2]:
        ref = outcome(torch, case, None, calls=1)[0]
        assert (eager[0][0] == "error") == (ref[0] == "error")
        if ref[0] == "error":
            assert eager[0][:3] == ref[:3]


@pytest.mark.parametrize("case", [(3, 1, True, True, False), (3, 2, False, True, False),
                                  (1, 1, False, False, True), (0, 1, True, True, False)])
def test_sweep_c_backend(jg, case):
    assert outcome(jg, case, "c") == outcome(jg, case, None)
