"""jitgrad.compile(mode=...): "reduce-overhead" (buffers kept across calls,
an output still held never overwritten), "max-autotune-no-cudagraphs"
(the fastest schedule of each graph, chosen on its first call and logged
under JITGRAD_LOG=autotune) and "max-autotune" (both) train bitwise as
eager does: losses and parameters after 20 whole steps (forward, backward,
optimizer step, zero_grad) of an MLP and of a transformer block."""
import pytest

BACKENDS = ["interp", "c"]
MODES = ["default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"]


class Block:
    """Pre-norm attention and a GELU MLP, residuals, no biases."""

    def __init__(self, T, d=8):
        nn = T.nn
        self.ln1 = nn.LayerNorm(d, elementwise_affine=False)
        self.ln2 = nn.LayerNorm(d, elementwise_affine=False)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.d, self.F = d, T.nn.functional

    def parameters(self):
        for m in (self.qkv, self.proj, self.fc1, self.fc2):
            yield from m.parameters()

    def __call__(self, x):
        JF = self.F
        q, k, v = self.qkv(self.ln1(x)).split(self.d, dim=-1)
        att = JF.softmax(q @ k.transpose(-2, -1) / self.d ** 0.5, dim=-1)
        x = x + self.proj(att @ v)
        return x + self.fc2(JF.gelu(self.fc1(self.ln2(x))))


def train(T, kind, backend=None, mode=None):
    T.manual_seed(0)
    if kind == "mlp":
        model = T.nn.Sequential(T.nn.Linear(6, 16), T.nn.ReLU(), T.nn.Linear(16, 3))
        params = list(model.parameters())
        shapes = ((16, 6), (16, 3))
    else:
        model = Block(T)
        params = list(model.parameters())
        shapes = ((2, 5, 8), (2, 5, 8))
    opt = T.optim.SGD(params, lr=0.05, momentum=0.9)

    def step(x, y):
        loss = T.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    if backend:
        step = T.compile(step, backend=backend, fullgraph=True, mode=mode)
    T.manual_seed(1)
    x, y = T.randn(*shapes[0]), T.randn(*shapes[1])
    losses = [step(x, y).detach().numpy().tobytes() for _ in range(20)]
    return losses, [p.detach().numpy().tobytes() for p in params], step


@pytest.mark.parametrize("kind", ["mlp", "block"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_mode_trains_as_eager(jg, kind, backend, mode):
    ref = train(jg, kind)
    got = train(jg, kind, backend, mode)
    assert got[:2] == ref[:2]
    assert got[2]._jitgrad_compiled.entries() == 1
    assert got[2]._jitgrad_compiled.fallbacks() == 1  # the step that makes the momentum buffers


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduce_overhead_keeps_held_outputs(jg, backend):
    f = jg.compile(lambda x: x.exp() * 2 + x, backend=backend, mode="reduce-overhead")
    x1, x2 = jg.tensor([0.0, 1.0, 2.0]), jg.tensor([-1.0, 5.0, 0.5])
    want1, want2 = (x1.exp() * 2 + x1).numpy().tobytes(), (x2.exp() * 2 + x2).numpy().tobytes()
    y1 = f(x1)
    y2 = f(x2)
    view = y2[1:]
    del y2
    y3 = f(x1)
    assert y1.numpy().tobytes() == want1  # held across two later calls
    assert view.numpy().tobytes() == (x2.exp() * 2 + x2)[1:].numpy().tobytes()
    assert y3.numpy().tobytes() == want1
    for i in range(4):  # nobody holds the outputs: buffers are reused, values stay right
        assert f(x2 if i % 2 else x1).numpy().tobytes() == (want2 if i % 2 else want1)


def test_reduce_overhead_outputs_with_history(jg):
    w = jg.randn(4, 3, requires_grad=True)
    f = jg.compile(lambda x: (x @ w).tanh(), backend="interp", mode="reduce-overhead")
    x = jg.randn(2, 4)
    outs = [f(x) for _ in range(3)]  # each still held, each with its own gradient path
    for y in outs:
        y.sum().backward()
    g = w.grad.clone()
    w.grad = None
    for _ in range(3):
        (x @ w).tanh().sum().backward()
    assert g.numpy().tobytes() == w.grad.numpy().tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_autotune_logs_its_choice(jg, backend, monkeypatch, capfd):
    monkeypatch.setenv("JITGRAD_LOG", "autotune")
    f = jg.compile(lambda x: (x.exp() * 2 + x).sum(), backend=backend, mode="max-autotune")
    x = jg.randn(100000)
    want = (x.exp() * 2 + x).sum().numpy().tobytes()
    for _ in range(3):
        assert f(x).numpy().tobytes() == want
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("jitgrad: max-autotune: ")]
    assert len(lines) == 1, err  # chosen once, on the first call
    assert " runs with " in lines[0]
    assert ("c loops" if backend == "c" else "interp kernels") in lines[0]


def test_compiled_module_takes_the_mode(jg):
    jg.manual_seed(0)
    model = jg.nn.Sequential(jg.nn.Linear(4, 8), jg.nn.ReLU(), jg.nn.Linear(8, 2))
    x = jg.randn(3, 4)
    want = model(x).detach().numpy().tobytes()
    cm = jg.compile(model, backend="interp", mode="reduce-overhead")
    assert cm(x).detach().numpy().tobytes() == want
    with pytest.raises(RuntimeError, match="Unrecognized mode=turbo"):
        jg.compile(model, mode="turbo")


def train_batches(T, batches, backend=None, mode=None):
    T.manual_seed(0)
    model = T.nn.Sequential(T.nn.Linear(6, 16), T.nn.Tanh(), T.nn.Linear(16, 3))
    opt = T.optim.SGD(model.parameters(), lr=0.05)

    def step(x, y):
        loss = T.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    if backend:
        step = T.compile(step, backend=backend, mode=mode)
    T.manual_seed(1)
    losses = [step(T.randn(b, 6), T.randint(0, 3, (b,))).detach().numpy().tobytes()
              for b in batches]
    return losses, [p.detach().numpy().tobytes() for p in model.parameters()], step


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_mode_with_changing_batch_size(jg, backend, mode):
    """Dynamic sizes: the buffers of one entry serve every batch size."""
    batches = [8, 8, 5, 8, 3, 8, 8, 6, 8, 2]
    ref = train_batches(jg, batches)
    got = train_batches(jg, batches, backend, mode)
    assert got[:2] == ref[:2]
    assert got[2]._jitgrad_compiled.entries() <= 3
