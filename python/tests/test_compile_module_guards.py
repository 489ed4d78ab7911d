"""What compile(model) guards, as docs/compiler.md ("Modules under
compile(model)") says: parameters are read at every call (an optimizer
step, load_state_dict between calls are seen without a new trace); a
parameter rebound, a changed dtype or requires_grad, a flipped training
flag and a changed int/float/bool attribute of the module trace again (and
a value seen before finds its entry again).  Every result is bitwise the
eager module's."""
import pytest

import jitgrad as jg
from jitgrad import nn

BACKENDS = ["interp", "c"]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.scale = 2.0  # float attribute read by forward
        self.power = 1  # int
        self.shift = False  # bool

    def forward(self, x):
        y = self.fc(x) * self.scale
        for _ in range(self.power):
            y = y.tanh()
        if self.shift:
            y = y + 1
        if self.training:
            y = y * 0.5
        return y


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist()


def setup_net(backend):
    jg.manual_seed(0)
    m = Net()
    om = jg.compile(m, backend=backend, fullgraph=True)
    x = jg.randn(2, 4)
    return m, om, x, om.forward._jitgrad_compiled


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_attributes_retrace(backend):
    m, om, x, c = setup_net(backend)
    assert same(om(x), m(x))
    n = 1
    for name, value in (("scale", 3.0), ("power", 2), ("shift", True)):
        old = getattr(m, name)
        setattr(m, name, value)
        assert same(om(x), m(x)), name
        n += 1
        assert c.entries() == n, name
        setattr(m, name, old)  # seen before: its entry again
        assert same(om(x), m(x)), name
        assert c.entries() == n, name
    assert c.fallbacks() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_flag_retraces(backend):
    m, om, x, c = setup_net(backend)
    assert same(om(x), m(x))
    om.eval()
    assert not m.training
    assert same(om(x), m(x))
    assert c.entries() == 2
    om.train()
    assert same(om(x), m(x))
    assert c.entries() == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_load_state_dict_between_calls_is_seen(backend):
    m, om, x, c = setup_net(backend)
    before = om(x)
    jg.manual_seed(5)
    other = Net()
    om.load_state_dict({"_orig_mod." + k: v for k, v in other.state_dict().items()})
    got = om(x)
    assert not same(got, before)
    assert same(got, other(x)) and same(got, m(x))
    assert c.entries() == 1  # values are read at every call: no new trace


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_identity_requires_grad_and_dtype_retrace(backend):
    m, om, x, c = setup_net(backend)
    om(x).sum().backward()
    assert m.fc.weight.grad is not None
    m.fc.weight = nn.Parameter(m.fc.weight.detach() * 2)  # another tensor
    assert same(om(x), m(x))
    assert c.entries() == 2
    m.zero_grad(set_to_none=True)
    m.fc.bias.requires_grad_(False)
    y = om(x)
    assert same(y, m(x))
    assert c.entries() == 3
    y.sum().backward()
    assert m.fc.bias.grad is None and m.fc.weight.grad is not None
    m.double()
    xd = x.double()
    assert same(om(xd), m(xd)) and om(xd).dtype == jg.float64
    assert c.entries() == 4
    assert c.fallbacks() == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_the_program_does_not_read_also_retraces(backend):
    # the key holds every scalar attribute of the objects reached (and their
    # names), not only those the program reads: stricter than PyTorch's
    m, om, x, c = setup_net(backend)
    om(x)
    m.unused = 1
    om(x)
    assert c.entries() == 2
    m.unused = 2
    assert same(om(x), m(x))
    assert c.entries() == 3


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("calls", jg.zeros(()))

    def forward(self, x):
        with jg.no_grad():
            self.calls.add_(1)
        return self.fc(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffer_written_in_place_after_each_call(backend):
    # a traced write of a buffer: applied to the same tensor after each
    # call, its version advanced once per write, as eager's add_
    jg.manual_seed(0)
    m = Counting()
    om = jg.compile(m, backend=backend, fullgraph=True)
    buf, x = m.calls, jg.randn(2, 3)
    for k in range(1, 4):
        v = buf._version
        assert same(om(x), m.fc(x))
        assert m.calls is buf and buf.item() == k and buf._version == v + 1
    assert om.forward._jitgrad_compiled.entries() == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_set_on_the_wrapper_is_not_the_modules(backend):
    m, om, x, c = setup_net(backend)
    want = m(x)
    om.scale = 3.0  # lands on the OptimizedModule: forward reads m.scale
    assert m.scale == 2.0 and om.scale == 3.0
    assert same(om(x), want)
