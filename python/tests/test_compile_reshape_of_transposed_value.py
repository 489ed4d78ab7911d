"""Fuzz seed 3400977: a compiled program flattens a value computed from a
transposed input (x * s keeps x's layout, strides (1, 4), as eager's
elementwise result does).  Eager's reshape of that layout copies; the
tracer judged reshape views from a contiguous base, so the traced flatten
was a view of the value.

Regressions: run in pieces (a value read splits the program), the piece
ending with the flattened tensor live failed ("a traced view does not view
its base's memory once the base is computed"; the caller saw an older,
unrelated error of a custom Function's traced forward); traced whole, a
write into the flattened tensor reached the value, which eager's copy
never does.  Results and gradients are bitwise eager's and match
PyTorch's."""
import pytest


class ReadsInForward:
    """The fuzz program's custom Function: its forward reads a value (an
    opaque call) and returns an object argument's tensor."""

    @staticmethod
    def make(T):
        class F(T.autograd.Function):
            @staticmethod
            def forward(ctx, a0, box):
                sign = 1.0 if float(a0.sum()) >= 0 else -1.0
                ctx.sign = sign
                return box.t * 1.0, a0 * sign

            @staticmethod
            def backward(ctx, g0, g1):
                return g1 * ctx.sign, None

        return F


class Box:
    def __init__(self, t):
        self.t = t


def seed_prog(T):
    F = ReadsInForward.make(T)

    def f(x):
        v1 = x * (1.0 if float(x.sum()) > 0 else -2.0)
        F.apply(x, Box(v1))
        return v1.flatten()

    return f


def read_then_flatten(T):
    def f(x):
        v1 = x * 2.0
        flat = v1.flatten()
        s = float(x.detach().sum())
        return flat * s, v1

    return f


def write_into_flattened(T):
    def f(x):
        v1 = x * 2.0
        flat = v1.flatten()
        flat.add_(1.0)  # eager: a copy, v1 unchanged
        return v1, flat

    return f


PROGS = {"seed": seed_prog, "read_then_flatten": read_then_flatten,
         "write_into_flattened": write_into_flattened}


def run(T, make, backend):
    prog = make(T)
    f = prog if backend is None else T.compile(prog, backend=backend)
    out = []
    for k in range(2):
        b = T.tensor([[0.5, -1.25 + k, 2.0, 0.75], [1.5, -0.25, 0.125 * k, -2.0]],
                     requires_grad=True)
        o = f(b.t())
        o = o if isinstance(o, tuple) else (o,)
        loss = None
        for t in o:
            term = (t * (T.arange(t.numel()).reshape(t.shape) * 0.5 - 0.625)).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        out.append(([t.tolist() for t in o], b.grad.tolist()))
    return out


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("name", sorted(PROGS))
def test_reshape_of_transposed_value_bitwise_eager(jg, backend, name):
    assert run(jg, PROGS[name], backend) == run(jg, PROGS[name], None)


def _flat(x):
    if isinstance(x, list):
        for y in x:
            yield from _flat(y)
    else:
        yield x


@pytest.mark.parametrize("name", sorted(PROGS))
def test_reshape_of_transposed_value_matches_torch(jg, torch, name):
    got = list(_flat(run(jg, PROGS[name], "interp")))
    want = list(_flat(run(torch, PROGS[name], None)))
    assert got == pytest.approx(want, rel=1e-5, abs=1e-5)


def test_later_error_is_not_masked_by_a_recovered_callback_failure(jg):
    """A custom Function's forward that reads a value fails when traced;
    the call goes on as an opaque call, and that failure is not the call's.
    The library's later error is the one raised (regression: the earlier
    read's "cannot read the values of a traced tensor" was raised
    instead, as it was for the seed's piece failure)."""
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            n = 2 if float(a.sum()) > 0 else 3  # zeros when probed: 3
            return a[:n] * 2.0

        @staticmethod
        def backward(ctx, g):
            return None

    f = jg.compile(lambda x: F.apply(x * 1.0), backend="interp")
    with pytest.raises(RuntimeError, match="opaque call's output shapes must not depend") as e:
        f(jg.ones(4, requires_grad=True))
    assert "cannot read the values" not in str(e.value)


def test_callback_error_still_raised_as_its_own_exception(jg):
    """The program's own exception (a ValueError raised after a value read
    split it) still reaches the caller as that exception."""
    def prog(x):
        if float(x.sum()) > 0:
            raise ValueError("the program's own error")
        return x

    f = jg.compile(prog, backend="interp")
    with pytest.raises(ValueError, match="the program's own error"):
        f(jg.ones(3, requires_grad=True))
