"""The write-back of a compiled whole training step: a parameter, momentum
buffer or .grad that is the one owner of its memory takes the new value's
memory after each call (no copy); memory someone can still see -- a NumPy
array or buffer over the tensor, an address read with data_ptr(), a view --
is written in place instead, so it always shows the current values.  Either
way the loop is bitwise the eager one (tests/c/test_compile_writeback.c
checks which tensors moved)."""
import pytest

import jitgrad as T

BACKENDS = ["interp", "c"]
MODES = ["default", "reduce-overhead"]


def make():
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(12, 16), T.nn.ReLU(), T.nn.Linear(16, 3))
    opt = T.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x, y):
        loss = T.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        return loss

    return model, opt, step


def state_bytes(model, opt):
    ps = list(model.parameters())
    return ([p.detach().numpy().tobytes() for p in ps],
            [p.grad.numpy().tobytes() for p in ps],
            [opt.state[p]["momentum_buffer"].numpy().tobytes() for p in ps],
            [p._version for p in ps])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_exported_memory_sees_every_step(backend, mode):
    me, oe, se = make()
    mk, ok, sk = make()
    sk = T.compile(sk, backend=backend, mode=mode, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(8, 12), T.randn(8, 3)
    arrays = ptrs = views = None
    for s in range(6):
        le, lk = se(x, y), sk(x, y)
        assert le.item() == lk.item()
        ps = list(mk.parameters())
        if s == 1:  # the buffers exist after the first (eager) call
            arrays = [ok.state[p]["momentum_buffer"].numpy() for p in ps]
            views = [memoryview(p.grad) for p in ps]
            ptrs = [p.data_ptr() for p in ps]
        if arrays is not None:
            for p, a, v, q in zip(ps, arrays, views, ptrs):
                assert a.tobytes() == ok.state[p]["momentum_buffer"].numpy().tobytes()
                assert v.tobytes() == p.grad.numpy().tobytes()
                assert p.data_ptr() == q
        assert state_bytes(me, oe) == state_bytes(mk, ok)
    for v in views:
        v.release()


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_view_sees_every_step(backend):
    me, oe, se = make()
    mk, ok, sk = make()
    sk = T.compile(sk, backend=backend, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(8, 12), T.randn(8, 3)
    w = mk[0].weight
    flat = w.detach().view(-1)
    for _ in range(5):
        se(x, y)
        sk(x, y)
        assert flat.numpy().tobytes() == w.detach().numpy().tobytes()
        assert state_bytes(me, oe) == state_bytes(mk, ok)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_dict_and_checkpoint_follow_the_parameters(backend):
    """model.state_dict() shares the parameters' memory (as PyTorch's): held
    across compiled steps it shows the current values; a checkpoint saved
    mid-training holds the values of the step it was saved at."""
    import io

    me, oe, se = make()
    mk, ok, sk = make()
    sk = T.compile(sk, backend=backend, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(8, 12), T.randn(8, 3)
    sd = mk.state_dict()
    saved = None
    for s in range(6):
        se(x, y)
        sk(x, y)
        for name, p in mk.named_parameters():
            assert sd[name].numpy().tobytes() == p.detach().numpy().tobytes()
        if s == 2:
            buf = io.BytesIO()
            T.save(mk.state_dict(), buf)
            saved = {k: v.numpy().tobytes() for k, v in mk.state_dict().items()}
        assert state_bytes(me, oe) == state_bytes(mk, ok)
    buf.seek(0)
    loaded = T.load(buf)
    assert {k: v.numpy().tobytes() for k, v in loaded.items()} == saved
