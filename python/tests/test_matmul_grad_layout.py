"""matmul's gradients in PyTorch 1.13's layout: mm backward returns a
column-major operand's gradient column-major, so x @ w.t() (F.linear,
nn.Linear) gives w a row-major gradient, laid out like w.  The strides of
torch.autograd.grad's results and the values must match PyTorch's, eager
and compiled (interp, c)."""
import pytest

import numpy as np


def cases():
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    w = r(6, 5)
    return [
        ("linear_2d", r(8, 5), w, lambda T, x, w: x @ w.t()),
        ("linear_1d", r(5), w, lambda T, x, w: x @ w.t()),
        ("linear_3d", r(2, 4, 5), w, lambda T, x, w: x @ w.t()),
        ("F_linear", r(8, 5), w, lambda T, x, w: T.nn.functional.linear(x, w)),
        ("col_major_a", r(5, 8), r(5, 6), lambda T, x, w: x.t() @ w),
        ("plain", r(8, 5), r(5, 6), lambda T, x, w: x @ w),
    ]


def grads(T, name, mode):
    for n, x, w, f in cases():
        if n != name:
            continue
        x = T.tensor(x.tolist(), requires_grad=True)
        w = T.tensor(w.tolist(), requires_grad=True)
        fn = (lambda a, b: f(T, a, b))
        if mode != "eager":
            fn = T.compile(fn, fullgraph=True, backend=mode)
        y = fn(x, w)
        c = T.tensor((np.arange(y.numel(), dtype=np.float32) % 7 - 3).reshape(tuple(y.shape)))
        loss = (y * c).sum()
        if mode == "eager":
            gx, gw = T.autograd.grad(loss, [x, w])
        else:
            loss.backward()
            gx, gw = x.grad, w.grad
        return [(g.stride(), np.array(g.tolist(), dtype=np.float64)) for g in (gx, gw)]
    raise KeyError(name)


NAMES = ["linear_2d", "linear_1d", "linear_3d", "F_linear", "col_major_a", "plain"]


@pytest.mark.parametrize("mode", ["eager", "interp", "c"])
@pytest.mark.parametrize("name", NAMES)
def test_grad_layout_and_values_match_torch(torch, jg, name, mode):
    want = grads(torch, name, "eager")
    got = grads(jg, name, mode)
    for (ws, wv), (gs, gv) in zip(want, got):
        assert gs == ws
        np.testing.assert_allclose(gv, wv, rtol=2e-5, atol=2e-6)
