"""The gradient of two disjoint slices of one tensor (the attention's q and k
out of c_attn, viewed [B, T, H, D] and transposed): compiled, the add of
the two slice gradients is one write (passes/slices.c, slice_backward2)
reading the transposed gradients directly.  It must keep eager's bits: the
add turned a -0 gradient into +0 and kept NaNs, and so does PyTorch."""
import math

import pytest

B, T, H, D = 2, 3, 2, 4
C = H * D
SPECIAL = [-0.0, 1.5, float("nan"), -2.25, float("inf"), 0.0, float("-inf"), 3.0, -0.0, -7.5]


def values(n, seed):
    return [SPECIAL[(i * 7 + seed) % 10] * (1 if i % 3 else -1) for i in range(n)]


def head_split(gap):
    """h [B, T, 2C + gap] -> q = h[..., :C], k = h[..., C + gap:]: gap > 0
    leaves columns no slice reads, gap < 0 overlaps the two."""
    def f(h, w1, w2):
        q = h[:, :, :C].reshape(B, T, H, D).transpose(1, 2)
        k = h[:, :, C + gap:2 * C + gap].reshape(B, T, H, D).transpose(1, 2)
        return q * w1 + k * w2

    return f


def rows(h, w1, w2):
    r = w1.shape[0]
    return h[:r] * w1 + h[r + 1:2 * r + 1] * w2


def bits(xs):
    """each value's bits, any NaN as one (which NaN an op passes on is not
    part of the contract)"""
    return ["nan" if math.isnan(x) else repr(x) for x in xs]


def flat(t):
    return t.detach().reshape(-1).tolist()


def run(lib, name, dtype, backend):
    dt = getattr(lib, dtype)
    if name == "rows":
        f, hs, ws = rows, (7, 5), (3, 5)
    else:
        gap = {"adjacent": 0, "gap": 3, "overlap": -4}[name]
        f, hs, ws = head_split(gap), (B, T, 2 * C + gap), (B, H, T, D)
    if backend is not None:
        f = lib.compile(f, backend=backend)
    out = []
    for call in range(2):
        n = math.prod(hs)
        h = lib.tensor(values(n, 3 + call), dtype=dt).reshape(hs).requires_grad_()
        w1 = lib.tensor(values(math.prod(ws), call), dtype=dt).reshape(ws)
        w2 = lib.tensor(values(math.prod(ws), 5), dtype=dt).reshape(ws)
        o = f(h, w1, w2)
        o.sum().backward()
        out.append((bits(flat(o)), bits(flat(h.grad))))
    return out


NAMES = ["adjacent", "gap", "overlap", "rows"]


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_slice_grads_bitwise_eager(jg, name, dtype, backend):
    assert run(jg, name, dtype, backend) == run(jg, name, dtype, None)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_slice_grads_match_torch(jg, torch, name, dtype):
    """-0 gradients come out +0 and NaNs stay NaN, as in PyTorch."""
    got = run(jg, name, dtype, "c")
    assert got == run(torch, name, dtype, None)


def test_negative_zero_becomes_positive_zero(jg):
    """Regression: a fused write that copied the slice gradients would keep
    their -0; the add (and PyTorch) give +0."""
    f = jg.compile(head_split(0), backend="interp")
    h = jg.zeros(B, T, 2 * C, requires_grad=True)
    w = jg.full((B, H, T, D), -0.0)
    f(h, w, w).sum().backward()
    assert all(repr(x) == "0.0" for x in flat(h.grad))
