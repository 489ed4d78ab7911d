"""A whole training step with Adam, AdamW, Adagrad or RMSprop compiled as one
graph: the numbers the update computes from the step count (bias
corrections, Adagrad's clr) are graph ops on the count tensor, not a read
of it, so no call after the first (which creates the state) breaks the
graph.  Twenty steps give losses, parameters and state bitwise equal to the
eager loop, on both backends (test_optim.py compares the eager steps with
torch.optim)."""
import pytest

BACKENDS = ["interp", "c"]

CASES = [
    ("Adam", {}),
    ("Adam", {"amsgrad": True, "weight_decay": 0.1, "maximize": True, "betas": (0.8, 0.99)}),
    ("AdamW", {}),
    ("AdamW", {"amsgrad": True, "weight_decay": 0.1}),
    ("Adagrad", {}),
    ("Adagrad", {"lr_decay": 0.05, "weight_decay": 0.1, "initial_accumulator_value": 0.2}),
    ("RMSprop", {}),
    ("RMSprop", {"centered": True, "momentum": 0.5, "weight_decay": 0.01}),
]


def _ids():
    return [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


def whole_step(T, opt_name, kw, backend=None, dtype=None, count=None):
    """20 steps of a one-layer model (two parameter tensors); count: the
    step count the state starts from (a loaded state)."""
    T.manual_seed(0)
    model = T.nn.Linear(4, 3)
    if dtype is not None:
        model = model.to(dtype)
    opt = getattr(T.optim, opt_name)(model.parameters(), lr=0.05, **kw)
    if count is not None:
        for p in model.parameters():
            opt.state[p]["step"] = T.tensor(float(count))

    def step(x, y):
        loss = T.nn.functional.mse_loss(model(x).tanh(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if backend:
        step = T.compile(step, backend=backend, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(8, 4, dtype=dtype), T.randn(8, 3, dtype=dtype)
    losses = [step(x, y).detach().numpy().tobytes() for _ in range(20)]
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    state = [
        {k: (v.numpy().tobytes() if isinstance(v, T.Tensor) else v) for k, v in opt.state[p].items()}
        for p in model.parameters()
    ]
    return (losses, params, state), opt, (step._jitgrad_compiled if backend else None)


def first_call_eager(opt_name):
    # the first step creates the state (Adagrad's exists from the start)
    return 0 if opt_name == "Adagrad" else 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name,kw", CASES, ids=_ids())
def test_compiled_step_matches_eager(jg, backend, opt_name, kw):
    ref, _, _ = whole_step(jg, opt_name, kw)
    got, opt, c = whole_step(jg, opt_name, kw, backend)
    assert got == ref
    assert c.fallbacks() == first_call_eager(opt_name)
    assert c.entries() == 1  # one graph, replayed: no break on the count
    for p in opt.param_groups[0]["params"]:
        assert opt.state[p]["step"].item() == 20.0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("opt_name,kw", [CASES[1], CASES[3], CASES[5]], ids=["Adam", "AdamW", "Adagrad"])
def test_compiled_step_f64_and_loaded_count(jg, backend, opt_name, kw):
    # f64 parameters take the double scalars unrounded; a loaded count of
    # 1234 puts beta2 ** step far from 1 and 1 - beta1 ** step near 1
    for dtype, count in ((jg.float64, None), (jg.float32, 1234), (jg.float64, 1234)):
        ref, _, _ = whole_step(jg, opt_name, kw, dtype=dtype, count=count)
        got, _, c = whole_step(jg, opt_name, kw, backend, dtype=dtype, count=count)
        assert got == ref
        assert c.fallbacks() == first_call_eager(opt_name) and c.entries() == 1


def test_rmsprop_count_is_a_tensor_saved_as_an_int(jg):
    # a compiled step counts in a tensor (a Python int would not change at
    # replays); state_dict() keeps PyTorch 1.13's int
    _, opt, c = whole_step(jg, "RMSprop", {}, "interp")
    p = opt.param_groups[0]["params"][0]
    assert isinstance(opt.state[p]["step"], jg.Tensor)
    assert opt.state[p]["step"].item() == 20.0
    sd = opt.state_dict()
    assert sd["state"][0]["step"] == 20 and type(sd["state"][0]["step"]) is int
    assert list(sd["state"][0]) == ["step", "square_avg"]
    # loaded back: the int becomes the count tensor again, outside the program
    opt.load_state_dict(sd)
    assert isinstance(opt.state[p]["step"], jg.Tensor)
    assert opt.state[p]["step"].dtype == jg.float32 and opt.state[p]["step"].item() == 20.0


# regression: the key held objects' scalar attributes but not dict values,
# so a new group['lr'] (an LR schedule) was not seen and replays kept the
# traced lr
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_lr_changed_between_compiled_steps(jg, opt_name):
    def run(backend):
        jg.manual_seed(0)
        model = jg.nn.Linear(4, 3)
        opt = getattr(jg.optim, opt_name)(model.parameters(), lr=0.05)

        def step(x, y):
            loss = jg.nn.functional.mse_loss(model(x).tanh(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        if backend:
            step = jg.compile(step, backend=backend)
        jg.manual_seed(1)
        x, y = jg.randn(8, 4), jg.randn(8, 3)
        losses = []
        for i in range(10):
            losses.append(step(x, y).item())
            if i % 5 == 4:
                opt.param_groups[0]["lr"] *= 0.5
        return losses

    assert run("interp") == run(None)
