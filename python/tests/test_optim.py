"""jitgrad.optim against torch.optim (PyTorch 1.13): 20 steps of every
optimizer on a small problem, parameter groups, state_dict exchange in both
directions, zero_grad, closures, the lr schedulers and bad input."""
import math
import warnings

import numpy as np
import pytest

import jitgrad
import jitgrad.optim as jo

torch = pytest.importorskip("torch")

W0 = [[1.0, -2.0, 0.5], [0.25, 0.75, -1.5]]
B0 = [0.3, -0.1]
X = [[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0], [0.1, 0.2]]
T = [[0.2, 0.4, -1.0], [1.0, 0.0, 0.5], [-0.3, 0.7, 0.1], [0.0, 1.0, 2.0]]


def _params(lib, dtype):
    w = lib.tensor(W0, dtype=dtype, requires_grad=True)
    b = lib.tensor(B0, dtype=dtype, requires_grad=True)
    return w, b


def _loss(lib, w, b, dtype):
    x = lib.tensor(X, dtype=dtype)
    t = lib.tensor(T, dtype=dtype)
    y = (x @ w).tanh() + b.sum()
    return ((y - t) * (y - t)).mean() + (b * b).sum()


def _train(lib, opt_cls, kwargs, dtype, steps=20, groups=False, set_to_none=False):
    w, b = _params(lib, dtype)
    if groups:
        params = [{"params": [w]}, {"params": b, "lr": kwargs.get("lr", 0.01) * 0.5}]
    else:
        params = [w, b]
    opt = opt_cls(params, **kwargs)
    for _ in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        _loss(lib, w, b, dtype).backward()
        opt.step()
    return opt, w, b


CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.002, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)),
    ("Adam", dict(lr=0.002, maximize=True)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.01)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6, weight_decay=0.3)),
    ("AdamW", dict(lr=0.05, amsgrad=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.2)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.3)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
    ("Adadelta", dict(lr=0.1, maximize=True)),
]


def _ids():
    return [f"{n}-{i}" for i, (n, _) in enumerate(CASES)]


def _np(t):
    return np.array(t.detach().tolist())


@pytest.mark.parametrize("name,kwargs", CASES, ids=_ids())
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_optim_matches_torch(name, kwargs, dtype):
    tol = 1e-6 if dtype == "float64" else 1e-5
    _, w, b = _train(jitgrad, getattr(jo, name), kwargs, getattr(jitgrad, dtype))
    _, tw, tb = _train(torch, getattr(torch.optim, name), kwargs, getattr(torch, dtype))
    assert w.dtype == getattr(jitgrad, dtype)
    np.testing.assert_allclose(_np(w), _np(tw), rtol=tol, atol=tol)
    np.testing.assert_allclose(_np(b), _np(tb), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kwargs", CASES[::2], ids=_ids()[::2])
def test_optim_groups_and_state_dict_layout(name, kwargs):
    opt, w, b = _train(jitgrad, getattr(jo, name), kwargs, jitgrad.float64, steps=3, groups=True)
    topt, tw, tb = _train(
        torch, getattr(torch.optim, name), kwargs, torch.float64, steps=3, groups=True
    )
    np.testing.assert_allclose(_np(w), _np(tw), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(b), _np(tb), rtol=1e-6, atol=1e-6)
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert sd["param_groups"] == tsd["param_groups"]
    assert sd["state"].keys() == tsd["state"].keys()
    for k in tsd["state"]:
        assert list(sd["state"][k].keys()) == list(tsd["state"][k].keys())
        for key, tv in tsd["state"][k].items():
            v = sd["state"][k][key]
            if isinstance(tv, torch.Tensor):
                assert isinstance(v, jitgrad.Tensor)
                assert str(v.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1]
                np.testing.assert_allclose(_np(v), _np(tv), rtol=1e-6, atol=1e-9)
            else:
                assert type(v) is type(tv) and v == tv


@pytest.mark.parametrize("name,kwargs", CASES, ids=_ids())
def test_optim_load_torch_state_dict(name, kwargs):
    """torch.optim's state after 5 steps, loaded into jitgrad, continues as
    torch continues; and jitgrad's state loads into torch.optim."""
    topt, tw, tb = _train(torch, getattr(torch.optim, name), kwargs, torch.float64, steps=5)
    w = jitgrad.tensor(tw.tolist(), dtype=jitgrad.float64, requires_grad=True)
    b = jitgrad.tensor(tb.tolist(), dtype=jitgrad.float64, requires_grad=True)
    opt = getattr(jo, name)([w, b], **kwargs)
    opt.load_state_dict(topt.state_dict())
    # and back: jitgrad's state_dict into a fresh torch optimizer
    tw2 = tw.detach().clone().requires_grad_(True)
    tb2 = tb.detach().clone().requires_grad_(True)
    topt2 = getattr(torch.optim, name)([tw2, tb2], **kwargs)
    sd = opt.state_dict()
    tsd = {
        "param_groups": sd["param_groups"],
        "state": {
            k: {
                kk: torch.tensor(vv.tolist(), dtype=torch.float32 if kk == "step" else None)
                if isinstance(vv, jitgrad.Tensor)
                else vv
                for kk, vv in v.items()
            }
            for k, v in sd["state"].items()
        },
    }
    topt2.load_state_dict(tsd)
    for _ in range(5):
        for o, lib, p in ((opt, jitgrad, (w, b)), (topt, torch, (tw, tb)), (topt2, torch, (tw2, tb2))):
            o.zero_grad()
            _loss(lib, *p, lib.float64).backward()
            o.step()
    for a, t in ((w, tw), (b, tb), (tw2, tw), (tb2, tb)):
        np.testing.assert_allclose(_np(a), _np(t), rtol=1e-6, atol=1e-6)


def test_optim_state_dict_roundtrip_is_exact():
    opt, w, b = _train(jitgrad, jo.Adam, dict(lr=0.05), jitgrad.float64, steps=4)
    w2 = w.detach().clone().requires_grad_(True)
    b2 = b.detach().clone().requires_grad_(True)
    opt2 = jo.Adam([w2, b2], lr=0.5)
    opt2.load_state_dict(opt.state_dict())
    assert opt2.param_groups[0]["lr"] == 0.05
    # a copy: stepping one does not move the other's state
    assert opt2.state[w2]["exp_avg"]._same_storage(opt.state[w]["exp_avg"]) is False
    for _ in range(3):
        for o, p in ((opt, (w, b)), (opt2, (w2, b2))):
            o.zero_grad()
            _loss(jitgrad, *p, jitgrad.float64).backward()
            o.step()
    assert w.tolist() == w2.tolist() and b.tolist() == b2.tolist()


def test_optim_zero_grad():
    w, b = _params(jitgrad, jitgrad.float64)
    opt = jo.SGD([w, b], lr=0.1)
    _loss(jitgrad, w, b, jitgrad.float64).backward()
    g = w.grad
    opt.zero_grad()  # PyTorch 1.13's default: set_to_none=False
    assert w.grad is not None and w.grad.tolist() == [[0.0] * 3] * 2
    assert g._same_storage(w.grad)
    opt.zero_grad(set_to_none=True)
    assert w.grad is None and b.grad is None
    before = w.tolist()
    opt.step()  # no gradients: nothing moves, no state
    assert w.tolist() == before and len(opt.state) == 0


def test_optim_step_closure_and_versions():
    w, b = _params(jitgrad, jitgrad.float64)
    opt = jo.Adam([w, b], lr=0.1)
    v = w._version

    def closure():
        opt.zero_grad()
        loss = _loss(jitgrad, w, b, jitgrad.float64)
        loss.backward()
        return loss

    with jitgrad.no_grad():
        loss = opt.step(closure)  # the closure runs with grad on
    assert isinstance(loss, jitgrad.Tensor)
    assert w._version > v
    assert w.requires_grad and w.is_leaf and w.grad_fn is None


def test_optim_repr_and_param_groups():
    w, b = _params(jitgrad, jitgrad.float64)
    tw, tb = _params(torch, torch.float64)
    opt = jo.SGD([w], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([tw], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.01})
    topt.add_param_group({"params": tb, "lr": 0.01})
    assert repr(opt) == repr(topt)
    assert opt.param_groups[1]["momentum"] == 0.9


@pytest.mark.parametrize(
    "make, exc, msg",
    [
        (lambda p: jo.SGD(p, lr=-0.1), ValueError, "Invalid learning rate: -0.1"),
        (lambda p: jo.SGD(p, lr=0.1, nesterov=True), ValueError, "Nesterov momentum requires"),
        (lambda p: jo.SGD(p), ValueError, "required optimization parameter lr"),
        (lambda p: jo.Adam(p, betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0: 1.0"),
        (lambda p: jo.Adam(p, eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
        (lambda p: jo.AdamW(p, weight_decay=-1), ValueError, "Invalid weight_decay value: -1"),
        (lambda p: jo.Adagrad(p, lr_decay=-1), ValueError, "Invalid lr_decay value: -1"),
        (lambda p: jo.RMSprop(p, alpha=-1), ValueError, "Invalid alpha value: -1"),
        (lambda p: jo.Adadelta(p, rho=1.5), ValueError, "Invalid rho value: 1.5"),
        (lambda p: jo.SGD([], lr=0.1), ValueError, "optimizer got an empty parameter list"),
        (lambda p: jo.SGD(p[0], lr=0.1), TypeError, "should be an iterable of Tensors or dicts"),
        (lambda p: jo.SGD([p[0], 1.0], lr=0.1), TypeError, "can only optimize Tensors"),
        (lambda p: jo.SGD([p[0] * 2], lr=0.1), ValueError, "can't optimize a non-leaf Tensor"),
        (lambda p: jo.SGD([{"params": p}, {"params": p[:1]}], lr=0.1), ValueError,
         "some parameters appear in more than one parameter group"),
        (lambda p: jo.SGD([{"params": set(p)}], lr=0.1), TypeError, "ordered collections"),
    ],
)
def test_optim_bad_input(make, exc, msg):
    p = list(_params(jitgrad, jitgrad.float64))
    with pytest.raises(exc, match=msg.replace("(", r"\(").replace(".", r"\.")):
        make(p)
    assert p[0].tolist() == W0


def test_optim_load_state_dict_mismatch():
    w, b = _params(jitgrad, jitgrad.float64)
    opt = jo.Adam([w, b])
    other = jo.Adam([w])
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict(other.state_dict())
    two = jo.Adam([{"params": [w]}, {"params": [b]}])
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(two.state_dict())


def test_optim_unsupported_options():
    w, _ = _params(jitgrad, jitgrad.float64)
    with pytest.raises(NotImplementedError, match="capturable"):
        jo.Adam([w], capturable=True)
    with pytest.raises(NotImplementedError, match="differentiable"):
        jo.SGD([w], lr=0.1, differentiable=True)


def _lrs(lib, sched, kwargs, n=25, groups=2):
    w, b = _params(lib, lib.float64)
    opt_mod = jo if lib is jitgrad else torch.optim
    opt = opt_mod.SGD([{"params": [w]}, {"params": [b], "lr": 0.2}][:groups], lr=0.1)
    mod = jo.lr_scheduler if lib is jitgrad else torch.optim.lr_scheduler
    s = getattr(mod, sched)(opt, **kwargs)
    out = [s.get_last_lr()]
    for _ in range(n):
        opt.step()
        s.step()
        out.append(s.get_last_lr())
    return out, s


@pytest.mark.parametrize(
    "sched,kwargs",
    [
        ("StepLR", dict(step_size=3, gamma=0.5)),
        ("CosineAnnealingLR", dict(T_max=7, eta_min=0.001)),
        ("CosineAnnealingLR", dict(T_max=10)),
        ("LambdaLR", dict(lr_lambda=lambda e: 0.95**e)),
        ("LambdaLR", dict(lr_lambda=[lambda e: 1.0 / (e + 1), lambda e: math.cos(e)])),
    ],
)
def test_lr_scheduler_matches_torch(sched, kwargs):
    got, s = _lrs(jitgrad, sched, kwargs)
    want, ts = _lrs(torch, sched, kwargs)
    assert got == want  # the same Python float arithmetic: exact
    sd, tsd = s.state_dict(), ts.state_dict()
    assert sd.keys() == tsd.keys()
    assert {k: v for k, v in sd.items() if k != "lr_lambdas"} == {
        k: v for k, v in tsd.items() if k != "lr_lambdas"
    }


def test_lr_scheduler_drives_training_like_torch():
    def run(lib, optim):
        w, b = _params(lib, lib.float64)
        opt = optim.Adam([w, b], lr=0.1)
        s = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
        for _ in range(12):
            opt.zero_grad()
            _loss(lib, w, b, lib.float64).backward()
            opt.step()
            s.step()
        return _np(w), _np(b)

    (w, b), (tw, tb) = run(jitgrad, jo), run(torch, torch.optim)
    np.testing.assert_allclose(w, tw, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, tb, rtol=1e-6, atol=1e-6)


def test_lr_scheduler_errors_and_warnings():
    w, _ = _params(jitgrad, jitgrad.float64)
    with pytest.raises(TypeError, match="int is not an Optimizer"):
        jo.lr_scheduler.StepLR(3, step_size=1)
    opt = jo.SGD([w], lr=0.1)
    with pytest.raises(KeyError, match="initial_lr"):
        jo.lr_scheduler.StepLR(opt, step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        jo.lr_scheduler.LambdaLR(opt, [lambda e: 1, lambda e: 2])
    s = jo.lr_scheduler.StepLR(opt, step_size=1)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        s.step()


def _backends():
    return ["interp"] + (["c"] if jitgrad.HAS_COMPILER else [])


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name,kwargs", [CASES[1], CASES[5], CASES[10], CASES[13]])
def test_optim_with_compiled_loss_matches_eager_bitwise(backend, name, kwargs):
    """A compiled forward, eager backward and optimizer step: parameters,
    grads and state equal eager mode's bit for bit."""

    def run(compiled):
        w, b = _params(jitgrad, jitgrad.float64)
        opt = getattr(jo, name)([w, b], **kwargs)
        loss_fn = lambda: _loss(jitgrad, w, b, jitgrad.float64)  # noqa: E731
        if compiled:
            loss_fn = jitgrad.compile(loss_fn, backend=backend, fullgraph=True)
        for _ in range(6):
            opt.zero_grad()
            loss_fn().backward()
            opt.step()
        return w, b, opt

    (w, b, opt), (cw, cb, copt) = run(False), run(True)
    assert cw.tolist() == w.tolist() and cb.tolist() == b.tolist()
    assert cw.grad.tolist() == w.grad.tolist() and cb.grad.tolist() == b.grad.tolist()
    for p, cp in ((w, cw), (b, cb)):
        for k, v in opt.state[p].items():
            cv = copt.state[cp][k]
            assert (cv.tolist() if isinstance(cv, jitgrad.Tensor) else cv) == (
                v.tolist() if isinstance(v, jitgrad.Tensor) else v
            )


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name,kwargs", [CASES[1], CASES[5]])
def test_optim_step_inside_compiled_program_runs_eagerly(backend, name, kwargs):
    """A step inside a compiled program that creates the optimizer's state
    runs eagerly before anything is touched (no traced tensor reaches the
    state); later steps are traced (SGD) or break on Adam's step.item()."""

    def run(mode):
        w, b = _params(jitgrad, jitgrad.float64)
        opt = getattr(jo, name)([w, b], **kwargs)

        def step():
            opt.step()
            return w * 1

        f = step if mode == "eager" else jitgrad.compile(step, backend=backend)
        for _ in range(4):
            opt.zero_grad()
            _loss(jitgrad, w, b, jitgrad.float64).backward()
            f()
        return w, b

    (w, b), (cw, cb) = run("eager"), run("compiled")
    assert cw.tolist() == w.tolist() and cb.tolist() == b.tolist()

    w, b = _params(jitgrad, jitgrad.float64)
    opt = getattr(jo, name)([w, b], **kwargs)
    _loss(jitgrad, w, b, jitgrad.float64).backward()

    def step():
        opt.step()
        return w * 1

    # the first step creates the state: that call runs eagerly, also under
    # fullgraph (the next call is traced)
    f = jitgrad.compile(step, backend=backend, fullgraph=True)
    f()
    assert w.tolist() != W0 and all(opt.state.values())
    assert f._jitgrad_compiled.fallbacks() == 1 and f._jitgrad_compiled.entries() == 0


def test_optim_numeric_step_and_list_betas():
    """A step count saved as a number (PyTorch before 1.12 kept Adam's as
    one) loads; betas may be a list."""
    opt, w, b = _train(jitgrad, jo.Adam, dict(lr=0.05), jitgrad.float64, steps=3)
    sd = opt.state_dict()
    for s in sd["state"].values():
        s["step"] = int(s["step"].item())
    sd["param_groups"][0]["betas"] = list(sd["param_groups"][0]["betas"])
    w2 = w.detach().clone().requires_grad_(True)
    b2 = b.detach().clone().requires_grad_(True)
    opt2 = jo.Adam([w2, b2])
    opt2.load_state_dict(sd)
    for o, p in ((opt, (w, b)), (opt2, (w2, b2))):
        o.zero_grad()
        _loss(jitgrad, *p, jitgrad.float64).backward()
        o.step()
    assert w.tolist() == w2.tolist() and b.tolist() == b2.tolist()
    opt2.param_groups[0]["betas"] = 0.9
    with pytest.raises(TypeError, match="betas must be a pair of floats"):
        opt2.step()


def test_adagrad_state_exists_before_the_first_step():
    w, b = _params(jitgrad, jitgrad.float32)
    tw, tb = _params(torch, torch.float32)
    sd = jo.Adagrad([w, b], initial_accumulator_value=0.5).state_dict()
    tsd = torch.optim.Adagrad([tw, tb], initial_accumulator_value=0.5).state_dict()
    assert sd["state"].keys() == tsd["state"].keys() == {0, 1}
    for k in (0, 1):
        assert sd["state"][k]["step"].tolist() == 0.0
        assert sd["state"][k]["step"].dtype == jitgrad.float32
        assert sd["state"][k]["sum"].tolist() == tsd["state"][k]["sum"].tolist()
        assert sd["state"][k]["sum"].dtype == jitgrad.float32
