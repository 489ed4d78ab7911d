"""Fuzz seeds 2501017 and 2501930: a program run in pieces (a value read
splits it, docs/compiler.md "Graph breaks") makes a view of a tensor of its
own (a clone), then writes that tensor in place and returns the view or
uses it.  The view's history is rebased on the written tensor (PyTorch's
CopySlices / AsStridedBackward); the compiled call's gradients are bitwise
eager's and match PyTorch's.

Regression: a piece output that is a view kept the value it had when it
was made, so its gradient skipped the write (x.grad 1.25 where eager and
PyTorch give 0.000375)."""
import pytest


def read(t):
    return float(t.detach().sum()) > -1e9


def seed_prog(read_between, use_after):
    """The fuzz program's shape: read_between, a read between the view and
    the write (the write in a later piece); use_after, the view used
    afterwards instead of returned."""
    def f(x, w):
        s = 1.0 if float(x.detach().sum()) > 0 else -2.0
        v1 = x * s
        v2 = v1 / (v1 * v1 + 1.0)
        y = v1.clone()
        v = y[0:2]
        if read_between:
            read(w)
        y.sub_(v2.contiguous())
        return (v * w[1:3]) if use_after else v

    return f


def view_of_view(x, w):
    read(x)
    y = (x * 2).clone()
    v = y[0:3][1:2]
    y.sub_(x.tanh())
    return v


def written_through_another_view(x, w):
    read(x)
    y = (x * 2).clone()
    v = y[0:2]
    y[1:3].mul_(x[0:2])
    return v


def base_returned_too(x, w):
    read(x)
    y = (x * 2).clone()
    v = y[0:2]
    y.sub_(x.sin())
    return v, y


def read_after_the_write(x, w):
    read(x)
    y = (x * 2).clone()
    v = y[0:2]
    y.sub_(x.sin())
    read(w)
    return v * x[1:3]


def transposed_two_writes(x, w):
    read(x)
    y = (x.reshape(2, 2) * w.reshape(2, 2)).clone()
    v = y.t()[0]
    y.add_(x.reshape(2, 2))
    y.mul_(x.cos().reshape(2, 2))
    return v


PROGS = {f"seed-read{int(r)}-use{int(u)}": seed_prog(r, u)
         for r in (False, True) for u in (False, True)}
PROGS.update({f.__name__: f for f in (view_of_view, written_through_another_view,
                                      base_returned_too, read_after_the_write,
                                      transposed_two_writes)})


def run(T, prog, backend):
    out = []
    f = prog if backend is None else T.compile(prog, backend=backend)
    for k in range(3):
        x = T.tensor([0.5 - k, -1.25, 2.0, 0.75 * k], requires_grad=True)
        w = T.tensor([0.25, -1.5, 0.625 + k, 3.0], requires_grad=True)
        o = f(x, w)
        o = o if isinstance(o, tuple) else (o,)
        loss = None
        for t in o:
            term = (t * (T.arange(t.numel()).reshape(t.shape) * 0.5 - 0.625)).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        out.append(([t.tolist() for t in o], x.grad.tolist(),
                    None if w.grad is None else w.grad.tolist()))
    return out


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("name", sorted(PROGS))
def test_rebased_view_grads_bitwise_eager(jg, backend, name):
    assert run(jg, PROGS[name], backend) == run(jg, PROGS[name], None)


def _flat(x):
    if isinstance(x, list):
        for y in x:
            yield from _flat(y)
    else:
        yield x


@pytest.mark.parametrize("name", sorted(PROGS))
def test_rebased_view_grads_match_torch(jg, torch, name):
    got = run(jg, PROGS[name], "interp")
    want = run(torch, PROGS[name], None)
    for g, e in zip(got, want):
        for a, b in zip(g, e):
            assert (a is None) == (b is None)
            if a is not None:
                assert list(_flat(a)) == pytest.approx(list(_flat(b)), rel=1e-5, abs=1e-6)
