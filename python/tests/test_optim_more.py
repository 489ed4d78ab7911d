"""NAdam, RAdam, Adamax, Rprop, ASGD and LBFGS against torch.optim (PyTorch
1.13): the parameters after every step from the same initial weights,
state_dict round trips and exchange with torch, parameter groups, bad
arguments (PyTorch's exception and text, asked of torch itself), and a
compiled training step that equals the eager one bit for bit."""
import copy

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
    w = lib.tensor(W0, dtype=getattr(lib, dtype), requires_grad=True)
    b = lib.tensor(B0, dtype=getattr(lib, dtype), requires_grad=True)
    return w, b


def _loss(lib, w, b):
    """A small MLP-like objective: tanh layer, squared error, a penalty."""
    x = lib.tensor(X, dtype=w.dtype)
    t = lib.tensor(T, dtype=w.dtype)
    y = (x @ w).tanh() + b.sum()
    return ((y - t) * (y - t)).mean() + (b * b).sum()


CASES = [
    ("NAdam", dict()),
    ("NAdam", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6, weight_decay=0.1)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, betas=(0.7, 0.9), weight_decay=0.1, maximize=True)),
    ("Rprop", dict()),
    ("Rprop", dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
    ("ASGD", dict()),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1)),
    ("ASGD", dict(lr=0.01, maximize=True, t0=0)),
]


def _ids(cases):
    return [f"{n}-{i}" for i, (n, _) in enumerate(cases)]


def _np(t):
    return np.array(t.detach().tolist())


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-9, atol=1e-11)


def _steps(lib, opt, w, b, n):
    out = []
    for _ in range(n):
        opt.zero_grad()
        _loss(lib, w, b).backward()
        opt.step()
        out.append((_np(w), _np(b)))
    return out


@pytest.mark.parametrize("name,kwargs", CASES, ids=_ids(CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_matches_torch_every_step(name, kwargs, dtype):
    runs = []
    for lib in (torch, jitgrad):
        w, b = _params(lib, dtype)
        opt = getattr(lib.optim, name)([w, b], **kwargs)
        runs.append(_steps(lib, opt, w, b, 25))
    for (tw, tb), (jw, jb) in zip(*runs):
        np.testing.assert_allclose(jw, tw, **_tol(dtype))
        np.testing.assert_allclose(jb, tb, **_tol(dtype))


def _state_np(sd):
    return {
        k: {n: (_np(v) if hasattr(v, "detach") else v) for n, v in s.items()}
        for k, s in sd["state"].items()
    }


@pytest.mark.parametrize("name,kwargs", CASES, ids=_ids(CASES))
def test_state_dict_layout_roundtrip_and_exchange(name, kwargs):
    """After 4 steps jitgrad's state_dict has torch's keys, types and
    values; a new optimizer loaded from it (or from torch's) then steps as
    torch's continues."""
    opts = {}
    for lib in (torch, jitgrad):
        w, b = _params(lib, "float64")
        opt = getattr(lib.optim, name)([w, b], **kwargs)
        _steps(lib, opt, w, b, 4)
        opts[lib] = (opt, w, b)
    # (a state_dict holds the live tensors: torch's is copied before torch
    # steps on)
    tsd, jsd = copy.deepcopy(opts[torch][0].state_dict()), opts[jitgrad][0].state_dict()
    assert jsd["param_groups"] == tsd["param_groups"]
    ts, js = _state_np(tsd), _state_np(jsd)
    assert ts.keys() == js.keys()
    for k in ts:
        assert list(ts[k]) == list(js[k])
        for n in ts[k]:
            assert type(ts[k][n]) is type(js[k][n]), n
            np.testing.assert_allclose(js[k][n], ts[k][n], rtol=1e-10, atol=1e-12)
    # continue from a loaded state dict, on copies of the parameters:
    # torch's from its own, jitgrad's from its own and from torch's (a
    # load casts float32 scalars in the state, NAdam's mu_product, ASGD's
    # eta and mu, to the parameters' dtype)
    _, tw, tb = opts[torch]
    tw = tw.detach().clone().requires_grad_(True)
    tb = tb.detach().clone().requires_grad_(True)
    topt = getattr(torch.optim, name)([tw, tb], **kwargs)
    topt.load_state_dict(copy.deepcopy(tsd))
    want = _steps(torch, topt, tw, tb, 4)
    jopt, jw, jb = opts[jitgrad]
    for sd in (jsd, tsd):
        w = jitgrad.tensor(_np(jw), dtype=jitgrad.float64, requires_grad=True)
        b = jitgrad.tensor(_np(jb), dtype=jitgrad.float64, requires_grad=True)
        opt = getattr(jo, name)([w, b], **kwargs)
        opt.load_state_dict(sd)
        got = _steps(jitgrad, opt, w, b, 4)
        for (gw, gb), (ww, wb) in zip(got, want):
            np.testing.assert_allclose(gw, ww, **_tol("float64"))
            np.testing.assert_allclose(gb, wb, **_tol("float64"))
    # a jitgrad round trip continues bit for bit as the original (NAdam's
    # mu_product, ASGD's eta and mu are float32 and, as in PyTorch, loaded
    # in the parameters' dtype: close there)
    w = jitgrad.tensor(_np(jw), dtype=jitgrad.float64, requires_grad=True)
    b = jitgrad.tensor(_np(jb), dtype=jitgrad.float64, requires_grad=True)
    opt = getattr(jo, name)([w, b], **kwargs)
    opt.load_state_dict(jsd)
    a = _steps(jitgrad, opt, w, b, 3)
    c = _steps(jitgrad, jopt, jw, jb, 3)
    for (aw, ab), (cw, cb) in zip(a, c):
        if name in ("NAdam", "ASGD"):
            np.testing.assert_allclose(aw, cw, **_tol("float64"))
            np.testing.assert_allclose(ab, cb, **_tol("float64"))
        else:
            assert aw.tolist() == cw.tolist() and ab.tolist() == cb.tolist()


GROUP_OPTS = {
    "NAdam": dict(lr=0.01, betas=(0.5, 0.9), momentum_decay=0.02),
    "RAdam": dict(lr=0.02, weight_decay=0.2),
    "Adamax": dict(lr=0.01, eps=1e-4, maximize=True),
    "Rprop": dict(lr=0.05, etas=(0.4, 1.1)),
    "ASGD": dict(lr=0.02, lambd=0.1, t0=2),
}


@pytest.mark.parametrize("name", sorted(GROUP_OPTS))
def test_parameter_groups(name):
    runs, groups = [], []
    for lib in (torch, jitgrad):
        w, b = _params(lib, "float64")
        opt = getattr(lib.optim, name)([{"params": [w]}, {"params": b, **GROUP_OPTS[name]}])
        runs.append(_steps(lib, opt, w, b, 12))
        groups.append([{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups])
    assert groups[0] == groups[1]
    for (tw, tb), (jw, jb) in zip(*runs):
        np.testing.assert_allclose(jw, tw, **_tol("float64"))
        np.testing.assert_allclose(jb, tb, **_tol("float64"))


BAD = [
    ("NAdam", dict(lr=-1.0)),
    ("NAdam", dict(eps=-1e-3)),
    ("NAdam", dict(betas=(1.0, 0.9))),
    ("NAdam", dict(betas=(0.9, -0.1))),
    ("NAdam", dict(weight_decay=-0.5)),
    ("NAdam", dict(momentum_decay=-0.1)),
    ("RAdam", dict(lr=-0.5)),
    ("RAdam", dict(betas=(0.9, 1.0))),
    ("RAdam", dict(weight_decay=-1)),
    ("Adamax", dict(eps=-1.0)),
    ("Adamax", dict(betas=(-0.1, 0.9))),
    ("Rprop", dict(lr=-0.1)),
    ("Rprop", dict(etas=(1.2, 0.5))),
    ("Rprop", dict(etas=(0.0, 1.2))),
    ("ASGD", dict(lr=-0.01)),
    ("ASGD", dict(weight_decay=-0.01)),
    ("LBFGS", dict(unknown=1)),
    ("NAdam", dict(maximize=True)),  # not an argument of PyTorch 1.13's NAdam
]


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the oracle's exception, whatever it is
        return type(e), str(e)
    return None


@pytest.mark.parametrize("name,kwargs", BAD, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BAD)])
def test_bad_arguments_as_torch(name, kwargs):
    want = _error(lambda: getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)],
                                                     **kwargs))
    assert want is not None
    got = _error(lambda: getattr(jo, name)([jitgrad.zeros(2, requires_grad=True)], **kwargs))
    assert got is not None and got[0] is want[0]
    # the message names the class: torch's qualified __init__ vs jitgrad's
    assert got[1].replace("NAdam.__init__", "__init__").replace("LBFGS.__init__", "__init__") == \
        want[1].replace("NAdam.__init__", "__init__").replace("LBFGS.__init__", "__init__")


def test_lbfgs_refuses_groups_and_other_line_searches():
    w, b = _params(jitgrad, "float64")
    with pytest.raises(ValueError, match=r"LBFGS doesn't support per-parameter options "
                                         r"\(parameter groups\)"):
        jo.LBFGS([{"params": [w]}, {"params": [b]}])
    opt = jo.LBFGS([w, b], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = _loss(jitgrad, w, b)
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


def _quadratic(lib, w, b):
    """A convex quadratic: the line search and the curvature pairs see
    values that do not depend on the order of a long reduction."""
    a = lib.tensor([[3.0, 0.5], [0.5, 1.0], [0.2, -0.4]], dtype=w.dtype)
    r = a @ b - w[0]
    return (r * r).sum() + (w * w).sum() * 0.1 + (w[1] - 1.0).pow(2).sum()


LBFGS_CASES = [
    ("mlp", dict(lr=0.5, max_iter=4)),
    ("mlp", dict(lr=1, max_iter=5, history_size=3, line_search_fn="strong_wolfe")),
    ("quadratic", dict()),
    ("quadratic", dict(line_search_fn="strong_wolfe")),
    ("quadratic", dict(max_iter=3, max_eval=4, tolerance_change=1e-5)),
]


@pytest.mark.parametrize("problem,kwargs", LBFGS_CASES,
                         ids=[f"{p}-{i}" for i, (p, _) in enumerate(LBFGS_CASES)])
def test_lbfgs_matches_torch(problem, kwargs):
    runs, states, losses = [], [], []
    for lib in (torch, jitgrad):
        w, b = _params(lib, "float64")
        opt = lib.optim.LBFGS([w, b], **kwargs)
        f = _loss if problem == "mlp" else _quadratic

        def closure():
            opt.zero_grad()
            loss = f(lib, w, b)
            loss.backward()
            return loss

        steps, ls = [], []
        for _ in range(4):
            ls.append(float(opt.step(closure)))
            steps.append((_np(w), _np(b)))
        runs.append(steps)
        losses.append(ls)
        s = opt.state[w]
        states.append((s["func_evals"], s["n_iter"], len(s["old_dirs"])))
    assert states[0] == states[1]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-9)
    for (tw, tb), (jw, jb) in zip(*runs):
        np.testing.assert_allclose(jw, tw, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(jb, tb, rtol=1e-8, atol=1e-10)


def test_lbfgs_state_dict_roundtrip():
    """LBFGS's history (lists of tensors) survives state_dict(): a loaded
    optimizer takes the same next step as the original."""
    w, b = _params(jitgrad, "float64")
    opt = jo.LBFGS([w, b], max_iter=3, line_search_fn="strong_wolfe")

    def closure_for(o, w, b):
        def closure():
            o.zero_grad()
            loss = _quadratic(jitgrad, w, b)
            loss.backward()
            return loss
        return closure

    opt.step(closure_for(opt, w, b))
    sd = opt.state_dict()
    assert set(sd["state"][0]) >= {"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps",
                                   "ro", "H_diag", "prev_flat_grad", "prev_loss"}
    w2 = jitgrad.tensor(_np(w), dtype=jitgrad.float64, requires_grad=True)
    b2 = jitgrad.tensor(_np(b), dtype=jitgrad.float64, requires_grad=True)
    opt2 = jo.LBFGS([w2, b2], max_iter=3, line_search_fn="strong_wolfe")
    opt2.load_state_dict(sd)
    opt.step(closure_for(opt, w, b))
    opt2.step(closure_for(opt2, w2, b2))
    assert w2.tolist() == w.tolist() and b2.tolist() == b.tolist()


def _backends():
    return ["interp"] + (["c"] if jitgrad.HAS_COMPILER else [])


COMPILED = [CASES[0], CASES[1], CASES[3], CASES[5], CASES[6], CASES[7], CASES[9]]


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name,kwargs", COMPILED, ids=_ids(COMPILED))
def test_compiled_training_step_equals_eager_bitwise(backend, name, kwargs):
    """forward + backward + step + zero_grad compiled as one function: the
    first call (which creates the state) runs eagerly, later ones compiled
    (in pieces around the count's item() reads, where PyTorch reads it);
    losses, parameters and state equal the eager loop's bit for bit."""

    def run(compiled):
        jitgrad.manual_seed(0)
        model = jitgrad.nn.Linear(4, 3)
        opt = getattr(jo, name)(model.parameters(), **kwargs)

        def step(x, y):
            loss = jitgrad.nn.functional.mse_loss(model(x).tanh(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        if compiled:
            step = jitgrad.compile(step, backend=backend)
        jitgrad.manual_seed(1)
        x, y = jitgrad.randn(8, 4), jitgrad.randn(8, 3)
        losses = [step(x, y).detach().numpy().tobytes() for _ in range(6)]
        params = [p.detach().numpy().tobytes() for p in model.parameters()]
        state = [{k: v.numpy().tobytes() for k, v in opt.state[p].items()}
                 for p in model.parameters()]
        return (losses, params, state), step

    eager, _ = run(False)
    compiled, step = run(True)
    assert compiled == eager
    # the later calls did run compiled graphs
    assert step._jitgrad_compiled.entries() >= 1


@pytest.mark.parametrize("backend", _backends())
def test_rprop_step_is_one_graph_after_the_first(backend):
    """Rprop reads nothing: under fullgraph the first step (state creation)
    fails naming it, later steps compile as one graph equal to eager."""

    def make():
        w, b = _params(jitgrad, "float32")
        opt = jo.Rprop([w, b], lr=0.05)

        def step():
            opt.zero_grad()
            loss = _loss(jitgrad, w, b)
            loss.backward()
            opt.step()
            return loss

        return w, b, opt, step

    w, b, opt, step = make()
    f = jitgrad.compile(step, backend=backend, fullgraph=True)
    with pytest.raises(RuntimeError, match=r"Rprop.step\(\) creates the optimizer's state"):
        f()
    assert len(opt.state) == 0 and w.tolist() == W0
    step()
    got = [f().tolist() for _ in range(4)]
    ew, eb, eopt, estep = make()
    estep()
    want = [estep().tolist() for _ in range(4)]
    assert got == want and w.tolist() == ew.tolist() and b.tolist() == eb.tolist()
    assert opt.state[w]["step"].tolist() == 5.0
    assert f._jitgrad_compiled.entries() == 1


@pytest.mark.parametrize("name", ["NAdam", "RAdam", "Adamax", "ASGD"])
def test_load_state_saved_with_numbers(name):
    """A state dict whose counts and scalars are numbers (PyTorch before
    1.12) loads as 1.13 loads it: float32 0-d tensors, at load time."""
    w, b = _params(torch, "float64")
    opt = getattr(torch.optim, name)([w, b])
    _steps(torch, opt, w, b, 3)
    sd = copy.deepcopy(opt.state_dict())
    for s in sd["state"].values():
        for k in ("step", "mu_product", "eta", "mu"):
            if k in s:
                s[k] = s[k].item()
    runs = []
    for lib in (torch, jitgrad):
        w2 = lib.tensor(_np(w), dtype=getattr(lib, "float64"), requires_grad=True)
        b2 = lib.tensor(_np(b), dtype=getattr(lib, "float64"), requires_grad=True)
        o = getattr(lib.optim, name)([w2, b2])
        o.load_state_dict(copy.deepcopy(sd))
        for k, v in o.state[w2].items():
            assert isinstance(v, lib.Tensor), k
            if v.dim() == 0:
                assert v.dtype == lib.float32, k
        runs.append(_steps(lib, o, w2, b2, 3))
    for (tw, tb), (jw, jb) in zip(*runs):
        np.testing.assert_allclose(jw, tw, **_tol("float64"))
        np.testing.assert_allclose(jb, tb, **_tol("float64"))


@pytest.mark.parametrize(
    "kwargs", [dict(max_iter=3), dict(max_iter=3, line_search_fn="strong_wolfe")]
)
def test_lbfgs_loads_torch_state_dict(kwargs):
    """torch.optim.LBFGS's state (its history lists, H_diag, t) loads into
    jitgrad's LBFGS, which then takes torch's next step."""
    def closure_for(lib, o, w, b):
        def closure():
            o.zero_grad()
            loss = _quadratic(lib, w, b)
            loss.backward()
            return loss
        return closure

    tw, tb = _params(torch, "float64")
    topt = torch.optim.LBFGS([tw, tb], **kwargs)
    topt.step(closure_for(torch, topt, tw, tb))
    sd = copy.deepcopy(topt.state_dict())
    w = jitgrad.tensor(_np(tw), dtype=jitgrad.float64, requires_grad=True)
    b = jitgrad.tensor(_np(tb), dtype=jitgrad.float64, requires_grad=True)
    opt = jo.LBFGS([w, b], **kwargs)
    opt.load_state_dict(sd)
    topt.step(closure_for(torch, topt, tw, tb))
    opt.step(closure_for(jitgrad, opt, w, b))
    np.testing.assert_allclose(_np(w), _np(tw), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_np(b), _np(tb), rtol=1e-9, atol=1e-11)
    assert opt.state[w]["n_iter"] == topt.state[tw]["n_iter"]
