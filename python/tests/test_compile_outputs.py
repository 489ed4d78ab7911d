"""What a compiled function returns has the structure eager returns: tensors
at any depth of tuples, lists, dicts, named tuples and return types, next to
any other Python value (Ellipsis included), in order."""
import collections

import pytest

import jitgrad as jg

NT = collections.namedtuple("NT", "a b")
BACKENDS = ["interp"] + (["c"] if jg.HAS_COMPILER else [])


def program(x):
    return (x * 2, ..., x + 1, "s", None, (x * 3, ...), [x.tanh(), {"k": x.exp(), "z": 1}],
            NT(x * 5, 7), collections.OrderedDict(q=x * 6), x.max(0))


def flat(o):
    if isinstance(o, dict):
        for k, v in o.items():
            yield from flat(k)
            yield from flat(v)
    elif isinstance(o, (tuple, list)):
        yield type(o).__name__
        for v in o:
            yield from flat(v)
    elif isinstance(o, jg.Tensor):
        yield ("tensor", tuple(o.shape), o.tolist())
    else:
        yield repr(o)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ellipsis_and_nested_outputs_keep_structure_and_order(backend):
    x = jg.tensor([0.5, -1.0], requires_grad=True)
    want = program(x)
    c = jg.compile(program, backend=backend)
    for _ in range(2):  # the trace, then the compiled call
        got = c(x)
        assert list(flat(got)) == list(flat(want))
        assert type(got[7]) is NT and type(got[8]) is collections.OrderedDict
        assert type(got[9]) is type(want[9])
        assert isinstance(got[6], list)
    # every nested tensor is a real result with the program's gradient
    got[6][1]["k"].sum().backward()
    g_c = x.grad.tolist()
    x.grad = None
    want[6][1]["k"].sum().backward()
    assert g_c == x.grad.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_result_stays_a_list(backend):
    x = jg.ones(2)
    assert isinstance(jg.compile(lambda t: [t * 2], backend=backend)(x), list)
    assert isinstance(jg.compile(lambda t: t * 2, backend=backend)(x), jg.Tensor)
