"""nn.PReLU / F.prelu, nn.InstanceNorm1d/2d / F.instance_norm, F.interpolate
/ nn.Upsample*, nn.ConvTranspose1d/2d / F.conv_transpose1d/2d against
PyTorch 1.13: values and gradients on random inputs (float32, float64),
PyTorch's errors, and compiled (fullgraph) forward + backward == eager
bitwise."""
import pytest

DTYPES = [("float64", 1e-12), ("float32", 3e-5)]


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    a, b = vals(a), vals(b)
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def pair(jg, torch, shape, seed, dtype, grad=True):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(tuple(shape), generator=g, dtype=getattr(torch, dtype))
    j = jg.tensor(t.tolist(), dtype=getattr(jg, dtype))
    if grad:
        t.requires_grad_(True)
        j.requires_grad_(True)
    return j, t


def check(jg, torch, jf, tf, jins, tins, tol, seed=99):
    """jf(*jins) against tf(*tins): values, and the gradients of every input
    that requires grad for a random upstream gradient."""
    jy, ty = jf(*jins), tf(*tins)
    assert tuple(jy.shape) == tuple(ty.shape)
    assert close(jy, ty, tol), (vals(jy)[:6], vals(ty)[:6])
    jg_, tg_ = pair(jg, torch, tuple(ty.shape), seed, str(ty.dtype).split(".")[1], grad=False)
    wants = [t for t in tins if t is not None and t.requires_grad]
    haves = [j for j in jins if j is not None and j.requires_grad]
    tgr = torch.autograd.grad((ty * tg_).sum(), wants)
    jgr = jg.autograd.grad((jy * jg_).sum(), haves)
    for a, b in zip(jgr, tgr):
        assert close(a, b, tol * 10), (vals(a)[:6], vals(b)[:6])


def raises(fn, exc, text):
    with pytest.raises(exc) as e:
        fn()
    assert str(e.value) == text, str(e.value)


def torch_text(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (the oracle's message, whatever its type)
        return type(e).__name__, str(e)
    return None


def same_error(jg_fn, torch_fn):
    want = torch_text(torch_fn)
    assert want is not None
    got = torch_text(jg_fn)
    assert got == want


# ---------------------------------------------------------------- prelu

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape,n", [((2, 3, 4, 5), 3), ((2, 3, 4, 5), 1), ((4, 6), 6),
                                     ((7,), 1), ((3, 2, 5), 2), ((), 1)])
def test_prelu_matches_torch(jg, torch, dtype, tol, shape, n):
    jx, tx = pair(jg, torch, shape, 1, dtype)
    jw, tw = pair(jg, torch, (n,), 2, dtype)
    check(jg, torch, jg.nn.functional.prelu, torch.nn.functional.prelu, (jx, jw), (tx, tw), tol)


def test_prelu_module(jg, torch):
    m = jg.nn.PReLU(3, init=0.1)
    assert repr(m) == repr(torch.nn.PReLU(3, init=0.1)) == "PReLU(num_parameters=3)"
    assert vals(m.weight) == pytest.approx([0.1] * 3)
    assert list(m.state_dict()) == ["weight"]
    assert vals(jg.nn.PReLU().weight) == [0.25]
    x = jg.tensor([[-2.0, 1.0, -4.0], [3.0, -1.0, 0.0]])
    assert vals(m(x)) == pytest.approx([-0.2, 1.0, -0.4, 3.0, -0.1, 0.0])
    m(x).sum().backward()
    assert vals(m.weight.grad) == pytest.approx([-2.0, -1.0, -4.0])


def test_prelu_errors(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    for shape, wshape in [((2, 3, 4), (2,)), ((2, 3), (3, 1)), ((3,), (3,)), ((), (3,))]:
        same_error(lambda: F.prelu(jg.ones(shape), jg.ones(wshape)),
                   lambda: TF.prelu(torch.ones(shape), torch.ones(wshape)))
    same_error(lambda: F.prelu(jg.ones(2, 3), jg.ones(1, dtype=jg.float64)),
               lambda: TF.prelu(torch.ones(2, 3), torch.ones(1, dtype=torch.float64)))


# ---------------------------------------------------------------- instance_norm

@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape,affine", [((2, 3, 5), False), ((3, 4, 6), True),
                                          ((2, 3, 4, 5), True), ((1, 2, 3, 3), False)])
def test_instance_norm_functional_matches_torch(jg, torch, dtype, tol, shape, affine):
    jx, tx = pair(jg, torch, shape, 3, dtype)
    jw, tw = pair(jg, torch, (shape[1],), 4, dtype) if affine else (None, None)
    jb, tb = pair(jg, torch, (shape[1],), 5, dtype) if affine else (None, None)
    check(jg, torch, lambda x, w, b: jg.nn.functional.instance_norm(x, weight=w, bias=b,
                                                                    eps=1e-3),
          lambda x, w, b: torch.nn.functional.instance_norm(x, weight=w, bias=b, eps=1e-3),
          (jx, jw, jb), (tx, tw, tb), tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("kind,shape", [(1, (3, 4, 5)), (1, (4, 6)), (2, (2, 4, 3, 5)),
                                        (2, (4, 3, 3))])
def test_instance_norm_module_tracking_matches_torch(jg, torch, dtype, tol, kind, shape):
    c = shape[-kind - 1]
    jm = getattr(jg.nn, f"InstanceNorm{kind}d")(c, momentum=0.3, affine=True,
                                                track_running_stats=True,
                                                dtype=getattr(jg, dtype))
    tm = getattr(torch.nn, f"InstanceNorm{kind}d")(c, momentum=0.3, affine=True,
                                                   track_running_stats=True,
                                                   dtype=getattr(torch, dtype))
    assert repr(jm) == repr(tm)
    assert list(jm.state_dict()) == list(tm.state_dict())
    with jg.no_grad(), torch.no_grad():
        w = [0.5 + i for i in range(c)]
        jm.weight.copy_(jg.tensor(w, dtype=getattr(jg, dtype)))
        tm.weight.copy_(torch.tensor(w, dtype=getattr(torch, dtype)))
    for step in range(3):
        jx, tx = pair(jg, torch, shape, 10 + step, dtype)
        check(jg, torch, jm, tm, (jx,), (tx,), tol, seed=step)
        jy, ty = jm(jx), tm(tx)
        jg.autograd.grad(jy.sum(), [jm.weight, jm.bias])
        g = torch.autograd.grad(ty.sum(), [tm.weight, tm.bias])
        assert close(jm.running_mean, tm.running_mean, tol)
        assert close(jm.running_var, tm.running_var, tol)
        assert g is not None
    jm.eval()
    tm.eval()
    jx, tx = pair(jg, torch, shape, 30, dtype)
    check(jg, torch, jm, tm, (jx,), (tx,), tol)
    assert close(jm.running_mean, tm.running_mean, tol)


def test_instance_norm_defaults_and_errors(jg, torch):
    m = jg.nn.InstanceNorm2d(3)
    assert repr(m) == repr(torch.nn.InstanceNorm2d(3))
    assert m.weight is None and m.running_mean is None and list(m.state_dict()) == []
    F, TF = jg.nn.functional, torch.nn.functional
    same_error(lambda: F.instance_norm(jg.ones(2, 3)), lambda: TF.instance_norm(torch.ones(2, 3)))
    same_error(lambda: F.instance_norm(jg.ones(1, 3, 1)),
               lambda: TF.instance_norm(torch.ones(1, 3, 1)))
    same_error(lambda: F.instance_norm(jg.ones(2, 3, 4), use_input_stats=False),
               lambda: TF.instance_norm(torch.ones(2, 3, 4), use_input_stats=False))
    same_error(lambda: jg.nn.InstanceNorm2d(3)(jg.ones(3, 4)),
               lambda: torch.nn.InstanceNorm2d(3)(torch.ones(3, 4)))
    same_error(lambda: jg.nn.InstanceNorm1d(3)(jg.ones(2, 3, 4, 5)),
               lambda: torch.nn.InstanceNorm1d(3)(torch.ones(2, 3, 4, 5)))
    same_error(lambda: jg.nn.InstanceNorm1d(3, affine=True)(jg.ones(2, 4, 5)),
               lambda: torch.nn.InstanceNorm1d(3, affine=True)(torch.ones(2, 4, 5)))
    same_error(lambda: F.instance_norm(jg.ones(2, 4, 5), running_mean=jg.ones(3),
                                       running_var=jg.ones(3)),
               lambda: TF.instance_norm(torch.ones(2, 4, 5), running_mean=torch.ones(3),
                                        running_var=torch.ones(3)))
    # a failed call leaves the running statistics as they were
    m = jg.nn.InstanceNorm1d(3, track_running_stats=True)
    with pytest.raises(RuntimeError):
        m(jg.ones(2, 4, 5))
    assert vals(m.running_mean) == [0.0] * 3 and vals(m.running_var) == [1.0] * 3


# ---------------------------------------------------------------- interpolate

INTERP = [
    # (shape, kwargs)
    ((2, 3, 5), dict(scale_factor=2)),
    ((2, 3, 5), dict(size=9)),
    ((2, 3, 7), dict(size=3)),
    ((1, 2, 6), dict(scale_factor=1.7)),
    ((1, 2, 6), dict(scale_factor=0.45)),
    ((1, 2, 6), dict(scale_factor=1.7, recompute_scale_factor=True)),
    ((2, 2, 5, 7), dict(scale_factor=2)),
    ((2, 2, 5, 7), dict(size=(3, 11))),
    ((1, 3, 4, 5), dict(scale_factor=(1.3, 2.6))),
    ((1, 3, 9, 4), dict(scale_factor=(0.7, 3))),
    ((1, 1, 3, 3), dict(size=(1, 7))),
    ((2, 3, 5, 5), dict(size=5)),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("shape,kw", INTERP)
@pytest.mark.parametrize("mode,align", [("nearest", None), ("linear", False), ("linear", True)])
def test_interpolate_matches_torch(jg, torch, dtype, tol, shape, kw, mode, align):
    if mode == "linear" and len(shape) == 4:
        mode = "bilinear"
    jx, tx = pair(jg, torch, shape, 7, dtype)
    kw = dict(kw, mode=mode, align_corners=align)
    check(jg, torch, lambda x: jg.nn.functional.interpolate(x, **kw),
          lambda x: torch.nn.functional.interpolate(x, **kw), (jx,), (tx,), tol)


def test_interpolate_indices_and_weights_bitwise(jg, torch):
    # each channel a one-hot plane: the output shows every source index and
    # weight (products of weights for bilinear) as PyTorch computes them in
    # float / double; nearest is pure indexing, so any input is bitwise
    for shape, kw in INTERP:
        spatial = shape[2:]
        n = 1
        for s in spatial:
            n *= s
        for dtype in ("float32", "float64"):
            t = torch.eye(n, dtype=getattr(torch, dtype)).reshape(1, n, *spatial)
            j = jg.tensor(t.tolist(), dtype=getattr(jg, dtype))
            rx, jx = pair(jg, torch, shape, 8, dtype, grad=False)
            for mode, align in [("nearest", None), ("linear", False), ("linear", True)]:
                if mode == "linear" and len(shape) == 4:
                    mode = "bilinear"
                k = dict(kw, mode=mode, align_corners=align)
                assert vals(jg.nn.functional.interpolate(j, **k)) == \
                    vals(torch.nn.functional.interpolate(t, **k)), (shape, k)
                if mode == "nearest":
                    assert vals(jg.nn.functional.interpolate(rx, **k)) == \
                        vals(torch.nn.functional.interpolate(jx, **k)), (shape, k)


def test_upsample_modules(jg, torch):
    cases = [("Upsample", dict(scale_factor=2)), ("Upsample", dict(size=3, mode="bilinear",
                                                                   align_corners=True)),
             ("Upsample", dict(scale_factor=2.5)), ("UpsamplingNearest2d", dict(scale_factor=2)),
             ("UpsamplingBilinear2d", dict(size=(3, 4))),
             ("UpsamplingBilinear2d", dict(scale_factor=1.5))]
    for name, kw in cases:
        jm, tm = getattr(jg.nn, name)(**kw), getattr(torch.nn, name)(**kw)
        assert repr(jm) == repr(tm)
        jx, tx = pair(jg, torch, (2, 3, 4, 5), 9, "float64")
        check(jg, torch, jm, tm, (jx,), (tx,), 1e-12)


def test_interpolate_errors(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional
    cases = [((2, 3, 4, 5), dict(scale_factor=2, align_corners=True)),
             ((2, 3, 4, 5), dict(size=3, mode="linear")),
             ((2, 3, 4), dict(size=3, mode="bilinear")),
             ((2, 3, 4, 5), dict(size=(3, 3), scale_factor=2)),
             ((2, 3, 4, 5), dict()),
             ((2, 3, 4, 5), dict(size=(3, 3, 3))),
             ((2, 3, 4, 5), dict(scale_factor=(2, 2, 2))),
             ((2, 3, 4, 5), dict(size=3, mode="foo")),
             ((2, 3), dict(size=3)),
             ((2, 3, 4, 5), dict(size=0)),
             ((2, 3, 4, 5), dict(scale_factor=0.1)),
             ((2, 3, 4), dict(size=0, mode="linear")),
             ((2, 3, 4, 5), dict(size=3, recompute_scale_factor=True)),
             ((2, 3, 4, 5), dict(scale_factor=1.7, antialias=True))]
    for shape, kw in cases:
        same_error(lambda: F.interpolate(jg.ones(*shape), **kw),
                   lambda: TF.interpolate(torch.ones(*shape), **kw))
    same_error(lambda: F.interpolate(jg.ones(2, 3, 4, dtype=jg.int64), scale_factor=2),
               lambda: TF.interpolate(torch.ones(2, 3, 4, dtype=torch.int64), scale_factor=2))
    with pytest.raises(NotImplementedError, match="jitgrad: interpolate supports"):
        F.interpolate(jg.ones(1, 1, 4, 4), size=3, mode="bicubic")


# ---------------------------------------------------------------- conv_transpose

CT2 = [
    # (x shape, w shape, kwargs)
    ((2, 4, 5, 5), (4, 3, 3, 3), dict()),
    ((2, 4, 5, 6), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 4, 3), (4, 2, 3, 3), dict(stride=(2, 3), padding=(0, 2), output_padding=(1, 2),
                                      groups=2)),
    ((2, 6, 3, 4), (6, 1, 2, 3), dict(dilation=2, groups=3, padding=1)),
    ((1, 2, 3, 3), (2, 3, 3, 3), dict(stride=1, dilation=3, output_padding=2, padding=2)),
    ((4, 3, 3), (4, 2, 2, 2), dict(stride=2)),
]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CT2)
@pytest.mark.parametrize("bias", [False, True])
def test_conv_transpose2d_matches_torch(jg, torch, dtype, tol, xs, ws, kw, bias):
    jx, tx = pair(jg, torch, xs, 11, dtype)
    jw, tw = pair(jg, torch, ws, 12, dtype)
    jb, tb = pair(jg, torch, (ws[1] * kw.get("groups", 1),), 13, dtype) if bias else (None, None)
    check(jg, torch, lambda x, w, b: jg.nn.functional.conv_transpose2d(x, w, b, **kw),
          lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kw),
          (jx, jw, jb), (tx, tw, tb), tol * 3)


CT1 = [((2, 4, 5), (4, 3, 3), dict()),
       ((2, 4, 6), (4, 3, 2), dict(stride=3, padding=1, output_padding=2)),
       ((1, 6, 4), (6, 1, 3), dict(dilation=2, groups=3)),
       ((4, 7), (4, 2, 3), dict(stride=2, padding=1))]


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("xs,ws,kw", CT1)
def test_conv_transpose1d_matches_torch(jg, torch, dtype, tol, xs, ws, kw):
    jx, tx = pair(jg, torch, xs, 14, dtype)
    jw, tw = pair(jg, torch, ws, 15, dtype)
    jb, tb = pair(jg, torch, (ws[1] * kw.get("groups", 1),), 16, dtype)
    check(jg, torch, lambda x, w, b: jg.nn.functional.conv_transpose1d(x, w, b, **kw),
          lambda x, w, b: torch.nn.functional.conv_transpose1d(x, w, b, **kw),
          (jx, jw, jb), (tx, tw, tb), tol * 3)


def test_conv_transpose_double_backward_matches_torch(jg, torch):
    jx, tx = pair(jg, torch, (2, 4, 3, 3), 17, "float64")
    jw, tw = pair(jg, torch, (4, 2, 2, 2), 18, "float64")
    jy = jg.nn.functional.conv_transpose2d(jx, jw, stride=2, padding=1, output_padding=1)
    ty = torch.nn.functional.conv_transpose2d(tx, tw, stride=2, padding=1, output_padding=1)
    (jgx,) = jg.autograd.grad((jy * jy).sum(), [jx], create_graph=True)
    (tgx,) = torch.autograd.grad((ty * ty).sum(), [tx], create_graph=True)
    assert close(jgx, tgx, 1e-12)
    assert close(jg.autograd.grad(jgx.sum(), [jw])[0], torch.autograd.grad(tgx.sum(), [tw])[0],
                 1e-12)


def test_conv_transpose_modules(jg, torch):
    for n, args, kw in [(2, (4, 6, 3), dict(stride=2, output_padding=1, groups=2, bias=False,
                                          dilation=2, padding=1)),
                        (1, (4, 6, 3), dict()), (2, (4, 6, (2, 3)), dict(stride=(1, 2)))]:
        jm = getattr(jg.nn, f"ConvTranspose{n}d")(*args, **kw)
        tm = getattr(torch.nn, f"ConvTranspose{n}d")(*args, **kw)
        assert repr(jm) == repr(tm)
        assert list(jm.state_dict()) == list(tm.state_dict())
        for k, v in jm.state_dict().items():
            assert tuple(v.shape) == tuple(tm.state_dict()[k].shape)
        k = args[2] if isinstance(args[2], tuple) else (args[2],) * n
        # kaiming_uniform(a=sqrt(5)): 1 / sqrt(fan_in), fan_in = out / groups * prod(kernel)
        bound = 1 / (6 / kw.get("groups", 1) * k[0] * k[-1] ** (n - 1)) ** 0.5
        assert max(abs(v) for v in vals(jm.weight)) <= bound
    m = jg.nn.ConvTranspose2d(4, 6, 3, stride=2)
    tm = torch.nn.ConvTranspose2d(4, 6, 3, stride=2)
    assert tuple(m(jg.ones(2, 4, 5, 5), output_size=[12, 12]).shape) == (2, 6, 12, 12)
    assert tuple(m(jg.ones(2, 4, 5, 5), output_size=(2, 6, 11, 12)).shape) == (2, 6, 11, 12)
    same_error(lambda: m(jg.ones(2, 4, 5, 5), output_size=[14, 14]),
               lambda: tm(torch.ones(2, 4, 5, 5), output_size=[14, 14]))
    same_error(lambda: m(jg.ones(2, 4, 5, 5), output_size=[1, 14, 14]),
               lambda: tm(torch.ones(2, 4, 5, 5), output_size=[1, 14, 14]))
    same_error(lambda: jg.nn.ConvTranspose2d(4, 3, 3, groups=2),
               lambda: torch.nn.ConvTranspose2d(4, 3, 3, groups=2))
    same_error(lambda: jg.nn.ConvTranspose2d(4, 3, 3, padding_mode="reflect"),
               lambda: torch.nn.ConvTranspose2d(4, 3, 3, padding_mode="reflect"))


def test_conv_transpose_errors(jg, torch):
    F, TF = jg.nn.functional, torch.nn.functional

    def both(xs, ws, bs=None, wdtype="float32", **kw):
        same_error(
            lambda: F.conv_transpose2d(jg.ones(*xs), jg.ones(*ws, dtype=getattr(jg, wdtype)),
                                       None if bs is None else jg.ones(*bs), **kw),
            lambda: TF.conv_transpose2d(torch.ones(*xs),
                                        torch.ones(*ws, dtype=getattr(torch, wdtype)),
                                        None if bs is None else torch.ones(*bs), **kw))

    x, w = (2, 4, 5, 5), (4, 3, 3, 3)
    both(x, w, stride=2, output_padding=2)
    both(x, w, stride=0)
    both(x, w, padding=-1)
    both(x, w, output_padding=-1)
    both(x, w, dilation=0)
    both(x, w, groups=0)
    both(x, w, groups=3)
    both(x, (5, 3, 3, 3))
    both(x, w, (4,))
    both((5, 5), w)
    both(x, w, padding=4)
    both(x, w, wdtype="float64")
    both(x, w, stride=(1, 2, 3))
    for xs, ws, bs, kw in [((5, 5), (4, 3, 3), None, {}), ((2, 4, 5), (4, 3, 3), (4,), {}),
                           ((2, 4, 5), (4, 3, 3), None, dict(padding=4)),
                           ((2, 4, 5), (4, 3, 3), None, dict(stride=2, output_padding=2)),
                           ((2, 4, 5), (4, 3, 3), None, dict(groups=3)),
                           ((2, 4, 5), (4, 3, 3, 3), None, {}),
                           ((2, 4, 5), (4, 3, 3), None, dict(dilation=0))]:
        same_error(lambda: F.conv_transpose1d(jg.ones(xs), jg.ones(ws),
                                              None if bs is None else jg.ones(bs), **kw),
                   lambda: TF.conv_transpose1d(torch.ones(xs), torch.ones(ws),
                                               None if bs is None else torch.ones(bs), **kw))
    both(x, (4, 3, 3))
    both(x, (4, 3, 3, 3, 3))
    same_error(lambda: F.conv_transpose1d(jg.ones(2, 4, 5, 5), jg.ones(4, 3, 3)),
               lambda: TF.conv_transpose1d(torch.ones(2, 4, 5, 5), torch.ones(4, 3, 3)))
    same_error(lambda: F.conv_transpose1d(jg.ones(4, 5, 5), jg.ones(4, 3, 3)),
               lambda: TF.conv_transpose1d(torch.ones(4, 5, 5), torch.ones(4, 3, 3)))
    same_error(lambda: F.conv_transpose1d(jg.ones(4, 5, 5), jg.ones(5, 3, 3), stride=(1, 2)),
               lambda: TF.conv_transpose1d(torch.ones(4, 5, 5), torch.ones(5, 3, 3),
                                           stride=(1, 2)))


# ---------------------------------------------------------------- compiled == eager

def _layers(jg, dtype):
    jg.manual_seed(3)
    return jg.nn.Sequential(
        jg.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1, dtype=dtype),
        jg.nn.InstanceNorm2d(4, affine=True, track_running_stats=True, dtype=dtype),
        jg.nn.PReLU(4, dtype=dtype),
        jg.nn.Upsample(scale_factor=1.5, mode="bilinear"),
        jg.nn.Upsample(size=(5, 7)),
        jg.nn.Conv2d(4, 2, 3, dtype=dtype))


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_equals_eager_bitwise(jg, backend, dtype):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    dt = getattr(jg, dtype)
    em, cm = _layers(jg, dt), _layers(jg, dt)

    def step(m, x):
        y = m(x)
        z = jg.nn.functional.conv_transpose1d(y.flatten(2), m[5].weight.flatten(2), stride=2)
        z = jg.nn.functional.interpolate(z, scale_factor=0.7, mode="linear", align_corners=True)
        # an output_padding of the stride or more (below the dilation)
        u = jg.nn.functional.conv_transpose2d(y, m[5].weight, stride=1, dilation=2,
                                              output_padding=1, padding=1)
        loss = (y * y).sum() + z.sum() + (u * u).mean()
        params = list(m.parameters())
        grads = jg.autograd.grad(loss, [x] + params)
        return [loss] + list(grads)

    f = jg.compile(lambda x: step(cm, x), backend=backend, fullgraph=True)
    for i in range(2):
        x = jg.randn(2, 3, 4, 5, dtype=dt, requires_grad=True)
        want, got = step(em, x), f(x)
        for a, b in zip(want, got):
            assert vals(a) == vals(b), i
        for (n, a), (_, b) in zip(em.state_dict().items(), cm.state_dict().items()):
            assert vals(a) == vals(b), (i, n)
