"""In-place tensor methods (x.exp_(), x.relu_(), x.pow_(2), x.eq_(y), ...)
and nn's inplace=True flags, against PyTorch 1.13 (the oracle, where
installed): values, gradients, version counters and error messages; and
compiled (interp, c) against eager, bitwise."""
import math

import pytest

UNARY = ["abs", "cos", "erf", "exp", "log", "neg", "relu", "sigmoid", "sin", "sqrt", "square",
         "tanh", "absolute", "negative"]

# (method, args builder, positive input?)
WITH_ARGS = [
    ("pow", lambda T: (2,), False),
    ("pow", lambda T: (0.5,), True),
    ("cumsum", lambda T: (1,), False),
    ("tril", lambda T: (), False),
    ("triu", lambda T: (1,), False),
    ("multiply", lambda T: (T.tensor([2.0, -1.0, 0.5], dtype=T.float64),), False),
    ("divide", lambda T: (T.tensor([2.0, -1.0, 0.5], dtype=T.float64),), False),
    ("subtract", lambda T: (T.tensor([2.0, -1.0, 0.5], dtype=T.float64),), False),
]

VALS = [[0.5, -1.25, 2.0], [-0.75, 1.5, 0.25]]
POS = [[0.5, 1.25, 2.0], [0.75, 1.5, 0.25]]


def flat(v):
    if isinstance(v, (list, tuple)):
        return [y for x in v for y in flat(x)]
    return [v]


def close(got, want, rel=1e-12, abs_tol=1e-15):
    g, w = flat(got), flat(want)
    return len(g) == len(w) and all(math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)
                                    for a, b in zip(g, w))


def backends(jg):
    return ["interp", "c"] if jg.HAS_COMPILER else ["interp"]


def program(name, args):
    """A leaf through a non-leaf written in place, then more arithmetic."""
    def prog(w):
        x = w * 1.5
        r = getattr(x, name + "_")(*args)
        assert r is x
        return (x * w).sum(), x
    return prog


def run(T, prog, vals):
    w = T.tensor(vals, dtype=T.float64, requires_grad=True)
    loss, x = prog(w)
    loss.backward()
    return x.detach().tolist(), w.grad.tolist()


@pytest.mark.parametrize("name", UNARY)
def test_unary_inplace_matches_torch_and_compiles(jg, torch, name):
    vals = POS if name in ("log", "sqrt") else VALS
    prog_t, prog_j = program(name, ()), program(name, ())
    want = run(torch, prog_t, vals)
    got = run(jg, prog_j, vals)
    assert close(got, want), (got, want)
    for b in backends(jg):
        assert run(jg, jg.compile(program(name, ()), backend=b), vals) == got


@pytest.mark.parametrize("name,make,pos", WITH_ARGS, ids=[f"{w[0]}{i}" for i, w in
                                                         enumerate(WITH_ARGS)])
def test_inplace_with_arguments_matches_torch(jg, torch, name, make, pos):
    vals = POS if pos else VALS
    if name in ("multiply", "divide", "subtract"):
        vals = [vals[0]]
    want = run(torch, program(name, make(torch)), vals)
    got = run(jg, program(name, make(jg)), vals)
    assert close(got, want), (got, want)
    for b in backends(jg):
        assert run(jg, jg.compile(program(name, make(jg)), backend=b), vals) == got


def test_inplace_bumps_version_once(jg, torch):
    for T in (torch, jg):
        x = T.tensor([1.0, 2.0])
        v = x._version
        x.exp_()
        assert x._version == v + 1


def test_inplace_on_a_view_writes_the_base_and_its_gradient(jg, torch):
    def prog(T):
        w = T.tensor(VALS, dtype=T.float64, requires_grad=True)
        b = w.clone()
        b[0].tanh_()
        c = w * 1
        c.t()[1].exp_()
        (b * b + c * c).sum().backward()
        return b.detach().tolist(), c.detach().tolist(), w.grad.tolist()

    want, got = prog(torch), prog(jg)
    assert close(got, want), (got, want)


def test_inplace_comparison_writes_self_dtype(jg, torch):
    for T in (torch, jg):
        x = T.tensor([1.0, 2.0, 3.0])
        x.gt_(T.tensor([0.5, 2.5, 3.0]))
        assert x.tolist() == [1.0, 0.0, 0.0] and x.dtype == T.float32
        y = T.tensor([1, 2, 3])
        y.eq_(2)
        assert y.tolist() == [0, 1, 0] and y.dtype == T.int64


def test_inplace_error_messages_match_torch(jg, torch):
    def errors(T):
        out = []
        leaf = T.tensor([1.0, 2.0], requires_grad=True)
        for f in (lambda: leaf.exp_(),                         # leaf that requires grad
                  lambda: T.tensor([1, 2]).exp_(),             # Float into Long
                  lambda: T.tensor([1.0, 2.0]).pow_(T.ones(3, 2)),  # shape grows
                  lambda: T.tensor([True]).neg_()):            # neg on bool
            with pytest.raises(RuntimeError) as e:
                f()
            out.append(str(e.value).splitlines()[0])
        return out

    want, got = errors(torch), errors(jg)
    for w, g in zip(want, got):
        assert g.startswith(w[:40]), (w, g)


def test_failed_inplace_leaves_self_intact(jg):
    x = jg.tensor([1, 2])
    with pytest.raises(RuntimeError):
        x.exp_()
    assert x.tolist() == [1, 2] and x._version == 0


def test_stale_saved_input_is_caught_like_torch(jg, torch):
    for T in (torch, jg):
        w = T.tensor([1.0, -2.0], requires_grad=True)
        x = w * 2
        y = x * x  # saves x
        x.relu_()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_inplace_op_whose_input_is_saved_still_backpropagates(jg, torch):
    """pow_ saves its input in PyTorch's own in-place kernel too, yet works:
    x's old value is what backward needs and nothing else reads it."""
    def prog(T):
        w = T.tensor([0.5, -1.5], dtype=T.float64, requires_grad=True)
        x = w + 0
        x.pow_(3).mul_(w)
        x.sum().backward()
        return x.tolist(), w.grad.tolist()

    assert close(prog(jg), prog(torch))


@pytest.mark.parametrize("act", ["ReLU", "SiLU"])
def test_nn_inplace_activation_trains_like_torch(jg, torch, act):
    def run_model(T):
        T.manual_seed(0)
        lin1 = T.nn.Linear(4, 8).double()
        lin2 = T.nn.Linear(8, 1).double()
        with T.no_grad():
            for p, v in zip(list(lin1.parameters()) + list(lin2.parameters()), WEIGHTS):
                p.copy_(T.tensor(v, dtype=T.float64))
        model = T.nn.Sequential(lin1, getattr(T.nn, act)(inplace=True), lin2)
        x = T.tensor([[0.5, -1.0, 2.0, 0.25], [1.5, 0.5, -0.5, -2.0]], dtype=T.float64)
        model(x).pow(2).sum().backward()
        return [p.grad.tolist() for p in model.parameters()]

    assert close(run_model(jg), run_model(torch))


def test_dropout_inplace_writes_input(jg):
    x = jg.ones(1000) * 1
    v = x._version
    y = jg.nn.functional.dropout(x, 0.5, True, inplace=True)
    assert y is x and x._version == v + 1
    kept = x[x != 0]
    assert 300 < kept.numel() < 700 and bool((kept == 2).all())


def _weights():
    import random
    rnd = random.Random(5)
    shapes = [(8, 4), (8,), (1, 8), (1,)]

    def make(s):
        if len(s) == 1:
            return [rnd.uniform(-1, 1) for _ in range(s[0])]
        return [make(s[1:]) for _ in range(s[0])]
    return [make(s) for s in shapes]


WEIGHTS = _weights()
