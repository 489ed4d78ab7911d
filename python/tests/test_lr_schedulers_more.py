"""ExponentialLR, MultiStepLR, ConstantLR, LinearLR, OneCycleLR,
CosineAnnealingWarmRestarts and ReduceLROnPlateau against PyTorch 1.13: the lr
(and momentum / betas) sequences, state_dict round trips and the errors."""
import math
import pickle
import warnings

import pytest

import jitgrad
import jitgrad.optim as jo

torch = pytest.importorskip("torch")

STEPS = 30


def _opt(lib, kind="SGD", groups=2, **kw):
    w = lib.zeros(3, requires_grad=True)
    b = lib.zeros(2, requires_grad=True)
    optim = jo if lib is jitgrad else torch.optim
    pg = [{"params": [w]}, {"params": [b], "lr": 0.2}][:groups]
    if kind == "SGD":
        return getattr(optim, kind)(pg, lr=0.1, momentum=kw.get("momentum", 0.9))
    return getattr(optim, kind)(pg, lr=0.1)


def _sched_mod(lib):
    return jo.lr_scheduler if lib is jitgrad else torch.optim.lr_scheduler


def _trace(opt, s, steps, metrics=None):
    """[(lrs, momenta)] after construction and after each step."""
    def snap():
        return ([g["lr"] for g in opt.param_groups],
                [g.get("momentum", g.get("betas")) for g in opt.param_groups])

    out = [snap()]
    for i in range(steps):
        opt.step()
        if metrics is None:
            s.step()
        else:
            s.step(metrics[i])
        out.append(snap())
    return out


def _assert_close(got, want):
    assert len(got) == len(want)
    for (gl, gm), (wl, wm) in zip(got, want):
        assert gl == pytest.approx(wl, rel=1e-12, abs=1e-15)
        for a, b in zip(gm, wm):
            if isinstance(b, tuple):
                assert tuple(a) == pytest.approx(b, rel=1e-12)
            else:
                assert a == pytest.approx(b, rel=1e-12)


CASES = [
    ("ExponentialLR", "SGD", dict(gamma=0.9), STEPS),
    ("MultiStepLR", "SGD", dict(milestones=[3, 7, 7, 20], gamma=0.5), STEPS),
    ("ConstantLR", "SGD", dict(factor=0.25, total_iters=6), STEPS),
    ("ConstantLR", "Adam", dict(), STEPS),
    ("LinearLR", "SGD", dict(start_factor=0.1, end_factor=0.9, total_iters=12), STEPS),
    ("LinearLR", "AdamW", dict(), STEPS),
    ("CosineAnnealingWarmRestarts", "SGD", dict(T_0=5), STEPS),
    ("CosineAnnealingWarmRestarts", "SGD", dict(T_0=3, T_mult=2, eta_min=0.01), STEPS),
    ("OneCycleLR", "SGD", dict(max_lr=1.0, total_steps=STEPS), STEPS),
    ("OneCycleLR", "SGD", dict(max_lr=[1.0, 0.5], total_steps=STEPS, anneal_strategy="linear"),
     STEPS),
    ("OneCycleLR", "Adam", dict(max_lr=0.3, epochs=5, steps_per_epoch=6, three_phase=True),
     STEPS),
    ("OneCycleLR", "AdamW", dict(max_lr=0.3, total_steps=STEPS, pct_start=0.25,
                                 base_momentum=0.8, max_momentum=(0.9, 0.99),
                                 div_factor=10.0, final_div_factor=100.0), STEPS),
    ("OneCycleLR", "Adagrad", dict(max_lr=0.3, total_steps=STEPS, cycle_momentum=False),
     STEPS),
]


@pytest.mark.parametrize("name,kind,kwargs,steps", CASES)
def test_lr_sequence_matches_torch(name, kind, kwargs, steps):
    runs = []
    for lib in (jitgrad, torch):
        opt = _opt(lib, kind)
        s = getattr(_sched_mod(lib), name)(opt, **kwargs)
        runs.append((_trace(opt, s, steps), s))
    (got, s), (want, ts) = runs
    _assert_close(got, want)
    assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
    assert s.last_epoch == ts.last_epoch


@pytest.mark.parametrize("name,kind,kwargs,steps", CASES)
def test_state_dict_round_trip(name, kind, kwargs, steps):
    """A scheduler stopped halfway and rebuilt from its state_dict (pickled,
    as torch.save would) continues exactly as the uninterrupted one."""
    opt = _opt(jitgrad, kind)
    s = getattr(jo.lr_scheduler, name)(opt, **kwargs)
    _trace(opt, s, steps // 2)
    sd = pickle.loads(pickle.dumps(s.state_dict()))
    assert "optimizer" not in sd
    # PyTorch's resume order: build both, then load the optimizer (the
    # scheduler's first step wrote the groups) and the scheduler
    opt2 = _opt(jitgrad, kind)
    s2 = getattr(jo.lr_scheduler, name)(opt2, **kwargs)
    opt2.load_state_dict(opt.state_dict())
    s2.load_state_dict(sd)
    assert s2.last_epoch == s.last_epoch
    assert s2.get_last_lr() == s.get_last_lr()
    rest = steps - steps // 2
    assert _trace(opt2, s2, rest) == _trace(opt, s, rest)


def test_state_dict_keys_match_torch():
    for name, kind, kwargs, _ in CASES:
        if name == "OneCycleLR":
            continue  # torch 1.13 keeps anneal_func, a bound method; jitgrad its name
        sds = []
        for lib in (jitgrad, torch):
            opt = _opt(lib, kind)
            sds.append(getattr(_sched_mod(lib), name)(opt, **kwargs).state_dict())
        assert sds[0].keys() == sds[1].keys(), name
        assert sds[0] == sds[1], name


def test_closed_form_with_epoch_matches_torch():
    for name, kwargs in [("ExponentialLR", dict(gamma=0.8)),
                         ("MultiStepLR", dict(milestones=[2, 5, 5])),
                         ("ConstantLR", dict(factor=0.5, total_iters=3)),
                         ("LinearLR", dict(total_iters=4)),
                         ("CosineAnnealingWarmRestarts", dict(T_0=2, T_mult=3))]:
        out = []
        for lib in (jitgrad, torch):
            opt = _opt(lib)
            s = getattr(_sched_mod(lib), name)(opt, **kwargs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lrs = []
                for e in (1, 4, 2.5 if name == "CosineAnnealingWarmRestarts" else 2, 6, 9, 0):
                    s.step(e)
                    lrs.extend(s.get_last_lr())
            out.append(lrs)
        assert out[0] == pytest.approx(out[1], rel=1e-12), name


METRICS = [1.0, 0.9, 0.9, 0.95, 0.91, 0.9, 0.92, 0.93, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999,
           0.6, 0.7, 0.7, 0.7, 0.7, 0.7, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]


@pytest.mark.parametrize("kwargs", [
    dict(patience=2),
    dict(patience=1, factor=0.5, cooldown=2),
    dict(mode="max", patience=0, factor=0.5, min_lr=[0.01, 0.05]),
    dict(threshold_mode="abs", threshold=0.05, patience=1, factor=0.3, min_lr=0.004),
    dict(mode="max", threshold_mode="abs", threshold=0.0, patience=3, eps=0.05),
    dict(patience=0, factor=0.5, eps=0.03),
])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    runs = []
    for lib in (jitgrad, torch):
        opt = _opt(lib)
        s = _sched_mod(lib).ReduceLROnPlateau(opt, **kwargs)
        metrics = [lib.tensor(m) if i % 3 == 0 else m for i, m in enumerate(METRICS)]
        runs.append((_trace(opt, s, len(metrics), metrics), s))
    (got, s), (want, ts) = runs
    assert got == want  # max() / products of the same floats: exact
    sd, tsd = s.state_dict(), ts.state_dict()
    assert sd == tsd
    assert s.get_last_lr() == ts._last_lr


def test_reduce_lr_on_plateau_state_dict_round_trip():
    opt = _opt(jitgrad)
    s = jo.lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=1, cooldown=1)
    _trace(opt, s, 10, METRICS)
    opt2 = _opt(jitgrad)
    opt2.load_state_dict(opt.state_dict())
    s2 = jo.lr_scheduler.ReduceLROnPlateau(opt2)  # mode etc. come from the state
    s2.load_state_dict(pickle.loads(pickle.dumps(s.state_dict())))
    assert s2.mode_worse == -math.inf and s2.mode == "max"
    assert _trace(opt2, s2, 20, METRICS[10:]) == _trace(opt, s, 20, METRICS[10:])


def test_errors_match_torch():
    def both(fn):
        msgs = []
        for lib in (jitgrad, torch):
            with pytest.raises(Exception) as ei:
                fn(lib, _sched_mod(lib))
            msgs.append((type(ei.value), str(ei.value)))
        assert msgs[0] == msgs[1]

    both(lambda lib, m: m.ConstantLR(_opt(lib), factor=1.5))
    both(lambda lib, m: m.LinearLR(_opt(lib), start_factor=-0.1))
    both(lambda lib, m: m.LinearLR(_opt(lib), end_factor=2))
    both(lambda lib, m: m.CosineAnnealingWarmRestarts(_opt(lib), T_0=0))
    both(lambda lib, m: m.CosineAnnealingWarmRestarts(_opt(lib), T_0=2.0))
    both(lambda lib, m: m.CosineAnnealingWarmRestarts(_opt(lib), T_0=2, T_mult=0))
    both(lambda lib, m: m.CosineAnnealingWarmRestarts(_opt(lib), T_0=2).step(-1))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=1.0))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=1.0, total_steps=0))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=1.0, epochs=0, steps_per_epoch=3))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=1.0, epochs=2, steps_per_epoch=-1))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=1.0, total_steps=5, pct_start=1.5))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=1.0, total_steps=5, anneal_strategy="x"))
    both(lambda lib, m: m.OneCycleLR(_opt(lib), max_lr=[1.0], total_steps=5))
    both(lambda lib, m: m.OneCycleLR(_opt(lib, "Adagrad"), max_lr=1.0, total_steps=5))
    both(lambda lib, m: m.ReduceLROnPlateau(_opt(lib), factor=1.0))
    both(lambda lib, m: m.ReduceLROnPlateau(_opt(lib), mode="avg"))
    both(lambda lib, m: m.ReduceLROnPlateau(_opt(lib), threshold_mode="x"))
    both(lambda lib, m: m.ReduceLROnPlateau(_opt(lib), min_lr=[0.1]))
    both(lambda lib, m: m.ReduceLROnPlateau(3))
    both(lambda lib, m: m.ExponentialLR(3, gamma=0.5))


def test_one_cycle_too_many_steps():
    for lib in (jitgrad, torch):
        opt = _opt(lib)
        s = _sched_mod(lib).OneCycleLR(opt, max_lr=1.0, total_steps=3)
        for _ in range(3):
            opt.step()
            s.step()
        with pytest.raises(ValueError, match="Tried to step 5 times. The specified number of "
                                             "total steps is 3"):
            opt.step()
            s.step()
