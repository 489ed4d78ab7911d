"""Scalars a compiled program reaches through containers are part of its
key, as objects' scalar attributes are: a dict value (an optimizer's
group['lr'] set by a schedule), a list or tuple element.  Changing one
traces again instead of replaying the old value (regression: only objects'
attributes were keyed, so a new lr was silently ignored), and
JITGRAD_LOG=recompiles names it."""
import subprocess
import sys

import pytest

BACKENDS = ["interp", "c"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_value_change_retraces(jg, backend):
    d = {"lr": 0.5, "name": "a"}
    f = jg.compile(lambda x: x * d["lr"], backend=backend)
    assert f(jg.ones(2)).tolist() == [0.5, 0.5]
    d["lr"] = 0.25
    assert f(jg.ones(2)).tolist() == [0.25, 0.25]
    d["lr"] = 0.5  # back: the first entry again
    assert f(jg.ones(2)).tolist() == [0.5, 0.5]
    assert f._jitgrad_compiled.entries() == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_and_tuple_elements_retrace(jg, backend):
    lst, tup = [2.0, 1], (3.0,)

    def f(x):
        return x * lst[0] + tup[0] * lst[1]

    cf = jg.compile(f, backend=backend)
    assert cf(jg.ones(1)).tolist() == [5.0]
    lst[1] = 2
    assert cf(jg.ones(1)).tolist() == [8.0]
    lst[0] = 1.0
    assert cf(jg.ones(1)).tolist() == [7.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_group_lr_of_an_object(jg, backend):
    class Holder:
        def __init__(self):
            self.groups = [{"lr": 0.1}]

    h = Holder()
    w = jg.ones(3)
    f = jg.compile(lambda: w * h.groups[0]["lr"], backend=backend)
    assert f().tolist() == pytest.approx([0.1] * 3)
    h.groups[0]["lr"] = 0.01
    assert f().tolist() == pytest.approx([0.01] * 3)


def test_recompile_log_names_the_entry(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(
        "import jitgrad as torch\n"
        "model = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "def step(x):\n"
        "    model(x).sum().backward()\n"
        "    opt.step()\n"
        "    opt.zero_grad()\n"
        "f = torch.compile(step, backend='interp')\n"
        "f(torch.ones(1, 2))\n"
        "opt.param_groups[0]['lr'] = 0.05\n"
        "f(torch.ones(1, 2))\n")
    import os
    env = dict(os.environ, JITGRAD_LOG="recompiles")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "param_groups[0]['lr'] changed: 0.1 -> 0.05" in r.stderr, r.stderr


def test_program_appending_to_a_list_runs_its_side_effect_every_call(jg):
    """A program that appends a number to a list it reaches changes its own
    key: the next call traces again and so runs the Python code (the list
    grows at every call, as in eager), instead of replaying a graph that
    skips the append."""
    calls = []

    def f(x):
        calls.append(1)
        return x * 2

    cf = jg.compile(f, backend="interp")
    for i in range(4):
        assert cf(jg.ones(2)).tolist() == [2.0, 2.0]
        assert len(calls) == i + 1
