"""F.batch_norm and nn.BatchNorm1d/2d against PyTorch 1.13: values,
gradients of input/weight/bias, running statistics after several training
steps (momentum and momentum=None), eval outputs, state_dict keys, errors,
and compiled (interp, c) == eager bitwise, the buffers included."""
import pytest


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    a, b = vals(a), vals(b)
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def data(jg, torch, shape, seed, dtype="float64"):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=getattr(torch, dtype)) * 2 + 0.5
    return jg.tensor(t.tolist(), dtype=getattr(jg, dtype)), t


def copy_params(jm, tm):
    import torch
    with torch.no_grad():
        for jp, tp in zip(jm.parameters(), tm.parameters()):
            tp.copy_(tp.new_tensor(vals(jp)).reshape(tp.shape))


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 2e-5)])
@pytest.mark.parametrize("kind,shape", [(1, (6, 3)), (1, (4, 3, 5)), (2, (3, 4, 2, 3))])
def test_module_training_steps_match_torch(jg, torch, dtype, tol, kind, shape):
    c = shape[1]
    jm = getattr(jg.nn, f"BatchNorm{kind}d")(c, momentum=0.3, dtype=getattr(jg, dtype))
    tm = getattr(torch.nn, f"BatchNorm{kind}d")(c, momentum=0.3, dtype=getattr(torch, dtype))
    with jg.no_grad():
        jm.weight.copy_(jg.tensor([0.5 + i for i in range(c)], dtype=getattr(jg, dtype)))
        jm.bias.copy_(jg.tensor([0.25 * i - 0.5 for i in range(c)], dtype=getattr(jg, dtype)))
    copy_params(jm, tm)
    for step in range(3):
        jx, tx = data(jg, torch, shape, seed=step, dtype=dtype)
        jx.requires_grad_(True)
        tx.requires_grad_(True)
        jy, ty = jm(jx), tm(tx)
        assert close(jy, ty, tol)
        (jy * jy * jx).sum().backward()
        (ty * ty * tx).sum().backward()
        assert close(jx.grad, tx.grad, tol * 10)
        assert close(jm.weight.grad, tm.weight.grad, tol * 10)
        assert close(jm.bias.grad, tm.bias.grad, tol * 10)
        assert close(jm.running_mean, tm.running_mean, tol)
        assert close(jm.running_var, tm.running_var, tol)
        assert int(jm.num_batches_tracked) == int(tm.num_batches_tracked) == step + 1
        jm.zero_grad()
        tm.zero_grad()
    jm.eval()
    tm.eval()
    jx, tx = data(jg, torch, shape, seed=9, dtype=dtype)
    assert close(jm(jx), tm(tx), tol)
    assert int(jm.num_batches_tracked) == 3  # eval counts nothing


def test_cumulative_average_and_no_tracking(jg, torch):
    jm = jg.nn.BatchNorm1d(3, momentum=None, affine=False, dtype=jg.float64)
    tm = torch.nn.BatchNorm1d(3, momentum=None, affine=False, dtype=torch.float64)
    for step in range(4):
        jx, tx = data(jg, torch, (5, 3), seed=10 + step)
        assert close(jm(jx), tm(tx), 1e-12)
        assert close(jm.running_mean, tm.running_mean, 1e-12)
        assert close(jm.running_var, tm.running_var, 1e-12)
    # no running stats: batch statistics in training and in eval alike
    jn = jg.nn.BatchNorm2d(2, track_running_stats=False)
    tn = torch.nn.BatchNorm2d(2, track_running_stats=False)
    assert jn.running_mean is None and jn.num_batches_tracked is None
    jx, tx = data(jg, torch, (2, 2, 3, 3), seed=3, dtype="float32")
    assert close(jn(jx), tn(tx), 2e-5)
    jn.eval()
    tn.eval()
    assert close(jn(jx), tn(tx), 2e-5)
    assert list(jn.state_dict().keys()) == list(tn.state_dict().keys())


def test_state_dict_repr_and_reset(jg, torch):
    for args in [dict(), dict(eps=1e-3, momentum=None, affine=False),
                 dict(track_running_stats=False)]:
        jm, tm = jg.nn.BatchNorm2d(4, **args), torch.nn.BatchNorm2d(4, **args)
        assert repr(jm) == repr(tm)
        assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
        assert [n for n, _ in jm.named_buffers()] == [n for n, _ in tm.named_buffers()]
        assert [n for n, _ in jm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    jm = jg.nn.BatchNorm1d(3)
    assert vals(jm.running_var) == [1.0, 1.0, 1.0] and vals(jm.running_mean) == [0.0] * 3
    assert jm.num_batches_tracked.dtype == jg.int64 and jm.num_batches_tracked.dim() == 0
    jm(jg.randn(4, 3))
    jm.reset_running_stats()
    assert vals(jm.running_var) == [1.0, 1.0, 1.0] and int(jm.num_batches_tracked) == 0
    # a state_dict round trip carries the statistics
    jm(jg.randn(4, 3))
    jn = jg.nn.BatchNorm1d(3)
    jn.load_state_dict(jm.state_dict())
    assert vals(jn.running_mean) == vals(jm.running_mean)
    assert int(jn.num_batches_tracked) == 1


def test_running_stats_have_no_history(jg):
    m = jg.nn.BatchNorm1d(2)
    x = jg.randn(4, 2, requires_grad=True)
    y = m(x)
    assert y.grad_fn.name() == "NativeBatchNormBackward0"
    y.sum().backward()
    assert not m.running_mean.requires_grad and m.running_mean.grad_fn is None
    assert not m.running_var.requires_grad and m.running_var.grad_fn is None


def errors(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the type is compared)
        return type(e).__name__, str(e).split("\n")[0]
    return None


def test_errors_match_torch(jg, torch):
    cases = [
        lambda t: t.nn.functional.batch_norm(t.ones(1, 3), t.zeros(3), t.ones(3), training=True),
        lambda t: t.nn.functional.batch_norm(t.ones(2, 3), t.zeros(4), t.ones(3), training=True),
        lambda t: t.nn.functional.batch_norm(t.ones(2, 3), t.zeros(3), t.ones(4), training=True),
        lambda t: t.nn.functional.batch_norm(t.ones(2, 3), t.zeros(3), t.ones(3), t.ones(4)),
        lambda t: t.nn.functional.batch_norm(t.ones(2, 3), t.zeros(3), t.ones(3), None,
                                             t.ones(4)),
        lambda t: t.nn.functional.batch_norm(t.ones(2, 3), None, None, training=False),
        lambda t: t.nn.BatchNorm1d(3)(t.ones(2, 3, 4, 5)),
        lambda t: t.nn.BatchNorm2d(3)(t.ones(2, 3, 4)),
        lambda t: t.nn.BatchNorm1d(3)(t.ones(1, 3)),
    ]
    for k, case in enumerate(cases):
        want = errors(lambda: case(torch))
        assert want is not None
        assert errors(lambda: case(jg)) == want, k
    # a failed call leaves the buffers as they were
    m = jg.nn.BatchNorm1d(3)
    with pytest.raises(ValueError):
        m(jg.ones(1, 3))
    assert vals(m.running_mean) == [0.0] * 3


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_training_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")

    def model():
        jg.manual_seed(5)
        return jg.nn.Sequential(jg.nn.Linear(4, 6), jg.nn.BatchNorm1d(6),
                                jg.nn.LeakyReLU(0.1, inplace=True), jg.nn.Linear(6, 6),
                                jg.nn.BatchNorm1d(6), jg.nn.ReLU(inplace=True), jg.nn.Linear(6, 3))

    em, cm = model(), model()
    eopt = jg.optim.SGD(em.parameters(), lr=0.1)
    copt = jg.optim.SGD(cm.parameters(), lr=0.1)

    def step(m, opt, x):
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    f = jg.compile(lambda x: step(cm, copt, x), backend=backend, fullgraph=True)
    for i in range(3):
        x = jg.randn(8, 4)
        want = step(em, eopt, x)
        got = f(x)
        assert vals(got) == vals(want)
        for (n, a), (_, b) in zip(em.state_dict().items(), cm.state_dict().items()):
            assert vals(a) == vals(b), (i, n)
    # eval mode reads the running statistics the compiled steps wrote
    em.eval()
    cm.eval()
    x = jg.randn(5, 4)
    g = jg.compile(lambda x: cm(x), backend=backend, fullgraph=True)
    assert vals(g(x)) == vals(em(x))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_batch_norm_2d_gradients_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    for dtype in (jg.float32, jg.float64):
        jg.manual_seed(2)
        em, cm = jg.nn.BatchNorm2d(3, dtype=dtype), jg.nn.BatchNorm2d(3, dtype=dtype)
        with jg.no_grad():
            for m in (em, cm):
                m.weight.copy_(jg.tensor([0.5, 2.0, -1.0]))
                m.bias.copy_(jg.tensor([0.1, 0.0, 0.3]))
        x = jg.randn(2, 3, 4, 4, dtype=dtype, requires_grad=True)
        f = jg.compile(lambda x: (cm(x) * x).sum(), backend=backend, fullgraph=True)
        for _ in range(2):
            want = (em(x) * x).sum()
            (wx,) = jg.autograd.grad(want, [x])
            ew, eb = jg.autograd.grad((em(x) * x).sum(), [em.weight, em.bias])
            got = f(x)
            (gx,) = jg.autograd.grad(got, [x])
            cw, cb = jg.autograd.grad(f(x), [cm.weight, cm.bias])
            assert vals(got) == vals(want)
            assert vals(gx) == vals(wx) and vals(cw) == vals(ew) and vals(cb) == vals(eb)
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                assert vals(getattr(cm, name)) == vals(getattr(em, name)), name


def test_double_backward_matches_torch(jg, torch):
    jx, tx = data(jg, torch, (3, 2, 4), seed=21)
    jw, tw = jg.tensor([0.5, -2.0], dtype=jg.float64), torch.tensor([0.5, -2.0],
                                                                     dtype=torch.float64)
    for t in (jx, tx, jw, tw):
        t.requires_grad_(True)
    res = []
    for lib, x, w in ((jg, jx, jw), (torch, tx, tw)):
        y = lib.nn.functional.batch_norm(x, None, None, w, None, training=True)
        gx, gw = lib.autograd.grad((y * y * x).sum(), [x, w], create_graph=True)
        res.append(lib.autograd.grad((gx * gx).sum() + gw.sum(), [x, w]))
    for a, b in zip(*res):
        assert close(a, b, 1e-10)


def test_inplace_activation_after_batch_norm(jg, torch):
    """Regression: the batch_norm node kept its output y, so the usual
    BatchNorm -> ReLU(inplace=True) failed backward with "modified by an
    inplace operation"; it keeps the statistics only, as PyTorch does."""
    res = []
    for lib in (jg, torch):
        m = lib.nn.BatchNorm2d(3, dtype=lib.float64)
        jx, tx = data(jg, torch, (2, 3, 2, 2), seed=30)
        x = (jx if lib is jg else tx).requires_grad_(True)
        y = lib.nn.functional.relu(m(x), inplace=True)
        lib.nn.functional.leaky_relu(m(x), 0.1, inplace=True).sum().backward()
        (y * y).sum().backward()
        # the bias may change in place too: the backward never reads it
        with lib.no_grad():
            m.bias.add_(1.0)
        m(x).sum().backward()
        res.append((x.grad, m.weight.grad, m.bias.grad))
    for a, b in zip(*res):
        assert close(a, b, 1e-10)
