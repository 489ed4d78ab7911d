"""F.layer_norm / nn.LayerNorm (one op-table row, NativeLayerNormBackward0)
against PyTorch 1.13: values and gradients of input, weight and bias for
f32/f64, 1-D and 2-D normalized shapes, no affine, weight only, bias only,
several eps, a non-contiguous input and an input of no rows; double backward
(create_graph); the node's name; and compiled (interp, c) == eager
bitwise."""
import pytest


def vals(t):
    return t.detach().reshape(-1).tolist()


def close(a, b, tol):
    a, b = vals(a), vals(b)
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def pair(jg, torch, shape, seed, dtype, scale=2.0, shift=0.5):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g, dtype=getattr(torch, dtype)) * scale + shift
    if not t.numel():  # (a leaf of its own: no reshape view)
        return jg.zeros(*shape, dtype=getattr(jg, dtype)), t
    return jg.tensor(t.tolist(), dtype=getattr(jg, dtype)), t


TOL = {"float64": 1e-12, "float32": 2e-5}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("shape,nshape", [((4, 5), (5,)), ((2, 3, 6), (6,)),
                                          ((2, 3, 4), (3, 4)), ((7,), (7,)), ((0, 5), (5,))])
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("eps", [1e-5, 0.1])
def test_values_and_gradients_match_torch(jg, torch, dtype, shape, nshape, affine, eps):
    tol = TOL[dtype]
    jx, tx = pair(jg, torch, shape, 1, dtype)
    jw, tw = pair(jg, torch, nshape, 2, dtype, 1.0, 1.0)
    jb, tb = pair(jg, torch, nshape, 3, dtype, 1.0, 0.0)
    jgo, tgo = pair(jg, torch, shape, 4, dtype, 1.0, 0.0)
    if affine in ("bias", "none"):
        jw = tw = None
    if affine in ("weight", "none"):
        jb = tb = None
    leaves = [(a, b) for a, b in ((jx, tx), (jw, tw), (jb, tb)) if a is not None]
    for a, b in leaves:
        a.requires_grad_(True)
        b.requires_grad_(True)
    jy = jg.nn.functional.layer_norm(jx, nshape, jw, jb, eps)
    ty = torch.nn.functional.layer_norm(tx, nshape, tw, tb, eps)
    assert list(jy.shape) == list(ty.shape)
    assert close(jy, ty, tol)
    assert jy.grad_fn.name() == "NativeLayerNormBackward0"
    (jy * jgo).sum().backward()
    (ty * tgo).sum().backward()
    for a, b in leaves:
        assert close(a.grad, b.grad, tol * 10)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_non_contiguous_input_and_upstream_gradient(jg, torch, dtype):
    tol = TOL[dtype]
    jx, tx = pair(jg, torch, (6, 4), 5, dtype)
    jw, tw = pair(jg, torch, (6,), 6, dtype, 1.0, 1.0)
    for t in (jx, tx, jw, tw):
        t.requires_grad_(True)
    jy = jg.nn.functional.layer_norm(jx.t(), (6,), jw)
    ty = torch.nn.functional.layer_norm(tx.t(), (6,), tw)
    assert close(jy, ty, tol)
    # sum's gradient reaches the row as an expanded (stride 0) tensor
    (jy[:, 1:].sum() + (jy * jy).sum()).backward()
    (ty[:, 1:].sum() + (ty * ty).sum()).backward()
    assert close(jx.grad, tx.grad, tol * 10)
    assert close(jw.grad, tw.grad, tol * 10)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("nshape", [(4,), (3, 4)])
def test_double_backward_matches_torch(jg, torch, dtype, nshape):
    tol = TOL[dtype] * 100
    jx, tx = pair(jg, torch, (2, 3, 4), 7, dtype)
    jw, tw = pair(jg, torch, nshape, 8, dtype, 1.0, 1.0)
    jb, tb = pair(jg, torch, nshape, 9, dtype, 1.0, 0.0)
    jgo, tgo = pair(jg, torch, (2, 3, 4), 10, dtype, 1.0, 0.0)
    for t in (jx, tx, jw, tw, jb, tb):
        t.requires_grad_(True)
    res = []
    for lib, x, w, b, go in ((jg, jx, jw, jb, jgo), (torch, tx, tw, tb, tgo)):
        y = lib.nn.functional.layer_norm(x, nshape, w, b, 1e-3)
        gx, gw, gb = lib.autograd.grad((y * go).sum(), [x, w, b], create_graph=True)
        # a penalty over every first-order gradient, then its gradients
        pen = (gx * gx * x).sum() + (gw * gw).sum() + (gw * gb).sum() + (y * gx).sum()
        res.append(lib.autograd.grad(pen, [x, w, b]))
    for a, b in zip(*res):
        assert close(a, b, tol)


def test_module_and_errors(jg, torch):
    m = jg.nn.LayerNorm([2, 3], elementwise_affine=False)
    x = jg.randn(4, 2, 3, requires_grad=True)
    assert m(x).grad_fn.name() == "NativeLayerNormBackward0"
    with pytest.raises(RuntimeError, match="normalized_shape"):
        jg.nn.functional.layer_norm(x, (3, 3))
    with pytest.raises(RuntimeError):
        jg.nn.functional.layer_norm(x, (3,), jg.ones(2))
    # state intact: x is untouched and usable after the failed call
    assert list(x.shape) == [4, 2, 3] and x.grad is None


def gpt_like_step(jg, m, ln, x):
    h = ln(x)
    y = m(h)
    loss = (jg.nn.functional.layer_norm(y + x, (x.shape[-1],)) * y).mean()
    loss.backward()
    return loss


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_equals_eager_bitwise(jg, backend, dtype):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    dt = getattr(jg, dtype)

    def model():
        jg.manual_seed(11)
        return (jg.nn.Linear(8, 8, dtype=dt), jg.nn.LayerNorm(8, dtype=dt))

    (em, eln), (cm, cln) = model(), model()
    with jg.no_grad():
        for ln in (eln, cln):
            ln.weight.copy_(jg.arange(8, dtype=dt) * 0.25 + 0.5)
            ln.bias.copy_(jg.arange(8, dtype=dt) * -0.1)
    f = jg.compile(lambda x: gpt_like_step(jg, cm, cln, x), backend=backend, fullgraph=True)
    for i in range(3):
        x = jg.randn(2, 5, 8, dtype=dt)
        want = gpt_like_step(jg, em, eln, x)
        got = f(x)
        assert vals(got) == vals(want), i
        for a, b in zip(list(em.parameters()) + list(eln.parameters()),
                        list(cm.parameters()) + list(cln.parameters())):
            assert vals(a.grad) == vals(b.grad), i
        for p in list(em.parameters()) + list(eln.parameters()) + list(cm.parameters()) + list(
                cln.parameters()):
            p.grad = None
