"""The differential fuzzer's own machinery (fuzz/, docs/fuzzing.md): the
generator is deterministic and valid, the oracles see planted differences,
crashes are caught per program, the minimizer shrinks and keeps the class."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fuzz"))

import fuzz  # noqa: E402
import gen  # noqa: E402
import runner  # noqa: E402


def test_generator_deterministic_and_compiles():
    for seed in range(40):
        src = gen.gen(seed)
        assert src == gen.gen(seed)
        compile(src, f"seed{seed}", "exec")
    assert gen.gen(1) != gen.gen(2)


def test_features_switch_off():
    for seed in range(40):
        src = gen.gen(seed, [f for f in gen.DEFAULT if f not in ("function", "inplace", "captured_update")])
        assert "autograd.Function" not in src
        for op in ("add_(", "mul_(", "sub_(", "div_(", "zero_(", "copy_(", "+=", "*="):
            assert op not in src


PLANTED = """
def fn(x0):
    v1 = x0 * 2.0
    v2 = v1.tanh()
    v3 = v2 + x0
    if T.__name__ == 'jitgrad':
        raise RuntimeError('planted difference')
    return v3

def call0(prev):
    return [L('a', (3,), True)]
CALLS = [(call0, 'backward')]
FULLGRAPH = False
"""


def test_oracle_sees_planted_difference(jg, torch):
    recs = {"eager": runner.run_mode(jg, PLANTED, "eager"),
            "torch": runner.run_mode(torch, PLANTED, "torch")}
    (oracle, d), = runner.compare(recs)
    assert oracle == "eager!=torch" and "planted difference" in d
    ok = PLANTED.replace("raise RuntimeError('planted difference')", "pass")
    recs = {"eager": runner.run_mode(jg, ok, "eager"), "interp": runner.run_mode(jg, ok, "interp"),
            "torch": runner.run_mode(torch, ok, "torch")}
    assert runner.compare(recs) == []
    bad = dict(recs)
    bad["interp"] = [dict(recs["interp"][0], grads=[[0.0, 0.0, 0.0]])]
    assert runner.compare(bad) == [("interp!=eager", "call0: grads[0] value")]


def test_crash_caught_with_mode(jg):
    src = PLANTED.replace("raise RuntimeError('planted difference')",
                          "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    got = {}
    fuzz.run_many([(7, src)], {"eager": jg}, 1, 30, lambda k, s, r: got.update({k: r}))
    assert got[7]["fails"] == [["crash", "SIGSEGV in mode eager"]]


def test_batch_attributes_crash_and_hang_and_reruns_the_rest(jg):
    # batches of programs share a process: a crash or a hang must be pinned
    # on its own program, and the programs after it in the batch still run
    ok = gen.gen(3)
    crash = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    hang = "while True:\n    pass\n"
    items = [(0, ok), (1, ok), (2, crash), (3, ok), (4, hang), (5, ok), (6, ok)]
    got = {}
    fuzz.run_many(items, {"eager": jg}, 2, 2.0, lambda k, s, r: got.update({k: r["fails"]}),
                  batch=3)
    assert sorted(got) == list(range(7))
    assert got[2] == [["crash", "SIGSEGV in mode eager"]]
    assert got[4] == [["hang", "over 2.0s in mode eager"]]
    assert all(got[k] == [] for k in (0, 1, 3, 5, 6))


def test_minimizer_keeps_class(jg, torch):
    mods = {"eager": jg, "torch": torch}
    got = {}
    fuzz.run_many([(0, PLANTED)], mods, 1, 30, lambda k, s, r: got.update(r))
    (o, d), = got["fails"]
    k = fuzz.klass(o, d)
    small = fuzz.minimize(PLANTED, k, mods, 30, log=lambda *a: None, budget=60)
    assert len(small) < len(PLANTED) and "planted difference" in small
    assert "tanh" not in small
    assert "PROGRAM = r'''" in fuzz.standalone(small, "test")


@pytest.mark.parametrize("seed", [0, 1])
def test_runner_modes_agree_on_plain_programs(jg, seed):
    src = gen.gen(seed, ["elementwise", "reduce", "views", "function", "repeat"])
    eager = runner.run_mode(jg, src, "eager")
    assert runner.diff(runner.run_mode(jg, src, "interp"), eager, exact=True) is None
