"""Tensor.register_hook, retain_grad / retains_grad and the Module hooks
(forward pre-hooks, forward hooks, full backward hooks), each checked
against PyTorch 1.13: the values hooks see, replacements, order, removal,
error texts, create_graph, autograd.grad; and compiled functions and
modules that meet hooks give eager's results and call them as eager does."""
import numpy as np
import pytest

import jitgrad
import jitgrad.nn as jnn


def both(torch):
    return [(jitgrad, "jg"), (torch, "torch")]


def arr(t):
    return None if t is None else np.asarray(t.detach().numpy())


def same(a, b):
    if a is None or b is None:
        assert a is None and b is None
        return
    np.testing.assert_array_equal(arr(a), arr(b))


def run_both(torch, fn):
    """fn(lib) -> a list of tensors/None/values; compared entry by entry."""
    r_jg, r_t = fn(jitgrad), fn(torch)
    assert len(r_jg) == len(r_t)
    for a, b in zip(r_jg, r_t):
        if isinstance(a, (list, tuple)):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                if x is None or hasattr(x, "detach"):
                    same(x, y)
                else:
                    assert x == y
        elif a is None or hasattr(a, "detach"):
            same(a, b)
        else:
            assert a == b
    return r_jg


def test_nonleaf_and_leaf_hooks(torch):
    def f(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        seen = []
        y.register_hook(lambda g: seen.append(g.clone()))
        y.register_hook(lambda g: g * 10)
        y.register_hook(lambda g: seen.append(g.clone()))
        x.register_hook(lambda g: seen.append(g.clone()) or g + 1)
        (y * y).sum().backward()
        return [seen, x.grad, y.grad, y.retains_grad, x.retains_grad]

    run_both(torch, f)


def test_used_twice_and_custom_slots(torch):
    def f(lib):
        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, p, q):
                return p * q

            @staticmethod
            def backward(ctx, g):
                return g * 2, g * 3

        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = a * 1
        seen = []
        b.register_hook(lambda g: seen.append(g.clone()))
        (b * b * b).sum().backward(retain_graph=True)
        F.apply(b, b).sum().backward()
        return [seen, a.grad]

    run_both(torch, f)


def test_remove_and_retain_graph(torch):
    def f(lib):
        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        y = x.exp()
        calls = []
        h = y.register_hook(lambda g: calls.append(1) or g * 2)
        y.retain_grad()
        loss = (y * x).sum()
        loss.backward(retain_graph=True)
        g1 = x.grad.clone()
        h.remove()
        h.remove()
        loss.backward()
        return [g1, x.grad, y.grad, len(calls)]

    run_both(torch, f)


def test_retain_grad_order_and_accumulation(torch):
    def f(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        a, b = x * 2, x * 3
        a.retain_grad()
        a.register_hook(lambda g: g * 10)  # after retain_grad: not in a.grad
        b.register_hook(lambda g: g * 10)  # before: in b.grad
        b.retain_grad()
        x.retain_grad()  # a leaf: no-op
        loss = (a * b).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return [a.grad, b.grad, x.grad, a.retains_grad, x.retains_grad]

    run_both(torch, f)


def test_retain_grad_follows_inplace(torch):
    # retain_grad moves to the tensor's new grad_fn; a tensor hook stays
    def f(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.retain_grad()
        seen = []
        y.register_hook(lambda g: seen.append(g.clone()))
        y.mul_(3)
        (y * y).sum().backward()
        return [y.grad, seen, x.grad, y.retains_grad]

    run_both(torch, f)


def test_create_graph(torch):
    def f(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        info = []
        y.register_hook(lambda g: info.append((g.requires_grad, lib.is_grad_enabled())))
        (y * x).sum().backward(create_graph=True)
        (gx,) = lib.autograd.grad(x.grad.sum(), [x])
        z = x * 3
        z.register_hook(lambda g: info.append((g.requires_grad, lib.is_grad_enabled())))
        z.sum().backward()
        return [info, gx]

    run_both(torch, f)


def test_autograd_grad(torch):
    # PyTorch 1.13: a non-leaf's hooks (and retain_grad) run when its grad_fn
    # runs, also in autograd.grad; a captured input's gradient is taken
    # before its hooks; a captured leaf's hooks do not run
    def f(lib):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        z = y * 3
        seen = []
        y.register_hook(lambda g: seen.append(g.clone()) or g * 10)
        x.register_hook(lambda g: seen.append(g.clone()) or g * 10)
        z.retain_grad()
        gy, gx = lib.autograd.grad((z * z).sum(), [y, x])
        w = x * 2
        w.retain_grad()
        (gw,) = lib.autograd.grad((w * w).sum(), [w])
        return [gy, gx, seen, z.grad, w.grad, x.grad]

    run_both(torch, f)


def test_errors(torch):
    for lib, name in both(torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.grad = lib.tensor([5.0, 5.0])
        y = x * 2
        y.retain_grad()

        def bad_size(g):
            return lib.zeros(3)

        h = y.register_hook(bad_size)
        with pytest.raises(RuntimeError, match="^hook 'bad_size' has changed the size of value$"):
            (y * y).sum().backward(retain_graph=True)
        h.remove()
        h = y.register_hook(lambda g: g.double())
        with pytest.raises(RuntimeError) as e:
            (y * y).sum().backward(retain_graph=True)
        assert str(e.value) == ("hook '<lambda>' has changed the type of value (was "
                                "torch.FloatTensor got torch.DoubleTensor)"), name
        h.remove()
        h = x.register_hook(lambda g: 3)
        with pytest.raises(TypeError, match="^expected Variable, but hook returned 'int'$"):
            (y * y).sum().backward(retain_graph=True)
        h.remove()
        # nothing changed: every .grad as it was (PyTorch's failed backwards
        # leave the leaf's too, but its retain_grad hook already wrote y.grad)
        same(x.grad, lib.tensor([5.0, 5.0]))
        if lib is jitgrad:
            assert y.grad is None
        c = lib.ones(2)
        with pytest.raises(RuntimeError,
                           match="^cannot register a hook on a tensor that doesn't require "
                                 "gradient$"):
            c.register_hook(lambda g: g)
        with pytest.raises(RuntimeError,
                           match="^can't retain_grad on Tensor that has requires_grad=False$"):
            c.retain_grad()


class Net:
    @staticmethod
    def make(lib):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
        return m


def _copy_params(src, dst):
    import torch
    with torch.no_grad():
        for (n, p), (n2, q) in zip(src.named_parameters(), dst.named_parameters()):
            assert n == n2
            q.copy_(torch.tensor(p.detach().numpy()))


def _modules(torch):
    mj = Net.make(jitgrad)
    mt = Net.make(torch)
    _copy_params(mj, mt)
    return mj, mt


def test_module_forward_hooks(torch):
    mj, mt = _modules(torch)
    res = []
    for lib, m in ((jitgrad, mj), (torch, mt)):
        log = []
        h1 = m[0].register_forward_pre_hook(lambda mod, inp: log.append(("pre", len(inp))))
        h2 = m[1].register_forward_pre_hook(lambda mod, inp: inp[0] * 2)
        h3 = m[2].register_forward_hook(lambda mod, inp, out: log.append(("fwd", arr(inp[0]))))
        h4 = m[2].register_forward_hook(lambda mod, inp, out: out + 1)
        x = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
        out = m(x)
        for h in (h1, h2, h3, h4):
            h.remove()
        out2 = m(x)
        res.append((log, arr(out), arr(out2)))
    (lj, oj, o2j), (lt, ot, o2t) = res
    assert [a for a, _ in lj] == [a for a, _ in lt]
    assert lj[0] == lt[0]
    np.testing.assert_allclose(lj[1][1], lt[1][1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(oj, ot, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(o2j, o2t, rtol=1e-6, atol=1e-6)


def _bw_case(lib, m, replace):
    seen = []

    def hook(mod, gin, gout):
        seen.append((type(mod).__name__, [arr(g) for g in gin], [arr(g) for g in gout]))
        if replace:
            return tuple(None if g is None else g * 0.5 for g in gin)

    h = m[2].register_full_backward_hook(hook)
    h0 = m[0].register_full_backward_hook(hook)
    x = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    m(x).pow(2).sum().backward()
    g = arr(x.grad)
    h.remove()
    h0.remove()
    return seen, g, [arr(p.grad) for p in m.parameters()]


@pytest.mark.parametrize("replace", [False, True])
def test_module_full_backward_hook(torch, replace):
    mj, mt = _modules(torch)
    sj, gj, pj = _bw_case(jitgrad, mj, replace)
    st, gt, pt = _bw_case(torch, mt, replace)
    assert [s[0] for s in sj] == [s[0] for s in st]
    for a, b in zip(sj, st):
        for xs, ys in ((a[1], b[1]), (a[2], b[2])):
            assert len(xs) == len(ys)
            for x_, y_ in zip(xs, ys):
                assert (x_ is None) == (y_ is None)
                if x_ is not None:
                    np.testing.assert_allclose(x_, y_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gj, gt, rtol=1e-5, atol=1e-6)
    for a, b in zip(pj, pt):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_module_backward_hook_no_input_grad(torch):
    for lib in (jitgrad, torch):
        lib.manual_seed(0)
        m = lib.nn.Linear(3, 2)
        seen = []
        m.register_full_backward_hook(lambda mod, gin, gout: seen.append((gin, len(gout))))
        m(lib.ones(1, 3)).sum().backward()
        assert len(seen) == 1 and seen[0][0] == (None,) and seen[0][1] == 1
        m.register_full_backward_hook(lambda mod, gin, gout: (lib.ones(1, 3),))
        with pytest.raises(RuntimeError, match="should always return None or None for all"):
            m(lib.ones(1, 3)).sum().backward()


def test_module_backward_hook_wrong_count(torch):
    for lib in (jitgrad, torch):
        m = lib.nn.Tanh()
        m.register_full_backward_hook(lambda mod, gin, gout: (None, None))
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="^Backward hook returned an invalid number of "
                                               "grad_input, got 2, but expected 1$"):
            m(x).sum().backward()


# ---- compiled: hooks run as in eager mode (a graph break where needed)


LOG = []


def prog_hook_inside(x, w):
    y = (x * w).tanh()
    y.register_hook(lambda g: LOG.append(g.clone()) or g * 3)
    return (y * y).sum()


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_hook_inside(torch, backend):
    """A hook registered inside a compiled function: a graph break, so the
    call runs eagerly and the hook runs once per backward, as eager's."""
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C backend")
    cf = jitgrad.compile(prog_hook_inside, backend=backend)
    vals = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    runs = {}
    for name, lib, fn in (("eager", jitgrad, prog_hook_inside), ("compiled", jitgrad, cf),
                          ("torch", torch, prog_hook_inside)):
        x = lib.tensor(vals, requires_grad=True)
        w = lib.tensor(vals[::-1].copy(), requires_grad=True)
        LOG.clear()
        for _ in range(2):
            fn(x, w).backward()
        runs[name] = (arr(x.grad), arr(w.grad), [arr(g) for g in LOG])
    e, c, t = runs["eager"], runs["compiled"], runs["torch"]
    np.testing.assert_array_equal(c[0], e[0])
    np.testing.assert_array_equal(c[1], e[1])
    assert len(c[2]) == len(e[2]) == len(t[2]) == 2
    for a, b in zip(c[2], e[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(e[0], t[0], rtol=1e-5)
    np.testing.assert_allclose(e[2][1], t[2][1], rtol=1e-5)


def prog_plain(x, w):
    return (x * w).sin()


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_output_and_input_hooks(torch, backend):
    """A hook on a compiled call's output, and on a leaf input, see what
    eager's see."""
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C backend")
    cf = jitgrad.compile(prog_plain, backend=backend)
    vals = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    runs = []
    for fn in (prog_plain, cf):
        x = jitgrad.tensor(vals, requires_grad=True)
        w = jitgrad.tensor(vals * 2, requires_grad=True)
        log = []
        x.register_hook(lambda g: log.append(g.clone()) or g + 1)
        y = fn(x, w)
        y.register_hook(lambda g: log.append(g.clone()) or g * 2)
        y.retain_grad()
        y.sum().backward()
        runs.append((arr(x.grad), arr(w.grad), arr(y.grad), [arr(g) for g in log]))
    (e, c) = runs
    for a, b in zip(e[:3], c[:3]):
        np.testing.assert_array_equal(a, b)
    assert len(e[3]) == len(c[3]) == 2
    for a, b in zip(e[3], c[3]):
        np.testing.assert_array_equal(a, b)


def prog_backward_inside(x):
    loss = (x * x).sum()
    loss.backward()
    return x * 1


def test_compiled_backward_reaches_hooked_leaf(torch):
    cf = jitgrad.compile(prog_backward_inside)
    grads = []
    for fn in (prog_backward_inside, cf):
        x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
        calls = []
        x.register_hook(lambda g: calls.append(1) or g * 5)
        fn(x)
        fn(x)
        grads.append((arr(x.grad), len(calls)))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    assert grads[0][1] == grads[1][1] == 2
    np.testing.assert_array_equal(grads[0][0], [20.0, 40.0])


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_module_with_hooks(torch, backend):
    if backend == "c" and not jitgrad.HAS_COMPILER:
        pytest.skip("no C backend")
    mj, mt = _modules(torch)
    mj2 = Net.make(jitgrad)
    cm = jitgrad.compile(mj2, backend=backend)
    runs = []
    for lib, m in ((jitgrad, mj), (jitgrad, mj2), (torch, mt)):
        log, feats = [], []
        m[0].register_forward_hook(lambda mod, inp, out: out * 2)
        m[1].register_forward_hook(lambda mod, inp, out: feats.append(arr(out)))
        m[2].register_forward_pre_hook(lambda mod, inp: feats.append(arr(inp[0])))
        m[2].register_full_backward_hook(
            lambda mod, gin, gout: log.append(arr(gout[0])) or (gin[0] * 0.5,))
        x = lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
        call = cm if m is mj2 else m
        for _ in range(2):
            call(x).pow(2).sum().backward()
        runs.append((arr(x.grad), [arr(p.grad) for p in m.parameters()], log, feats))
    e, c, t = runs
    # forward hooks with side effects run on every call, on real tensors
    assert len(c[3]) == len(e[3]) == len(t[3]) == 4
    for a, b, d in zip(c[3], e[3], t[3]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, d, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(c[0], e[0])
    for a, b in zip(c[1], e[1]):
        np.testing.assert_array_equal(a, b)
    assert len(c[2]) == len(e[2]) == len(t[2]) == 2
    for a, b in zip(c[2], e[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(e[0], t[0], rtol=1e-5, atol=1e-6)
