"""Fuzz seed 3901392: a custom Function returns its expanded input (zero
strides) unchanged, and the program flattens the result.  Eager's output
is a view of that input with its layout, so the flatten copies; traced,
the output's layout was contiguous -- an opaque call's (its forward reads
a value) from a contiguous probe, a traced forward's from the slot's
traced strides, which a view's are not -- so the flatten was recorded as
a view, and a program run in pieces failed with "internal error: a traced
view does not view its base's memory once the base is computed".
Results and gradients are bitwise eager's and match PyTorch's."""
import pytest


def make_fn(T, reads):
    class F(T.autograd.Function):
        @staticmethod
        def forward(ctx, a0, a1):
            if reads:  # an opaque call
                ctx.sign = 1.0 if float(a0.detach().sum()) >= 0 else -1.0
            return a0

        @staticmethod
        def backward(ctx, g0):
            return g0, None

    return F


def seed_prog(T):
    F = make_fn(T, True)

    def f(x):
        v2 = x * (1.0 if float(x.detach().sum()) > 0 else -2.0)
        v3 = x * x
        v5 = F.apply(v2.sum(2, keepdim=True).expand_as(v3), v3)
        return (v5.reshape(-1),)

    return f


def opaque_flatten_then_write(T):
    F = make_fn(T, True)

    def f(x):
        v4 = x.sum(2, keepdim=True) * 2.0
        flat = F.apply(v4.expand_as(x), x).reshape(-1)
        flat.add_(1.0)  # eager: a copy, v4 unchanged
        return flat, v4

    return f


def traced_flatten_then_write(T):
    F = make_fn(T, False)

    def f(x):
        v4 = x.sum(2, keepdim=True) * 2.0
        flat = F.apply(v4.expand_as(x), x).reshape(-1)
        flat.add_(1.0)
        return flat, v4

    return f


def opaque_transposed(T):
    F = make_fn(T, True)

    def f(x):
        v = x * 3.0
        return F.apply(v.transpose(0, 2), x).flatten(), v

    return f


PROGS = {"seed": seed_prog, "opaque_flatten_then_write": opaque_flatten_then_write,
         "traced_flatten_then_write": traced_flatten_then_write,
         "opaque_transposed": opaque_transposed}


def run(T, make, backend):
    prog = make(T)
    f = prog if backend is None else T.compile(prog, backend=backend)
    out = []
    for k in range(2):
        vals = [((i * 7) % 11 - 5) * 0.25 + 0.125 * k for i in range(18)]
        x = T.tensor(vals).reshape(2, 3, 3).requires_grad_(True)
        o = f(x)
        loss = None
        for t in o:
            term = (t * (T.arange(t.numel()).reshape(t.shape) * 0.5 - 0.625)).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        out.append(([t.tolist() for t in o], x.grad.tolist()))
    return out


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("name", sorted(PROGS))
def test_custom_returns_expanded_input_bitwise_eager(jg, backend, name):
    assert run(jg, PROGS[name], backend) == run(jg, PROGS[name], None)


def _flat(x):
    if isinstance(x, list):
        for y in x:
            yield from _flat(y)
    else:
        yield x


@pytest.mark.parametrize("name", sorted(PROGS))
def test_custom_returns_expanded_input_matches_torch(jg, torch, name):
    got = list(_flat(run(jg, PROGS[name], "interp")))
    want = list(_flat(run(torch, PROGS[name], None)))
    assert got == pytest.approx(want, rel=1e-5, abs=1e-5)
