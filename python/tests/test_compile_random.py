"""Random draws inside a compiled program are graph ops (rng_uniform /
rng_normal of the generator's state, and the state written back after each
call): every call draws new numbers, the same ones eager mode draws, and
leaves the generator where eager mode leaves it, so dropout trains the same
compiled as eagerly (bitwise), with fullgraph=True."""
import pytest

import jitgrad as T

nn = T.nn


def backends():
    return ["interp"] + (["c"] if T.HAS_COMPILER else [])


def prog(x):
    return x * T.rand(3) + T.randn(2, 3).sum(0) + nn.functional.dropout(x, 0.5, True)


@pytest.mark.parametrize("backend", backends())
def test_compiled_draws_equal_eager_and_move_the_generator(backend):
    x = T.ones(3)
    T.manual_seed(5)
    want = [prog(x).tolist() for _ in range(4)]
    after = T.rand(2).tolist()
    T.manual_seed(5)
    f = T.compile(prog, backend=backend, fullgraph=True)
    got = [f(x).tolist() for _ in range(4)]
    assert got == want
    assert got[0] != got[1]  # new numbers at every call
    assert T.rand(2).tolist() == after


@pytest.mark.parametrize("backend", backends())
def test_graph_has_random_ops_not_constants(backend):
    f = T.compile(prog, backend=backend, fullgraph=True)
    f(T.ones(3))
    text = f._jitgrad_compiled.graph(0)
    for op in ("rng_uniform", "rng_normal", "rng_advance"):
        assert op in text, text


@pytest.mark.parametrize("backend", backends())
def test_dropout_training_compiled_equals_eager(backend):
    def build():
        T.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 2))

    def train(compiled):
        m = build()
        run = T.compile(m, backend=backend, fullgraph=True) if compiled else m
        opt = T.optim.SGD(m.parameters(), lr=0.1)
        T.manual_seed(42)
        x = T.randn(5, 4)
        rec = []
        for _ in range(4):
            y = run(x)
            y.square().sum().backward()
            rec.append((y.tolist(), [p.grad.tolist() for p in m.parameters()]))
            opt.step()
            opt.zero_grad()
        return rec, [p.tolist() for p in m.parameters()], T.rand(2).tolist()

    assert train(True) == train(False)


@pytest.mark.parametrize("backend", backends())
def test_explicit_generator_inside_program(backend):
    def run(compiled):
        g = T.Generator().manual_seed(7)

        def f(x):
            return x + T.rand(3, generator=g) + T.randn(3, generator=g)
        f = T.compile(f, backend=backend, fullgraph=True) if compiled else f
        T.manual_seed(1)
        out = [f(T.zeros(3)).tolist() for _ in range(3)]
        return out, T.rand(1).tolist(), T.rand(2, generator=g).tolist()

    assert run(True) == run(False)


def test_eval_mode_dropout_draws_nothing():
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    m.eval()
    f = T.compile(m, backend="interp", fullgraph=True)
    T.manual_seed(3)
    f(T.ones(1, 2))
    a = T.rand(1).tolist()
    T.manual_seed(3)
    assert T.rand(1).tolist() == a
