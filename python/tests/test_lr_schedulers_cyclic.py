"""MultiplicativeLR, PolynomialLR, CyclicLR, SequentialLR and
ChainedScheduler against PyTorch 1.13: the lr (and momentum) after each
step, state_dict round trips and the errors."""
import pickle
import warnings

import pytest

import jitgrad
import jitgrad.optim as jo

torch = pytest.importorskip("torch")

STEPS = 40


def _opt(lib, kind="SGD", groups=2):
    w = lib.zeros(3, requires_grad=True)
    b = lib.zeros(2, requires_grad=True)
    optim = jo if lib is jitgrad else torch.optim
    pg = [{"params": [w]}, {"params": [b], "lr": 0.2}][:groups]
    if kind == "SGD":
        return optim.SGD(pg, lr=0.1, momentum=0.9)
    return getattr(optim, kind)(pg, lr=0.1)


def _mod(lib):
    return jo.lr_scheduler if lib is jitgrad else torch.optim.lr_scheduler


def _snap(opt):
    return ([g["lr"] for g in opt.param_groups],
            [g.get("momentum", g.get("betas")) for g in opt.param_groups])


def _trace(opt, s, steps, epochs=None):
    out = [_snap(opt)]
    for i in range(steps):
        opt.step()
        if epochs is None:
            s.step()
        else:
            s.step(epochs[i])
        out.append(_snap(opt))
    return out


def _run(make, kind="SGD", steps=STEPS, epochs=None, groups=2):
    runs = []
    for lib in (jitgrad, torch):
        opt = _opt(lib, kind, groups)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = make(_mod(lib), opt, lib)
            runs.append((_trace(opt, s, steps, epochs), s, opt))
    return runs


def _same(got, want):
    assert got == want  # bit for bit: the same formulas in the same order


MULT = lambda epoch: 0.95  # noqa: E731


class _Factor:
    """A callable object: its __dict__ goes into state_dict."""

    def __init__(self, f):
        self.f = f

    def __call__(self, epoch):
        return self.f ** (epoch % 3)


CASES = {
    "mult": lambda m, o, lib: m.MultiplicativeLR(o, lr_lambda=MULT),
    "mult_list": lambda m, o, lib: m.MultiplicativeLR(o, [MULT, lambda e: 1.0 - 0.01 * e]),
    "poly": lambda m, o, lib: m.PolynomialLR(o),
    "poly_power": lambda m, o, lib: m.PolynomialLR(o, total_iters=25, power=2.5),
    "cyclic_tri": lambda m, o, lib: m.CyclicLR(o, 0.01, 0.1, step_size_up=4),
    "cyclic_tri_down": lambda m, o, lib: m.CyclicLR(o, [0.01, 0.02], [0.1, 0.3],
                                                     step_size_up=3, step_size_down=7),
    "cyclic_tri2": lambda m, o, lib: m.CyclicLR(o, 0.001, 0.1, step_size_up=5,
                                                 mode="triangular2"),
    "cyclic_exp": lambda m, o, lib: m.CyclicLR(o, 0.001, 0.1, step_size_up=3, mode="exp_range",
                                               gamma=0.97, base_momentum=0.7,
                                               max_momentum=[0.95, 0.9]),
    "cyclic_fn": lambda m, o, lib: m.CyclicLR(o, 0.001, 0.1, step_size_up=3,
                                              scale_fn=lambda x: 0.5 ** x,
                                              scale_mode="iterations"),
    "cyclic_fn_cycle": lambda m, o, lib: m.CyclicLR(o, 0.001, 0.1, step_size_up=2,
                                                    step_size_down=5,
                                                    scale_fn=lambda x: 1.0 / x),
    "cyclic_nomom": lambda m, o, lib: m.CyclicLR(o, 0.01, 0.1, step_size_up=6,
                                                 cycle_momentum=False),
    "sequential": lambda m, o, lib: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.1, total_iters=2), m.ExponentialLR(o, gamma=0.9)],
        milestones=[2]),
    "sequential3": lambda m, o, lib: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.2, total_iters=5), m.StepLR(o, 4, gamma=0.5),
            m.CosineAnnealingLR(o, T_max=10)], milestones=[5, 17]),
    "chained": lambda m, o, lib: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.1, total_iters=2), m.ExponentialLR(o, gamma=0.9)]),
    "chained3": lambda m, o, lib: m.ChainedScheduler(
        [m.MultiStepLR(o, [3, 9], gamma=0.5), m.PolynomialLR(o, total_iters=30, power=0.5),
         m.MultiplicativeLR(o, _Factor(0.9))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sequence_matches_torch(name):
    (got, s, _), (want, ts, _) = _run(CASES[name])
    _same(got, want)
    _same(s.get_last_lr(), ts.get_last_lr())


@pytest.mark.parametrize("kind", ["Adam", "AdamW", "RMSprop"])
def test_multiplicative_polynomial_other_optimizers(kind):
    for make in (CASES["mult"], CASES["poly_power"]):
        (got, _, _), (want, _, _) = _run(make, kind=kind)
        _same(got, want)


def test_cyclic_momentum_requires_momentum():
    for kind in ("Adam", "AdamW"):
        msgs = []
        for lib in (jitgrad, torch):
            with pytest.raises(ValueError) as e:
                _mod(lib).CyclicLR(_opt(lib, kind), 0.01, 0.1)
            msgs.append(str(e.value))
        assert msgs[0] == msgs[1]
    (got, _, _), (want, _, _) = _run(
        lambda m, o, lib: m.CyclicLR(o, 0.01, 0.1, step_size_up=3, cycle_momentum=False),
        kind="Adam")
    _same(got, want)


def test_polynomial_closed_form():
    epochs = [3, 1, 7, 2, 9, 5, 0]
    (got, _, _), (want, _, _) = _run(CASES["poly_power"], steps=len(epochs), epochs=epochs)
    _same(got, want)


def _errors(make):
    msgs = []
    for lib in (jitgrad, torch):
        with pytest.raises(Exception) as e:
            make(_mod(lib), _opt(lib), lib)
        msgs.append((type(e.value), str(e.value)))
    assert msgs[0] == msgs[1]


def test_errors():
    _errors(lambda m, o, lib: m.MultiplicativeLR(o, [MULT]))
    _errors(lambda m, o, lib: m.CyclicLR(o, 0.01, 0.1, mode="nope"))
    _errors(lambda m, o, lib: m.CyclicLR(o, [0.01], 0.1))
    _errors(lambda m, o, lib: m.CyclicLR(o, 0.01, 0.1, max_momentum=[0.9, 0.9, 0.9]))
    _errors(lambda m, o, lib: m.CyclicLR(object(), 0.01, 0.1))
    _errors(lambda m, o, lib: m.SequentialLR(o, [m.ConstantLR(o), m.ExponentialLR(o, 0.9)],
                                             milestones=[2, 3]))
    _errors(lambda m, o, lib: m.SequentialLR(o, [m.ConstantLR(_opt(lib)),
                                                 m.ExponentialLR(o, 0.9)], milestones=[2]))
    _errors(lambda m, o, lib: m.ChainedScheduler([m.ConstantLR(o),
                                                  m.ExponentialLR(_opt(lib), 0.9)]))


@pytest.mark.parametrize("name", ["mult_list", "poly_power", "cyclic_exp", "cyclic_tri2",
                                  "sequential3", "chained3", "cyclic_fn"])
def test_state_dict_roundtrip(name):
    """Stop half way, save, build a fresh scheduler, load, continue: the
    same sequence as the uninterrupted run (and as PyTorch's)."""
    (full, _, _), (want, _, _) = _run(CASES[name])
    _same(full, want)
    opt = _opt(jitgrad)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = CASES[name](jo.lr_scheduler, opt, jitgrad)
        trace = _trace(opt, s, STEPS // 2)
        sd = s.state_dict()
        if name != "cyclic_fn":
            sd = pickle.loads(pickle.dumps(sd))
        opt_sd = opt.state_dict()
        opt2 = _opt(jitgrad)  # PyTorch's order: build, then load both states
        s2 = CASES[name](jo.lr_scheduler, opt2, jitgrad)
        opt2.load_state_dict(opt_sd)
        s2.load_state_dict(sd)
        trace2 = _trace(opt2, s2, STEPS - STEPS // 2)
    _same(trace + trace2[1:], full)
    assert "optimizer" not in sd


def test_state_dict_keys_match_torch():
    for name in ("mult", "poly", "sequential", "chained", "cyclic_tri"):
        (_, s, _), (_, ts, _) = _run(CASES[name], steps=3)
        keys, tkeys = set(s.state_dict()), set(ts.state_dict())
        if name == "cyclic_tri":  # PyTorch keeps a weak reference to its own method
            tkeys -= {"_scale_fn_ref"}
        assert keys == tkeys, (name, keys ^ tkeys)


def test_inf_constant():
    assert jo.lr_scheduler.inf == torch.optim.lr_scheduler.inf
