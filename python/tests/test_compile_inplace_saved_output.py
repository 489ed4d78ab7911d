"""A tensor an op saves as its own output (exp, sigmoid, softmax, prod ...)
or a custom Function saves with ctx.save_for_backward(out), then written in
place: eager's backward fails ("modified by an inplace operation", naming
the node that saved it, with the versions), as PyTorch's does.  Compiled
programs fail the same way, with the same message and .grad untouched,
whether the write is in the op's graph, in a later piece (a read of a
value splits the program) or the backward runs inside the program.

Outputs eager does not save (max(dim)'s values: only the indices are
kept; std_mean's mean: only the std is) may be written: the backward runs,
compiled as eager."""
import re

import pytest

OPS = {
    "exp": lambda T, x: x.exp(),
    "sigmoid": lambda T, x: x.sigmoid(),
    "tanh": lambda T, x: x.tanh(),
    "relu": lambda T, x: x.relu(),
    "sqrt": lambda T, x: x.sqrt(),
    "pow_tensor": lambda T, x: x.pow(x.detach() * 0 + 2),
    "rpow": lambda T, x: 2.0 ** x,
    "softmax": lambda T, x: x.softmax(-1),
    "log_softmax": lambda T, x: x.log_softmax(-1),
    "prod": lambda T, x: x.prod(),
    "norm": lambda T, x: x.norm(),
    "std": lambda T, x: x.std(),
    "amax": lambda T, x: x.amax(-1),
    "max_dim_values": lambda T, x: x.max(-1)[0],  # not saved: no error
    "std_mean_mean": lambda T, x: T.std_mean(x, -1)[1],  # only the std is saved
    "std_mean_std": lambda T, x: T.std_mean(x, -1)[0],
    "custom_exp": lambda T, x: custom_exp(T).apply(x),
}


UNSAVED = {"max_dim_values", "std_mean_mean"}


def custom_exp(T):
    class Exp(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            out, = ctx.saved_tensors
            return g * out

    return Exp


def whole(T, f):
    def prog(x):
        y = f(T, x)
        y.mul_(2)
        return y
    return prog


def written_in_later_piece(T, f):
    def prog(x):
        y = f(T, x)
        float(y.sum())  # a read: the write is in the next piece
        y.mul_(2)
        return y
    return prog


def read_after_write(T, f):
    def prog(x):
        y = f(T, x)
        y.mul_(2)
        float(y.sum())
        return y * 1
    return prog


def backward_inside(T, f):
    def prog(x):
        y = f(T, x)
        y.mul_(2)
        y.sum().backward()
        return y
    return prog


KINDS = {k.__name__: k for k in (whole, written_in_later_piece, read_after_write,
                                 backward_inside)}
# every op in one graph; the other shapes of program for a few
CASES = [(k, op) for op in OPS for k in KINDS
         if k == "whole" or op in ("exp", "prod", "max_dim_values", "custom_exp")]


def run(T, kind, op, backend=None, calls=1):
    prog = KINDS[kind](T, OPS[op])
    if backend is not None:
        prog = T.compile(prog, backend=backend)
    res = []
    for _ in range(calls):
        x = T.tensor([[0.5, 1.5, 2.0], [0.3, 0.2, 0.9]], dtype=T.float64, requires_grad=True)
        try:
            y = prog(x)
            if kind != "backward_inside":
                y.sum().backward()
            res.append(("ok", y.tolist(), x.grad.tolist()))
        except RuntimeError as e:
            res.append(("error", str(e), x.grad))
    return res


def as_jitgrad_says(res):
    """PyTorch's message as jitgrad words it (docs/python.md: the dtype as
    jitgrad prints it, no anomaly-mode hint)."""
    if res[0] != "error":
        return res
    m = re.sub(r"\[torch\.(Double|Float)Tensor \[([0-9, ]*)\]\]",
               lambda g: "[%s [%s]]" % ({"Double": "f64", "Float": "f32"}[g.group(1)],
                                       g.group(2)), res[1])
    return ("error", re.sub(r"\. Hint: enable anomaly detection.*$", "", m, flags=re.S), res[2])


def close(a, b):
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(close(u, v) for u, v in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-12 * max(1.0, abs(b))
    return a == b


@pytest.mark.parametrize("kind,op", CASES)
def test_eager_matches_torch(torch, jg, kind, op):
    want = as_jitgrad_says(run(torch, kind, op)[0])
    got = run(jg, kind, op)[0]
    assert close(got, want), (got, want)
    # (the cases test what they are named for)
    assert (got[0] == "ok") == (op in UNSAVED)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("kind,op", CASES)
def test_compiled_matches_eager(jg, kind, op, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    want = run(jg, kind, op)[0]
    # (the first call traces, the second replays)
    for got in run(jg, kind, op, backend, calls=2):
        assert got == want
