"""softmax / log_softmax over rows ending in runs of -inf (a causal
attention's scores): the kernel skips exp over whole masked runs at a
row's end.  Values against PyTorch; the masked positions exactly 0 (-inf
for log_softmax); bitwise the same as rows whose masked entries are a
finite -1e30 (which exp rounds to 0 through the ordinary path); NaN and
all-masked rows as PyTorch gives them; eager == compiled."""
import math

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F

torch = pytest.importorskip("torch")


def causal_scores(b, t, dtype, seed, fill=-math.inf):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, t, t)).astype(dtype)
    mask = np.triu(np.ones((t, t), dtype=bool), 1)
    x[:, mask] = fill
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t", [15, 16, 17, 33, 64, 100])
@pytest.mark.parametrize("log", [False, True])
def test_causal_rows_match_torch_and_finite_mask(dtype, t, log):
    x = causal_scores(3, t, dtype, seed=t)
    f = F.log_softmax if log else F.softmax
    tf = torch.log_softmax if log else torch.softmax
    y = f(jitgrad.tensor(x), dim=-1).numpy()
    want = tf(torch.from_numpy(x), dim=-1).numpy()
    tol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(y, want, rtol=tol, atol=tol)
    mask = np.isinf(x)
    if log:
        assert np.all(y[mask] == -np.inf)
    else:
        assert np.all(y[mask] == 0) and not np.any(np.signbit(y[mask]))
        # the same bits as with a finite mask value that exp rounds to 0
        xf = causal_scores(3, t, dtype, seed=t, fill=-1e30)
        yf = f(jitgrad.tensor(xf), dim=-1).numpy()
        assert y.tobytes() == yf.tobytes()


def test_nan_and_all_masked_rows():
    x = np.full((4, 40), -np.inf, dtype=np.float32)
    x[1, :3] = [0.5, 1.0, -2.0]
    x[2, :5] = [0.5, np.nan, 1.0, 2.0, 3.0]  # a NaN before the masked run
    x[3, :] = np.linspace(-1, 1, 40)          # nothing masked
    y = F.softmax(jitgrad.tensor(x), dim=-1).numpy()
    want = torch.softmax(torch.from_numpy(x), dim=-1).numpy()
    assert np.all(np.isnan(y[0])) and np.all(np.isnan(want[0]))  # all -inf: NaN
    assert np.all(np.isnan(y[2])) and np.all(np.isnan(want[2]))
    np.testing.assert_allclose(y[[1, 3]], want[[1, 3]], rtol=1e-6, atol=1e-7)


def test_compiled_equals_eager_with_grad():
    x0 = causal_scores(2, 48, np.float32, seed=7)

    def step(x):
        return (F.softmax(x * 0.5, dim=-1) * x.detach().clamp(min=-1.0)).sum()

    outs = []
    for fn in (step, jitgrad.compile(step, backend="c")):
        x = jitgrad.tensor(x0, requires_grad=True)
        loss = fn(x)
        loss.backward()
        outs.append((loss.detach().numpy().tobytes(), x.grad.numpy().tobytes()))
    assert outs[0] == outs[1]
