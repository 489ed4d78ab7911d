"""A compiled function that mutates a Python container or object it reaches
(an argument, the module's self, a global) has exactly eager's effects.

Regression: the arguments' lists and dicts were copied for every run of the
function (the trace and the eager fallback alike), so `acc.append(1)` or
`d['k'] = 5` never reached the caller's objects, and a graph traced once
skipped the mutation on every later call.  The function now gets the
caller's own containers; a mutation seen while tracing is undone and the
call site runs eagerly (a graph break; fullgraph=True refuses it)."""
import pytest

BACKENDS = ["interp", "c"]


class Box:
    pass


def run_both(jg, fn, make_state, calls, backend):
    """Runs fn eagerly and compiled on fresh states; returns both states and
    the results of each call."""
    eager_state, comp_state = make_state(), make_state()
    cf = jg.compile(fn, backend=backend)
    eager_out = [fn(*c(eager_state)) for c in calls]
    comp_out = [cf(*c(comp_state)) for c in calls]
    for e, c in zip(eager_out, comp_out):
        assert e.tolist() == c.tolist()
    return eager_state, comp_state, cf


def x3(jg):
    return jg.ones(3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_append_each_call(jg, backend):
    def f(x, acc):
        acc.append(1)
        return x * 2

    x = x3(jg)
    e, c, _ = run_both(jg, f, list, [lambda s: (x, s)] * 3, backend)
    assert e == c == [1, 1, 1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["extend", "pop", "setitem", "delitem", "sort"])
def test_list_mutations(jg, backend, op):
    def f(x, xs):
        if op == "extend":
            xs.extend([7, 8])
        elif op == "pop":
            xs.pop()
        elif op == "setitem":
            xs[0] = xs[0] + 1
        elif op == "delitem":
            del xs[0]
        else:
            xs.sort()
        return x + 1

    x = x3(jg)
    e, c, _ = run_both(jg, f, lambda: [3, 2, 1, 0], [lambda s: (x, s)] * 2, backend)
    assert e == c


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["setitem", "update", "pop"])
def test_dict_mutations(jg, backend, op):
    def f(x, d):
        if op == "setitem":
            d["k"] = d.get("k", 0) + 5
        elif op == "update":
            d.update(n=len(d))
        else:
            d.pop("a", None)
        return x + 1

    x = x3(jg)
    e, c, _ = run_both(jg, f, lambda: {"a": 1}, [lambda s: (x, s)] * 2, backend)
    assert e == c


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_add(jg, backend):
    def f(x, s, i):
        s.add(i)
        return x - 1

    x = x3(jg)
    e, c, _ = run_both(jg, f, set, [lambda s: (x, s, 1), lambda s: (x, s, 2)], backend)
    assert e == c == {1, 2}


@pytest.mark.parametrize("backend", BACKENDS)
def test_object_attribute_set(jg, backend):
    def f(x, box):
        box.calls = getattr(box, "calls", 0) + 1
        return x * 3

    x = x3(jg)
    e, c, _ = run_both(jg, f, Box, [lambda s: (x, s)] * 3, backend)
    assert e.calls == c.calls == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_containers(jg, backend):
    def f(x, state):
        state["log"][-1].append("call")
        state["n"][0] += 1
        return x * 2

    x = x3(jg)
    e, c, _ = run_both(jg, f, lambda: {"log": [[]], "n": [0]}, [lambda s: (x, s)] * 2, backend)
    assert e == c == {"log": [["call", "call"]], "n": [2]}


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_container_holding_tensors(jg, backend):
    """The list holds a tensor: traced with a stand-in for it, yet the
    mutation reaches the caller's list."""
    def f(state):
        y = state["xs"][0] * 2
        state["xs"].append(7)
        return y

    x = x3(jg)
    state = {"xs": [x]}
    cf = jg.compile(f, backend=backend)
    cf(state)
    cf(state)
    assert state["xs"][0] is x
    assert state["xs"][1:] == [7, 7]


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_appended_keeps_identity(jg, backend):
    def f(x, acc):
        acc.append(x)
        y = x * 2
        acc.append(y)
        return y

    x = x3(jg)
    acc = []
    cf = jg.compile(f, backend=backend)
    outs = [cf(x, acc) for _ in range(2)]
    assert len(acc) == 4
    assert acc[0] is x and acc[2] is x  # the caller's tensor, as eager appends it
    assert all(a.tolist() == [2.0] * 3 for a in acc[1::2])
    assert acc[3] is outs[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutation_on_some_calls(jg, backend):
    """A branch on a Python flag: the flag (and acc's contents) are part of
    the guards; only the calls that mutate run eagerly."""
    def f(x, acc, record):
        if record:
            acc.append(len(acc))
        return x + 2

    x = x3(jg)
    flags = [False, True, False, True, True, False]
    e, c, cf = run_both(jg, f, list, [lambda s, r=r: (x, s, r) for r in flags], backend)
    assert e == c == [0, 1, 2]
    assert cf._jitgrad_compiled.fallbacks() == flags.count(True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_mutation_stays_one_graph(jg, backend):
    """Reading containers is no mutation: the call stays compiled."""
    def f(x, cfg, xs):
        return x * cfg["scale"] + len(xs)

    cf = jg.compile(f, backend=backend, fullgraph=True)
    x = x3(jg)
    for _ in range(3):
        assert cf(x, {"scale": 2.0}, [1, 2]).tolist() == [4.0] * 3
    assert cf._jitgrad_compiled.fallbacks() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_forward_appends_to_self(jg, backend):
    class M(jg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = jg.nn.Linear(3, 2)
            self.seen = []

        def forward(self, x):
            self.seen.append(x.shape[0])
            return self.lin(x)

    jg.manual_seed(0)
    m = M()
    cm = jg.compile(m, backend=backend)
    x = jg.ones(4, 3)
    for _ in range(3):
        assert cm(x).tolist() == m.lin(x).tolist()
    assert m.seen == [4, 4, 4]


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_list_mutation(jg, backend):
    calls = []

    def f(x):
        calls.append(1)  # a closure variable's list
        return x * 2

    cf = jg.compile(f, backend=backend)
    x = x3(jg)
    cf(x)
    cf(x)
    assert calls == [1, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_fullgraph_refuses_naming_argument(jg, backend):
    def f(x, acc):
        acc.append(1)
        return x * 2

    cf = jg.compile(f, backend=backend, fullgraph=True)
    acc = [0]
    with pytest.raises(RuntimeError, match=r"mutated the list acc while traced"):
        cf(x3(jg), acc)
    assert acc == [0]  # state intact


def test_graph_break_is_reported(jg, capfd):
    def f(x, d):
        d["k"] = 5
        return x + 1

    d = {}
    jg.compile(f, backend="interp")(x3(jg), d)
    assert d == {"k": 5}
    err = capfd.readouterr().err
    assert "graph break" in err and "mutated the dict d while traced" in err


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutation_then_value_read(jg, backend):
    """The trace appends, then reads a value (a graph break: the call runs
    in pieces or eagerly, the function again): one append per call."""
    def f(x, acc):
        acc.append(len(acc))
        s = x.sum().item()
        return x * s

    x = x3(jg)
    e, c, _ = run_both(jg, f, list, [lambda s: (x, s)] * 3, backend)
    assert e == c == [0, 1, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_program_tensor_left_in_closure_dict(jg, backend):
    """A value the program computes, stored in a closure's dict: the caller
    finds eager's tensor there after each call, never a traced stand-in."""
    def make():
        held = {}

        def f(x, w):
            held["t"] = w.exp()
            return x * held["t"]
        return f, held

    x, w = x3(jg), jg.tensor([0.5, -1.0, 2.0])
    f, held = make()
    cf = jg.compile(f, backend=backend)
    for k in range(2):
        w2 = w + k
        out = cf(x, w2)
        assert held["t"].tolist() == w2.exp().tolist()
        assert out.tolist() == (x * w2.exp()).tolist()
    g, _ = make()
    with pytest.raises(RuntimeError, match=r"mutated the dict closure variable 'held'"):
        jg.compile(g, backend=backend, fullgraph=True)(x, w)
