"""The activations F.leaky_relu, elu, softplus, hardtanh, relu6, mish,
hardswish, hardsigmoid and their modules against PyTorch 1.13: values and
gradients (at the corners too, and where exp would overflow), inplace=True,
constructor arguments and repr, and compiled (interp, c) == eager bitwise."""
import pytest

XS = [-100.0, -25.0, -6.0, -3.5, -3.0, -2.0, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, 2.0, 3.0,
      3.5, 6.0, 6.5, 10.0, 19.9, 20.0, 20.5, 50.0, 100.0, 200.0]

CASES = [
    ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {}),
    ("elu", {"alpha": 0.5}),
    ("softplus", {}),
    ("softplus", {"beta": 2, "threshold": 10}),
    ("softplus", {"beta": 0.5}),
    ("hardtanh", {}),
    ("hardtanh", {"min_val": -2.0, "max_val": 3.0}),
    ("relu6", {}),
    ("mish", {}),
    ("hardswish", {}),
    ("hardsigmoid", {}),
]


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    return len(a) == len(b) and all(
        (x == y) or abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-13), ("float32", 1e-6)])
@pytest.mark.parametrize("name,kw", CASES)
def test_values_and_gradients_match_torch(jg, torch, name, kw, dtype, tol):
    jx = jg.tensor(XS, dtype=getattr(jg, dtype), requires_grad=True)
    tx = torch.tensor(XS, dtype=getattr(torch, dtype), requires_grad=True)
    jy = getattr(jg.nn.functional, name)(jx, **kw)
    ty = getattr(torch.nn.functional, name)(tx, **kw)
    assert close(vals(jy), vals(ty), tol), (vals(jy), vals(ty))
    seed = [0.5 + 0.25 * i for i in range(len(XS))]
    jy.backward(jg.tensor(seed, dtype=getattr(jg, dtype)))
    ty.backward(torch.tensor(seed, dtype=getattr(torch, dtype)))
    if name == "hardsigmoid" and dtype == "float64":
        tol = 1e-7  # PyTorch 1.13's f64 hardsigmoid gradient is grad * float32(1/6)
    assert close(vals(jx.grad), vals(tx.grad), tol), (vals(jx.grad), vals(tx.grad))


@pytest.mark.parametrize("name,kw", [c for c in CASES if c[0] != "softplus"])
def test_inplace_matches_torch(jg, torch, name, kw):
    jx = jg.tensor(XS, dtype=jg.float64, requires_grad=True)
    tx = torch.tensor(XS, dtype=torch.float64, requires_grad=True)
    ja, ta = jx * 1.5, tx * 1.5
    jr = getattr(jg.nn.functional, name)(ja, inplace=True, **kw)
    tr = getattr(torch.nn.functional, name)(ta, inplace=True, **kw)
    assert jr is ja
    assert close(vals(ja), vals(ta), 1e-13)
    ja.sum().backward()
    ta.sum().backward()
    assert close(vals(jx.grad), vals(tx.grad), 1e-7 if name == "hardsigmoid" else 1e-13)
    # a leaf that requires grad cannot be written in place
    with pytest.raises(RuntimeError):
        getattr(jg.nn.functional, name)(jg.ones(2, requires_grad=True), inplace=True, **kw)


MODULES = [
    ("LeakyReLU", (), {}), ("LeakyReLU", (0.2, True), {}), ("ELU", (), {}),
    ("ELU", (), {"alpha": 2.0, "inplace": True}), ("Softplus", (), {}),
    ("Softplus", (2, 10), {}), ("Hardtanh", (), {}), ("Hardtanh", (-2, 3, True), {}),
    ("ReLU6", (), {}), ("ReLU6", (True,), {}), ("Mish", (), {}), ("Mish", (True,), {}),
    ("Hardswish", (), {}), ("Hardsigmoid", (), {"inplace": True}),
]


@pytest.mark.parametrize("name,args,kw", MODULES)
def test_modules_match_torch(jg, torch, name, args, kw):
    jm, tm = getattr(jg.nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(jm) == repr(tm)
    jx = jg.tensor(XS, dtype=jg.float64)
    tx = torch.tensor(XS, dtype=torch.float64)
    assert close(vals(jm(jx * 1)), vals(tm(tx * 1)), 1e-13)
    assert list(jm.state_dict().keys()) == list(tm.state_dict().keys()) == []


def test_hardtanh_arguments_match_torch(jg, torch):
    # F.hardtanh takes min_val > max_val (every value becomes max_val, as
    # clamp's); the module refuses max_val <= min_val
    jx = jg.tensor(XS, dtype=jg.float64, requires_grad=True)
    tx = torch.tensor(XS, dtype=torch.float64, requires_grad=True)
    jy, ty = jg.nn.functional.hardtanh(jx, 2.0, 1.0), torch.nn.functional.hardtanh(tx, 2.0, 1.0)
    assert vals(jy) == vals(ty)
    jy.sum().backward()
    ty.sum().backward()
    assert vals(jx.grad) == vals(tx.grad)
    for t in (jg, torch):
        with pytest.raises(AssertionError):
            t.nn.Hardtanh(1.0, 1.0)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_equals_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    F = jg.nn.functional
    for dtype in (jg.float32, jg.float64):
        x = jg.tensor(XS, dtype=dtype, requires_grad=True)

        def prog(x):
            out = x * 0
            for name, kw in CASES:
                out = out + getattr(F, name)(x, **kw) * (0.5 + len(kw))
            h = x * 1.0
            F.leaky_relu(h, 0.3, inplace=True)
            F.hardswish(h, inplace=True)
            return (out * out).sum() + h.sum()

        want = prog(x)
        (wg,) = jg.autograd.grad(want, [x])
        f = jg.compile(prog, backend=backend, fullgraph=True)
        got = f(x)
        (gg,) = jg.autograd.grad(got, [x])
        assert vals(got) == vals(want)
        assert vals(gg) == vals(wg)
