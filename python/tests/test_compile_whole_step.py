"""A whole training step compiled as one graph: loss.backward() inside the
program is traced into its graph (the .grad it leaves is applied to the
parameters after each call), opt.step() and zero_grad() update parameters,
optimizer state and .grad in place, traced as writes applied after each
call.  Twenty steps give losses, parameters, .grad (None or a tensor) and
optimizer state bitwise equal to the eager loop, on both backends.  The
optimizer step alone compiled (backward outside) works the same way."""
import pytest

BACKENDS = ["interp", "c"]


def make(T, opt_name, **kw):
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 2))
    opt = getattr(T.optim, opt_name)(model.parameters(), lr=0.05, **kw)
    return model, opt


def train(T, opt_name, kw, backend=None, zero_in_step=False, fullgraph=True):
    model, opt = make(T, opt_name, **kw)

    def step():
        opt.step()
        if zero_in_step:
            opt.zero_grad(set_to_none=False)

    if backend:
        step = T.compile(step, backend=backend, fullgraph=fullgraph)
    T.manual_seed(1)
    x, y = T.randn(16, 4), T.randn(16, 2)
    losses = []
    for _ in range(20):
        loss = T.nn.functional.mse_loss(model(x), y)
        losses.append(loss.item())
        loss.backward()
        step()
        if not zero_in_step:
            opt.zero_grad(set_to_none=True)
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    grads = [None if p.grad is None else p.grad.numpy().tobytes() for p in model.parameters()]
    state = [
        {k: (v.numpy().tobytes() if isinstance(v, T.Tensor) else v) for k, v in opt.state[p].items()}
        for p in model.parameters()
    ]
    return losses, params, grads, state, step


CASES = [
    # the first traced step stores state['momentum_buffer'] = None (as
    # PyTorch's SGD does): Python state the key holds, so one more trace
    ("SGD", {}, 2, 0),
    ("SGD", {"momentum": 0.9, "weight_decay": 0.01}, 1, 1),  # the first step creates the buffers
    ("SGD", {"momentum": 0.9, "nesterov": True}, 1, 1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("zero_in_step", [False, True])
@pytest.mark.parametrize("opt_name,kw,entries,fallbacks", CASES)
def test_compiled_optimizer_step_matches_eager(jg, backend, zero_in_step, opt_name, kw, entries,
                                               fallbacks):
    ref = train(jg, opt_name, kw, zero_in_step=zero_in_step)
    got = train(jg, opt_name, kw, backend=backend, zero_in_step=zero_in_step)
    assert got[:4] == ref[:4]
    compiled = got[4]._jitgrad_compiled
    assert compiled.entries() == entries
    assert compiled.fallbacks() == fallbacks


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_adam_step_traced(jg, opt_name):
    # the bias corrections are graph ops on the step count (no read of it):
    # the first call creates the state (eagerly), the others replay one graph
    # (test_compile_adam_step.py: the whole step with each optimizer)
    ref = train(jg, opt_name, {})
    got = train(jg, opt_name, {}, backend="interp")
    assert got[:4] == ref[:4]
    assert got[4]._jitgrad_compiled.fallbacks() == 1
    assert got[4]._jitgrad_compiled.entries() == 1


def test_zero_grad_set_to_none_in_program(jg):
    model, opt = make(jg, "SGD")
    model(jg.ones(2, 4)).sum().backward()
    f = jg.compile(lambda: opt.zero_grad(set_to_none=True), backend="interp", fullgraph=True)
    f()
    assert all(p.grad is None for p in model.parameters())
    model(jg.ones(2, 4)).sum().backward()
    f()  # applied at every call, not only while traced
    assert all(p.grad is None for p in model.parameters())
    assert f._jitgrad_compiled.entries() == 1 and f._jitgrad_compiled.fallbacks() == 0


def whole_step(T, opt_name, kw, backend=None, set_to_none=True, loss_fn="mse", fullgraph=True):
    model, opt = make(T, opt_name, **kw)
    F = T.nn.functional

    def step(x, y, t):
        out = model(x)
        loss = F.mse_loss(out, y) if loss_fn == "mse" else F.cross_entropy(out, t)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)
        return loss

    if backend:
        step = T.compile(step, backend=backend, fullgraph=fullgraph)
    T.manual_seed(1)
    x, y, t = T.randn(16, 4), T.randn(16, 2), T.tensor([0, 1] * 8)
    losses = [step(x, y, t).detach().numpy().tobytes() for _ in range(20)]
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    grads = [None if p.grad is None else p.grad.numpy().tobytes() for p in model.parameters()]
    state = [
        {k: (v.numpy().tobytes() if isinstance(v, T.Tensor) else v) for k, v in opt.state[p].items()}
        for p in model.parameters()
    ]
    return (losses, params, grads, state), step._jitgrad_compiled if backend else None


WHOLE = [
    ("SGD", {}, 0),
    ("SGD", {"momentum": 0.9, "weight_decay": 0.01}, 1),  # the first step creates the buffers
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("loss_fn", ["mse", "cross_entropy"])
@pytest.mark.parametrize("opt_name,kw,fallbacks", WHOLE)
def test_whole_step_one_graph_matches_eager(jg, backend, set_to_none, loss_fn, opt_name, kw,
                                            fallbacks):
    ref, _ = whole_step(jg, opt_name, kw, set_to_none=set_to_none, loss_fn=loss_fn)
    got, c = whole_step(jg, opt_name, kw, backend, set_to_none=set_to_none, loss_fn=loss_fn)
    assert got == ref
    # without momentum, the first (traced) call stores state['momentum_buffer']
    # = None, and without set_to_none it also sees no .grad where the others
    # see a zeroed one: two guard sets
    assert c.entries() == (1 if fallbacks else 2)
    assert c.fallbacks() == fallbacks


def test_backward_twice_with_retain_graph(jg):
    w = jg.tensor([2.0, 3.0], requires_grad=True)

    def f(x):
        loss = (w * x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return loss

    cf = jg.compile(f, backend="interp", fullgraph=True)
    for k in (1, 2):
        cf(jg.tensor([1.0, 5.0]))
        assert w.grad.tolist() == [2.0 * k, 10.0 * k]
    assert cf._jitgrad_compiled.entries() == 2  # .grad None, then set


def test_backward_twice_without_retain_graph_is_a_graph_break(jg):
    w = jg.tensor([2.0, 3.0], requires_grad=True)

    def f(x):
        loss = (w * x).sum()
        loss.backward()
        loss.backward()  # eager fails: the graph was freed
        return loss

    with pytest.raises(RuntimeError, match="a second backward through the same graph"):
        jg.compile(f, backend="interp", fullgraph=True)(jg.tensor([1.0, 5.0]))
    assert w.grad is None
    with pytest.raises(RuntimeError, match="second time"):
        jg.compile(f, backend="interp")(jg.tensor([1.0, 5.0]))


def test_backward_accumulates_into_existing_grad(jg):
    # .grad set before the call: the traced backward adds into that tensor
    # in place (same object, version bumped), as eager's AccumulateGrad
    w = jg.tensor([2.0, 3.0], requires_grad=True)

    def f(x):
        loss = (w * x).sum()
        loss.backward()
        return loss

    cf = jg.compile(f, backend="interp", fullgraph=True)
    (w * 1).sum().backward()
    g = w.grad
    for _ in range(3):
        cf(jg.tensor([1.0, 5.0]))
    assert g.tolist() == [4.0, 16.0] and w.grad.tolist() == [4.0, 16.0]  # the same tensor
    w.grad = None
    cf(jg.tensor([1.0, 5.0]))  # .grad None: another guard set, traced again
    assert w.grad.tolist() == [1.0, 5.0] and g.tolist() == [4.0, 16.0]
    assert cf._jitgrad_compiled.entries() == 2


def test_buffer_update_in_program_is_written_back(jg):
    # a running statistic updated under no_grad, as BatchNorm's
    buf = jg.zeros(3)

    def f(x):
        with jg.no_grad():
            buf.mul_(0.9).add_(x.mean(0) * 0.1)
        return x * 2

    x = jg.randn(5, 3)
    cf = jg.compile(f, backend="interp", fullgraph=True)
    ref = jg.zeros(3)
    for _ in range(3):
        cf(x)
        ref.mul_(0.9).add_(x.mean(0) * 0.1)
    assert buf.numpy().tobytes() == ref.numpy().tobytes()
    assert buf._version == ref._version
    assert cf._jitgrad_compiled.entries() == 1


class Block:
    """A small transformer block: pre-norm attention and GELU MLP, residuals,
    no biases or norm weights (test_compile_many.py trains models with
    them)."""

    def __init__(self, T, d=8):
        nn = T.nn
        self.ln1 = nn.LayerNorm(d, elementwise_affine=False)
        self.ln2 = nn.LayerNorm(d, elementwise_affine=False)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.d = d

    def parameters(self):
        for m in (self.ln1, self.qkv, self.proj, self.ln2, self.fc1, self.fc2):
            yield from m.parameters()

    def __call__(self, T, x):
        F = T.nn.functional
        q, k, v = self.qkv(self.ln1(x)).split(self.d, dim=-1)
        att = F.softmax(q @ k.transpose(-2, -1) / self.d ** 0.5, dim=-1)
        x = x + self.proj(att @ v)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def block_train(T, backend=None):
    T.manual_seed(0)
    blk = Block(T)
    opt = T.optim.SGD(list(blk.parameters()), lr=0.05, momentum=0.9)

    def step(x, y):
        loss = T.nn.functional.mse_loss(blk(T, x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    if backend:
        step = T.compile(step, backend=backend, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(2, 5, 8), T.randn(2, 5, 8)
    losses = [step(x, y).detach().numpy().tobytes() for _ in range(20)]
    params = [p.detach().numpy().tobytes() for p in blk.parameters()]
    return losses, params, step


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_step_transformer_block(jg, backend):
    ref = block_train(jg)
    got = block_train(jg, backend)
    assert got[:2] == ref[:2]
    assert got[2]._jitgrad_compiled.entries() == 1
    assert got[2]._jitgrad_compiled.fallbacks() == 1


def test_backward_into_input_leaf_writes_that_input(jg):
    # .grad of a call input is guarded and written for that tensor: another
    # input tensor traces again instead of writing the first one's .grad
    def f(x):
        loss = (x * x).sum()
        loss.backward()
        return loss

    cf = jg.compile(f, backend="interp", fullgraph=True)
    x1 = jg.tensor([1.0, 2.0], requires_grad=True)
    x2 = jg.tensor([3.0, 4.0], requires_grad=True)
    cf(x1)
    assert x1.grad.tolist() == [2.0, 4.0]
    x1.grad = None  # x1's guards hold again, but x2 is another tensor
    cf(x2)
    assert x1.grad is None and x2.grad.tolist() == [6.0, 8.0]
    cf(x2)
    assert x1.grad is None and x2.grad.tolist() == [12.0, 16.0]


def test_backward_not_traced_is_a_graph_break_with_reason(jg):
    def non_leaf(x):
        loss = (x * x).sum()
        loss.backward()  # x's history continues outside the program
        return loss

    leaf = jg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="no leaf"):
        jg.compile(non_leaf, backend="interp", fullgraph=True)(leaf * 3)
    assert leaf.grad is None
    jg.compile(non_leaf, backend="interp")(leaf * 3)
    assert leaf.grad.tolist() == [18.0, 36.0]


def test_backward_with_gradient_is_traced(jg):
    # (it was a graph break): backward(gradient) of a non-scalar, one graph
    w = jg.tensor([2.0, 3.0], requires_grad=True)

    def with_gradient(x):
        y = w * x
        y.backward(jg.ones(2))
        return y

    cf = jg.compile(with_gradient, backend="interp", fullgraph=True)
    assert cf(jg.tensor([1.0, 5.0])).tolist() == [2.0, 15.0]
    assert w.grad.tolist() == [1.0, 5.0]
    assert cf._jitgrad_compiled.fallbacks() == 0
