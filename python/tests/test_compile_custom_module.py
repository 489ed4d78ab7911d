"""The seed's custom Function inside a module's forward, with k in two
slots (MyFn.apply(q, k, k, mask_v_grad)), under compile(model) and under a
compiled whole training step: the per-slot gradients survive (k's weight gets
dk + dv, not one slot's gradient), compiled == eager bitwise, and eager
agrees with PyTorch 1.13's eager (which is right where torch.compile is
not)."""
import numpy as np
import pytest

BACKENDS = ["interp", "c"]


def make(T, mask_v_grad):
    class MyFn(T.autograd.Function):  # the seed's function
        @staticmethod
        def forward(ctx, q, k, v, mask_v_grad):
            ctx.save_for_backward(q, k, v)
            ctx.mask_v_grad = mask_v_grad
            return q * (k + v)

        @staticmethod
        def backward(ctx, dout):
            q, k, v = ctx.saved_tensors
            dq = dout * (k + v)
            dk = dout * q
            dv = dout * q
            if ctx.mask_v_grad:
                return dq, dk + dv, None, None
            return dq, dk, dv, None

    class SharedKV(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = T.nn.Linear(6, 6)
            self.k = T.nn.Linear(6, 6, bias=False)
            self.out = T.nn.Linear(6, 3)

        def forward(self, x):
            q, k = self.q(x), self.k(x)
            return self.out(MyFn.apply(q, k, k, mask_v_grad).tanh())

    return SharedKV()


def weights(T, model, src=None):
    """Copies src's weights (numpy) into model, or returns model's."""
    params = list(model.parameters())
    if src is None:
        return [p.detach().numpy().copy() for p in params]
    with T.no_grad():
        for p, w in zip(params, src):
            p.copy_(T.tensor(w))
    return None


def data(T):
    rng = np.random.default_rng(5)
    return (T.tensor(rng.standard_normal((8, 6)).astype(np.float32)),
            T.tensor(rng.standard_normal((8, 3)).astype(np.float32)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask_v_grad", [True, False])
def test_compiled_model_keeps_both_slots(jg, torch, backend, mask_v_grad):
    jg.manual_seed(0)
    eager = make(jg, mask_v_grad)
    w0 = weights(jg, eager)
    x, y = data(jg)

    def grads(model, run):
        model.zero_grad(set_to_none=True)
        jg.nn.functional.mse_loss(run(x), y).backward()
        return [p.grad.numpy().tobytes() for p in model.parameters()]

    ref = grads(eager, eager)
    compiled_model = make(jg, mask_v_grad)
    weights(jg, compiled_model, w0)
    cm = jg.compile(compiled_model, backend=backend, fullgraph=True)
    for _ in range(2):  # the traced call and a cached one
        assert grads(compiled_model, cm) == ref
    # PyTorch 1.13's eager agrees (its compiled mode is what drops a slot)
    tm = make(torch, mask_v_grad)
    weights(torch, tm, w0)
    tx, ty = data(torch)
    torch.nn.functional.mse_loss(tm(tx), ty).backward()
    for p, g in zip(tm.parameters(), ref):
        np.testing.assert_allclose(np.frombuffer(g, np.float32).reshape(p.shape),
                                   p.grad.numpy(), rtol=1e-5, atol=1e-6)
    stats = cm.forward._jitgrad_compiled
    assert stats.entries() == 1 and stats.fallbacks() == 0


def train(T, backend, mask_v_grad, w0):
    model = make(T, mask_v_grad)
    weights(T, model, w0)
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = data(T)

    def step():
        loss = T.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    run = T.compile(step, backend=backend, fullgraph=True) if backend else step
    losses = [run().detach().numpy().tobytes() for _ in range(10)]
    return losses, weights(T, model), run


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask_v_grad", [True, False])
def test_compiled_training_step_keeps_both_slots(jg, backend, mask_v_grad):
    jg.manual_seed(0)
    w0 = weights(jg, make(jg, mask_v_grad))
    ref_losses, ref_w, _ = train(jg, None, mask_v_grad, w0)
    losses, w, run = train(jg, backend, mask_v_grad, w0)
    assert losses == ref_losses
    assert [a.tobytes() for a in w] == [a.tobytes() for a in ref_w]
    # one graph; the first step (which creates the momentum buffers) ran eagerly
    assert run._jitgrad_compiled.entries() == 1 and run._jitgrad_compiled.fallbacks() == 1
    # and k's weight trained at all: a dropped slot would leave a different model
    assert not np.array_equal(w[2], w0[2])
