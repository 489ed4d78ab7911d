"""loss.backward(create_graph=True) inside a compiled program is traced: the
.grad it leaves has history in the program's graph, so a backward outside
the call through that .grad gives eager's second-order gradients, bitwise
(and PyTorch's, to rounding).  backward(gradient) of a non-scalar is traced
too.  Each program runs as one graph (fullgraph)."""
import pytest

BACKENDS = ["interp", "c"]


def make_w(T):
    T.manual_seed(0)
    w = T.randn(5, 3, requires_grad=True)
    T.manual_seed(1)
    xs = [T.randn(4, 5) for _ in range(3)]
    return w, xs


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


def penalty(T, w, x):
    # a gradient penalty from .grad
    loss = (x @ w).tanh().sum()
    loss.backward(create_graph=True)
    return loss, (w.grad * w.grad).sum()


def maml(T, w, x):
    # a MAML-style inner step: the adapted weight from .grad, with history
    loss = (x @ w).tanh().sum()
    loss.backward(create_graph=True)
    w2 = w - 0.1 * w.grad
    return ((x @ w2).sin() * x[:, :3]).sum()


def run(w, fn, x, preset):
    w.grad = None
    if preset:
        w.grad = w.detach() * 0  # a .grad without history
    out = fn(x)
    out = out if isinstance(out, tuple) else (out,)
    g1 = w.grad.detach().clone()
    out[-1].backward()  # outside the call, through .grad's history
    g2 = w.grad.detach().clone()
    w.grad = None
    return out, g1, g2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("preset", [False, True])
@pytest.mark.parametrize("prog", [penalty, maml])
def test_backward_create_graph_second_order(jg, torch, backend, preset, prog):
    w, xs = make_w(jg)
    f = lambda x: prog(jg, w, x)  # noqa: E731
    cf = jg.compile(f, backend=backend, fullgraph=True)
    for x in xs:
        want, got = run(w, f, x, preset), run(w, cf, x, preset)
        assert all(same(a, b) for a, b in zip(got[0], want[0]))
        assert same(got[1], want[1]) and same(got[2], want[2])
    assert cf._jitgrad_compiled.entries() == 1
    assert cf._jitgrad_compiled.fallbacks() == 0
    # PyTorch's (the oracle)
    tw = torch.tensor(w.tolist(), requires_grad=True)
    tout, tg1, tg2 = run(tw, lambda x: prog(torch, tw, x), torch.tensor(xs[0].tolist()), preset)
    out, g1, g2 = run(w, cf, xs[0], preset)
    for a, b in [(out[-1], tout[-1]), (g1, tg1), (g2, tg2)]:
        assert torch.allclose(torch.tensor(a.tolist()), b, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_penalty_training_step(jg, backend):
    # the whole step: backward with create_graph, the penalty's backward
    # (accumulating into that .grad), an SGD step, zero_grad
    def train(compiled):
        jg.manual_seed(0)
        model = jg.nn.Sequential(jg.nn.Linear(4, 8), jg.nn.Tanh(), jg.nn.Linear(8, 1))
        opt = jg.optim.SGD(model.parameters(), lr=0.05)

        def step(x, y):
            loss = ((model(x) - y) ** 2).mean()
            loss.backward(create_graph=True)
            gp = sum((p.grad * p.grad).sum() for p in model.parameters())
            gp.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss, gp

        if compiled:
            step = jg.compile(step, backend=backend, fullgraph=True)
        jg.manual_seed(1)
        x, y = jg.randn(16, 4), jg.randn(16, 1)
        hist = [tuple(t.item() for t in step(x, y)) for _ in range(10)]
        params = [p.detach().numpy().tobytes() for p in model.parameters()]
        return hist, params, step

    want, wparams, _ = train(False)
    got, gparams, cstep = train(True)
    assert got == want and gparams == wparams
    assert cstep._jitgrad_compiled.fallbacks() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_with_gradient(jg, torch, backend):
    w, xs = make_w(jg)

    def f(T, w, x, go):
        y = (x @ w).tanh()
        y.backward(go)
        return y

    go = jg.randn(4, 3)
    cf = jg.compile(lambda x: f(jg, w, x, go), backend=backend, fullgraph=True)
    for x in xs:
        w.grad = None
        want = (f(jg, w, x, go), w.grad)
        w.grad = None
        got = (cf(x), w.grad)
        assert same(got[0], want[0]) and same(got[1], want[1])
    assert cf._jitgrad_compiled.fallbacks() == 0
    tw = torch.tensor(w.tolist(), requires_grad=True)
    f(torch, tw, torch.tensor(xs[-1].tolist()), torch.tensor(go.tolist()))
    assert torch.allclose(torch.tensor(w.grad.tolist()), tw.grad, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_with_history_carried_between_calls(jg, backend):
    # .grad is not cleared between calls: each call's backward(create_graph)
    # adds into the .grad the previous call left, with its history (an
    # output of the previous call's node, which that node also saved), and
    # a final backward goes through every call's graph
    w, xs = make_w(jg)

    def f(x):
        (x @ w).tanh().sum().backward(create_graph=True)
        (x @ w).sin().sum().backward(create_graph=True)
        return (w.grad * w.grad).sum()

    def run(fn):
        w.grad = None
        out = []
        for x in xs:
            p = fn(x)
            assert w.grad.requires_grad
            out += [p.tolist(), w.grad.tolist()]
        p.backward()
        out.append(w.grad.tolist())
        w.grad = None
        return out

    cf = jg.compile(f, backend=backend, fullgraph=True)
    assert run(cf) == run(f)
    assert cf._jitgrad_compiled.entries() == 2  # .grad None, then set


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_twice_through_disjoint_graphs(jg, torch, backend):
    # retain_graph is per backward: the second backward goes through nodes
    # the first did not free, so eager (and PyTorch) run it, and so is it
    # traced; .grad accumulates as eager's
    w, xs = make_w(jg)

    def f(T, w, x):
        (x @ w).tanh().sum().backward()
        (x @ w).sin().sum().backward()
        return w.grad

    cf = jg.compile(lambda x: f(jg, w, x), backend=backend, fullgraph=True)
    for x in xs:
        w.grad = None
        want = f(jg, w, x).clone()
        w.grad = None
        assert same(cf(x), want)
    assert cf._jitgrad_compiled.fallbacks() == 0
    tw = torch.tensor(w.tolist(), requires_grad=True)
    got = f(torch, tw, torch.tensor(xs[-1].tolist()))
    assert torch.allclose(torch.tensor(want.tolist()), got, atol=1e-5)
