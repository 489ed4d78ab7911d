"""A short training loop (linear -> relu -> linear -> cross_entropy, SGD by
hand) under PyTorch and jitgrad, eager and compiled: the losses and final
parameters must match PyTorch's."""
import pytest

from scenarios import det
from test_torch_compare import close


def train(T, compiled=None, steps=15):
    x = det(T, 8, 4, seed=100, requires_grad=False)
    y = T.tensor([0, 1, 2, 1, 0, 2, 2, 1])
    w1, b1 = det(T, 6, 4, seed=101, scale=0.5), det(T, 6, seed=102, scale=0.1)
    w2, b2 = det(T, 3, 6, seed=103, scale=0.5), det(T, 3, seed=104, scale=0.1)
    params = [w1, b1, w2, b2]

    def loss_fn(x, y, w1, b1, w2, b2):
        h = T.nn.functional.relu(T.nn.functional.linear(x, w1, b1))
        return T.nn.functional.cross_entropy(T.nn.functional.linear(h, w2, b2), y)

    if compiled:
        loss_fn = T.compile(loss_fn, fullgraph=True, backend=compiled)
    losses = []
    for _ in range(steps):
        loss = loss_fn(x, y, *params)
        loss.backward()
        losses.append(loss.item())
        with T.no_grad():
            for p in params:
                p -= 0.5 * p.grad
                p.grad = None
    return losses, [p.detach().tolist() for p in params]


@pytest.mark.parametrize("mode", [None, "interp", "c"])
def test_training_matches_torch(torch, jg, mode):
    want_losses, want_params = train(torch)
    got_losses, got_params = train(jg, mode)
    assert want_losses[-1] < want_losses[0] * 0.8  # it does learn
    assert close(got_losses, want_losses, rtol=1e-4, atol=1e-5), (got_losses, want_losses)
    for g, w in zip(got_params, want_params):
        assert close(g, w, rtol=1e-4, atol=1e-5)
