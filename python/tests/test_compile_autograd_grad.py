"""autograd.grad() inside a compiled program is traced
into the program's graph: the results are tensors of the program, bitwise
equal to the eager run's on both backends, and no .grad is written.  With
create_graph=True the results have history in the program (differentiated
again inside it or through its compiled node).  Gradients w.r.t.
intermediate values are traced too, also beside a value they are computed
from; a repeated output or input, and a second grad through nodes the first
one did not free, are traced as PyTorch runs them (checked against it)."""
import pytest

BACKENDS = ["interp", "c"]


def leaves(T):
    T.manual_seed(0)
    w = T.randn(5, 3, requires_grad=True)
    u = T.randn(3, requires_grad=True)
    return w, u


def inputs(T, n=3):
    T.manual_seed(1)
    return [T.randn(4, 5) for _ in range(n)]


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


def check(T, f, backend, xs, nout=1):
    cf = T.compile(f, backend=backend, fullgraph=True)
    for x in xs:
        want, got = f(x), cf(x)
        if nout == 1:
            want, got = (want,), (got,)
        assert all(same(g, w) for g, w in zip(got, want))
    assert cf._jitgrad_compiled.entries() == 1
    assert cf._jitgrad_compiled.fallbacks() == 0
    return cf


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_penalty(jg, torch, backend):
    w, _ = leaves(jg)

    def f(x):
        loss = (x @ w).tanh().sum()
        # (retain_graph: eager's backward of the result goes through loss)
        (g,) = jg.autograd.grad(loss, [w], retain_graph=True)
        return loss + (g * g).sum()

    cf = check(jg, f, backend, inputs(jg))
    assert w.grad is None
    # the returned value's backward: the penalty is a constant, as eager's
    x = inputs(jg, 1)[0]
    f(x).backward()
    want = w.grad.clone()
    w.grad = None
    cf(x).backward()
    assert same(w.grad, want)
    # and PyTorch's (the oracle)
    tw = torch.tensor(w.tolist(), requires_grad=True)
    tx = torch.tensor(x.tolist())
    tl = (tx @ tw).tanh().sum()
    (tg,) = torch.autograd.grad(tl, [tw], retain_graph=True)
    (tl + (tg * tg).sum()).backward()
    assert torch.allclose(torch.tensor(w.grad.tolist()), tw.grad, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grads_of_input_and_leaf(jg, backend):
    w, _ = leaves(jg)

    def f(x):
        loss = ((x @ w).tanh() * (x @ w).sin()).sum()
        return jg.autograd.grad(loss, [x, w])

    xs = [x.requires_grad_() for x in inputs(jg)]
    check(jg, f, backend, xs, nout=2)
    assert w.grad is None and all(x.grad is None for x in xs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_several_outputs_with_grad_outputs(jg, backend):
    w, _ = leaves(jg)

    def f(x):
        y1 = (x @ w).tanh()
        y2 = (w * w).sin().sum()
        (g,) = jg.autograd.grad([y1, y2], [w], grad_outputs=[x[:, :3], None])
        return g

    check(jg, f, backend, inputs(jg))


@pytest.mark.parametrize("backend", BACKENDS)
def test_allow_unused(jg, backend):
    w, u = leaves(jg)

    def f(x):
        gw, gu = jg.autograd.grad((x @ w).tanh().sum(), [w, u], allow_unused=True)
        # (a list the program appends to would be part of the key)
        return gw if gu is None else gw * 0

    check(jg, f, backend, inputs(jg))

    def g(x):
        return jg.autograd.grad((x @ w).tanh().sum(), [w, u])[0]

    for fn in (g, jg.compile(g, backend=backend, fullgraph=True)):
        with pytest.raises(RuntimeError, match="Set allow_unused=True"):
            fn(inputs(jg, 1)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_scalar_output_without_grad_outputs(jg, backend):
    w, _ = leaves(jg)

    def f(x):
        return jg.autograd.grad((x @ w).tanh(), [w])[0]

    for fn in (f, jg.compile(f, backend=backend, fullgraph=True)):
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
            fn(inputs(jg, 1)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_graph(jg, backend):
    w, _ = leaves(jg)

    def twice(retain):
        def f(x):
            loss = (x @ w).tanh().sum()
            (g1,) = jg.autograd.grad(loss, [w], retain_graph=retain)
            (g2,) = jg.autograd.grad(loss, [w])
            return g1 + g2

        return f

    check(jg, twice(True), backend, inputs(jg))
    f = twice(False)
    x = inputs(jg, 1)[0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        f(x)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        jg.compile(f, backend=backend)(x)
    with pytest.raises(RuntimeError, match="a second backward through the same graph"):
        jg.compile(f, backend=backend, fullgraph=True)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_create_graph(jg, torch, backend):
    w, _ = leaves(jg)

    def f(x):
        loss = (x @ w).tanh().sum()
        (g,) = jg.autograd.grad(loss, [w], create_graph=True)
        pen = loss + (g * g).sum()
        # differentiated again inside the program: the second-order term
        return pen, jg.autograd.grad(pen, [w])[0]

    check(jg, f, backend, inputs(jg), nout=2)

    def h(x):
        loss = (x @ w).tanh().sum()
        (g,) = jg.autograd.grad(loss, [w], create_graph=True)
        return loss + (g * g).sum()

    # differentiated through the compiled node
    x = inputs(jg, 1)[0]
    h(x).backward()
    want = w.grad.clone()
    w.grad = None
    ch = jg.compile(h, backend=backend, fullgraph=True)
    ch(x).backward()
    assert same(w.grad, want)
    assert ch._jitgrad_compiled.fallbacks() == 0
    # PyTorch's (the oracle)
    tw = torch.tensor(w.tolist(), requires_grad=True)
    tl = (torch.tensor(x.tolist()) @ tw).tanh().sum()
    (tg,) = torch.autograd.grad(tl, [tw], create_graph=True)
    (tl + (tg * tg).sum()).backward()
    assert torch.allclose(torch.tensor(w.grad.tolist()), tw.grad, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grads_of_intermediates(jg, backend):
    w, _ = leaves(jg)

    def f(x):
        h = x @ w
        loss = (h.tanh() * h.sin()).sum()  # (h: two contributions)
        return jg.autograd.grad(loss, [h])[0]

    def g(x):
        h = x @ w
        t, u = h.tanh(), h.sin()
        loss = (t * u * t).sum()
        return jg.autograd.grad(loss, [u, t, u])

    check(jg, f, backend, inputs(jg))
    check(jg, g, backend, inputs(jg), nout=3)


def tt(torch, t, requires_grad=False):
    return torch.tensor(t.tolist(), requires_grad=requires_grad)


def close(torch, a, b):
    return torch.allclose(torch.tensor(a.tolist()), b, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("create_graph", [False, True])
def test_value_and_its_ancestor(jg, torch, backend, create_graph):
    # PyTorch: the intermediate's gradient is what reaches it, the
    # ancestor's (h before t, w before h) the whole one, as if asked alone
    w, _ = leaves(jg)

    def f(T, w, x):
        h = x @ w
        t = h.tanh()
        loss = (t * h.sin()).sum()
        return T.autograd.grad(loss, [t, w, h], create_graph=create_graph)

    check(jg, lambda x: f(jg, w, x), backend, inputs(jg), nout=3)
    x = inputs(jg, 1)[0]
    want = f(torch, tt(torch, w, True), tt(torch, x))
    got = f(jg, w, x)
    assert all(close(torch, g, t) for g, t in zip(got, want))
    # each one alone gives the same (eager and PyTorch)
    for i in range(3):
        h = x @ w
        t = h.tanh()
        loss = (t * h.sin()).sum()
        (alone,) = jg.autograd.grad(loss, [(t, w, h)[i]])
        assert same(alone, got[i])


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_output_and_input(jg, torch, backend):
    # PyTorch adds the gradients of an output named twice (in order) and
    # returns an input named twice twice
    w, _ = leaves(jg)

    def f(T, w, x, go):
        y = (x @ w).tanh()
        return T.autograd.grad([y, y], [w, w], [go, go.sin()])

    x, go = inputs(jg, 1)[0], jg.randn(4, 3)
    check(jg, lambda x: f(jg, w, x, go), backend, inputs(jg), nout=2)
    want = f(torch, tt(torch, w, True), tt(torch, x), tt(torch, go))
    got = f(jg, w, x, go)
    assert same(got[0], got[1])
    assert all(close(torch, g, t) for g, t in zip(got, want))


@pytest.mark.parametrize("backend", BACKENDS)
def test_retain_graph_is_per_backward(jg, torch, backend):
    # without retain_graph a grad frees the nodes it went through: a second
    # one through other nodes runs (PyTorch too), one through them fails
    w, _ = leaves(jg)

    def disjoint(T, w, x):
        (g1,) = T.autograd.grad((x @ w).tanh().sum(), [w])
        (g2,) = T.autograd.grad((x @ w).sin().sum(), [w])
        return g1 + g2

    def shared(T, w, x):
        h = x @ w
        (g1,) = T.autograd.grad(h.tanh().sum(), [w])
        (g2,) = T.autograd.grad(h.sin().sum(), [w])
        return g1 + g2

    check(jg, lambda x: disjoint(jg, w, x), backend, inputs(jg))
    x = inputs(jg, 1)[0]
    assert close(torch, disjoint(jg, w, x), disjoint(torch, tt(torch, w, True), tt(torch, x)))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        shared(torch, tt(torch, w, True), tt(torch, x))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        jg.compile(lambda x: shared(jg, w, x), backend=backend)(x)
    with pytest.raises(RuntimeError, match="a second backward through the same graph"):
        jg.compile(lambda x: shared(jg, w, x), backend=backend, fullgraph=True)(x)
