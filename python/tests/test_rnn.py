"""nn.RNN / LSTM / GRU and their cells against PyTorch 1.13: the same
weights (loaded from PyTorch's state_dict), outputs and every parameter,
input and initial-state gradient (f64 tight, f32 looser) over the
constructor options, batch_first and unbatched inputs, h0 given or not;
packed sequences (pack_padded_sequence, pad_packed_sequence, pack_sequence);
repr, init bounds, PyTorch's errors, dropout between layers, and compiled ==
eager bitwise."""
import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")

MODES = {"RNN_TANH": ("RNN", {"nonlinearity": "tanh"}),
         "RNN_RELU": ("RNN", {"nonlinearity": "relu"}),
         "LSTM": ("LSTM", {}), "GRU": ("GRU", {})}

IN, HID, L, N = 5, 4, 6, 3

# (num_layers, bias, batch_first, bidirectional, h0 given, batched)
CONFIGS = [
    (1, True, False, False, False, True),
    (1, True, False, False, True, True),
    (1, False, True, False, True, True),
    (2, True, False, True, True, True),  # bidirectional, 2 layers
    (2, True, True, True, False, True),
    (3, False, False, False, True, True),
    (1, True, False, False, True, False),  # unbatched
    (2, True, True, True, True, False),  # unbatched, batch_first, bidirectional
]


def _np(t):
    return np.array(t.detach().tolist())


def _tol(dtype):
    return dict(rtol=1e-10, atol=1e-10) if dtype == "f64" else dict(rtol=2e-5, atol=2e-5)


def _dtypes(dtype):
    return (jitgrad.float64, torch.float64) if dtype == "f64" else (jitgrad.float32,
                                                                    torch.float32)


def _pair(shape, dtype, seed):
    a = np.random.RandomState(seed).standard_normal(shape)
    jd, td = _dtypes(dtype)
    return (jitgrad.tensor(a.tolist(), dtype=jd, requires_grad=True),
            torch.tensor(a, dtype=td, requires_grad=True))


def _twins(mode, dtype, *args, **kwargs):
    """A torch module and a jitgrad one holding its weights (loaded from its
    state_dict: the keys must be equal)."""
    name, extra = MODES[mode]
    kwargs = dict(kwargs, **extra)
    jd, td = _dtypes(dtype)
    tm = getattr(torch.nn, name)(*args, **kwargs).to(td)
    jm = getattr(jitgrad.nn, name)(*args, **kwargs).to(jd)
    assert list(jm.state_dict()) == list(tm.state_dict())
    jm.load_state_dict({k: jitgrad.tensor(v.tolist(), dtype=jd)
                        for k, v in tm.state_dict().items()})
    return jm, tm


def _flat(out):
    """output, h_n or output, (h_n, c_n) -> a list of tensors."""
    o, h = out
    return [o] + (list(h) if isinstance(h, tuple) else [h])


def _check_values_and_grads(jm, tm, jins, tins, dtype, seed=10):
    jouts, touts = _flat(jm(*jins)), _flat(tm(*tins))
    assert len(jouts) == len(touts)
    jl, tl = 0, 0
    for i, (a, b) in enumerate(zip(jouts, touts)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), **_tol(dtype))
        g, tg = _pair(tuple(b.shape), dtype, seed + i)
        jl = jl + (a * g.detach()).sum()
        tl = tl + (b * tg.detach()).sum()
    jl.backward()
    tl.backward()
    for (name, p), (tname, tp) in zip(jm.named_parameters(), tm.named_parameters()):
        assert name == tname
        np.testing.assert_allclose(_np(p.grad), _np(tp.grad), err_msg=name, **_tol(dtype))
    leaves = []
    for a, b in zip(jins, tins):
        leaves += list(zip(a, b)) if isinstance(a, tuple) else [(a, b)]
    for a, b in leaves:
        np.testing.assert_allclose(_np(a.grad), _np(b.grad), **_tol(dtype))


@pytest.mark.parametrize("config", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_rnn_values_and_gradients_match_torch(mode, dtype, config):
    layers, bias, batch_first, bidir, with_h0, batched = config
    jm, tm = _twins(mode, dtype, IN, HID, layers, bias=bias, batch_first=batch_first,
                    bidirectional=bidir)
    shape = ((N, L, IN) if batch_first else (L, N, IN)) if batched else (L, IN)
    x, tx = _pair(shape, dtype, 1)
    jins, tins = [x], [tx]
    if with_h0:
        hshape = (layers * (2 if bidir else 1),) + ((N,) if batched else ()) + (HID,)
        h, th = _pair(hshape, dtype, 2)
        if mode == "LSTM":
            c, tc = _pair(hshape, dtype, 3)
            jins.append((h, c))
            tins.append((th, tc))
        else:
            jins.append(h)
            tins.append(th)
    _check_values_and_grads(jm, tm, jins, tins, dtype)


CELLS = {"RNN_TANH": ("RNNCell", {"nonlinearity": "tanh"}),
         "RNN_RELU": ("RNNCell", {"nonlinearity": "relu"}),
         "LSTM": ("LSTMCell", {}), "GRU": ("GRUCell", {})}


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_h", [True, False])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("mode", list(CELLS))
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_cells_match_torch(mode, dtype, batched, with_h, bias):
    name, extra = CELLS[mode]
    jd, td = _dtypes(dtype)
    tm = getattr(torch.nn, name)(IN, HID, bias=bias, **extra).to(td)
    jm = getattr(jitgrad.nn, name)(IN, HID, bias=bias, **extra).to(jd)
    assert list(jm.state_dict()) == list(tm.state_dict())
    jm.load_state_dict({k: jitgrad.tensor(v.tolist(), dtype=jd)
                        for k, v in tm.state_dict().items()})
    x, tx = _pair((N, IN) if batched else (IN,), dtype, 1)
    jins, tins = [x], [tx]
    if with_h:
        hs = (N, HID) if batched else (HID,)
        h, th = _pair(hs, dtype, 2)
        if mode == "LSTM":
            c, tc = _pair(hs, dtype, 3)
            jins.append((h, c))
            tins.append((th, tc))
        else:
            jins.append(h)
            tins.append(th)
    jo, to = jm(*jins), tm(*tins)
    jo = list(jo) if isinstance(jo, tuple) else [jo]
    to = list(to) if isinstance(to, tuple) else [to]
    jl, tl = 0, 0
    for i, (a, b) in enumerate(zip(jo, to)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), **_tol(dtype))
        g, tg = _pair(tuple(b.shape), dtype, 20 + i)
        jl = jl + (a * g.detach()).sum()
        tl = tl + (b * tg.detach()).sum()
    jl.backward()
    tl.backward()
    for (n, p), (_, tp) in zip(jm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(_np(p.grad), _np(tp.grad), err_msg=n, **_tol(dtype))
    np.testing.assert_allclose(_np(x.grad), _np(tx.grad), **_tol(dtype))


def test_lstm_cell_loop_equals_lstm_layer():
    """A cell unrolled by hand computes what the layer does with the same
    weights (the scripts that write their own loop over LSTMCell)."""
    jitgrad.manual_seed(0)
    layer = jitgrad.nn.LSTM(IN, HID)
    cell = jitgrad.nn.LSTMCell(IN, HID)
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = jitgrad.randn(L, N, IN)
    out, (h, c) = layer(x)
    hc = None
    steps = []
    for t in range(L):
        hc = cell(x[t], hc)
        steps.append(hc[0])
    np.testing.assert_allclose(_np(jitgrad.stack(steps)), _np(out), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(_np(hc[1]), _np(c[0]), rtol=1e-6, atol=1e-6)


def test_parameter_names_shapes_repr_and_init_like_torch():
    for name, kw in (("LSTM", dict(num_layers=2, bidirectional=True)),
                     ("GRU", dict(bias=False, batch_first=True)),
                     ("RNN", dict(nonlinearity="relu", num_layers=2, dropout=0.5)),
                     ("LSTM", {})):
        jm, tm = getattr(jitgrad.nn, name)(7, 6, **kw), getattr(torch.nn, name)(7, 6, **kw)
        assert repr(jm) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in jm.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
        assert [[tuple(p.shape) for p in ws] for ws in jm.all_weights] == \
            [[tuple(p.shape) for p in ws] for ws in tm.all_weights]
        bound = 1 / np.sqrt(6)
        for p in jm.parameters():
            assert np.abs(_np(p)).max() <= bound
            assert np.abs(_np(p)).max() > bound / 2  # drawn, not zeros
        jm.flatten_parameters()  # accepted, as PyTorch's off cuDNN
    for name, kw in (("RNNCell", dict(nonlinearity="relu", bias=False)), ("LSTMCell", {}),
                     ("GRUCell", dict(bias=False))):
        jm, tm = getattr(jitgrad.nn, name)(7, 6, **kw), getattr(torch.nn, name)(7, 6, **kw)
        assert repr(jm) == repr(tm)
        assert [(n, tuple(p.shape)) for n, p in jm.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    # the generator is jitgrad's: a seed gives the same weights again
    jitgrad.manual_seed(5)
    a = _np(jitgrad.nn.GRU(3, 4).weight_hh_l0)
    jitgrad.manual_seed(5)
    assert (a == _np(jitgrad.nn.GRU(3, 4).weight_hh_l0)).all()


def _errors(T):
    nn = T.nn
    lstm, gru = nn.LSTM(10, 3, 2), nn.GRU(10, 3)
    cells = [nn.LSTMCell(10, 3), nn.GRUCell(10, 3), nn.RNNCell(10, 3)]
    z = T.zeros
    return [
        lambda: lstm(T.randn(4, 2, 5)),
        lambda: lstm(T.randn(4, 2, 10), (z(2, 2, 3), z(2, 3, 3))),
        lambda: lstm(T.randn(4, 2, 10), (z(1, 2, 3), z(2, 2, 3))),
        lambda: lstm(T.randn(4, 10), (z(2, 2, 3), z(2, 2, 3))),
        lambda: lstm(T.randn(4, 2, 10), (z(2, 3), z(2, 3))),
        lambda: lstm(T.randn(10)),
        lambda: lstm(T.randn(1, 4, 2, 10)),
        lambda: lstm(T.randn(0, 2, 10)),
        lambda: gru(T.randn(4, 2, 10), z(2, 3)),
        lambda: gru(T.randn(4, 10), z(1, 2, 3)),
        lambda: gru(T.randn(4, 2, 10), z(1, 3, 3)),
        lambda: gru(T.randn(4, 2, 10, dtype=T.float64)),
        lambda: cells[0](T.randn(2, 5)),
        lambda: cells[1](T.randn(2, 5)),
        lambda: cells[2](T.randn(2, 10), T.randn(4, 3)),
        lambda: cells[2](T.randn(2, 10), T.randn(2, 4)),
        lambda: cells[0](T.randn(2, 10), (T.randn(2, 3), T.randn(2, 4))),
        lambda: cells[2](T.randn(10), T.randn(1, 3)),
        lambda: cells[1](T.randn(2, 10, dtype=T.float64)),
        lambda: nn.RNNCell(10, 3, nonlinearity="foo")(T.randn(10)),
        lambda: nn.GRU(10, 3, proj_size=2),
        lambda: nn.RNN(10, 3, proj_size=2),
        lambda: nn.RNN(10, 3, nonlinearity="sig"),
        lambda: nn.LSTM(10, 3, dropout=1.5),
        lambda: nn.LSTM(10, 3, dropout=True),
        lambda: nn.LSTM(10, 3, proj_size=3),
        lambda: nn.LSTM(10, 3, proj_size=-1),
    ]


@pytest.mark.parametrize("i", range(len(_errors(torch))))
def test_errors_like_torch(i):
    with pytest.raises(Exception) as te:
        _errors(torch)[i]()
    with pytest.raises(Exception) as je:
        _errors(jitgrad)[i]()
    assert type(je.value) is type(te.value)
    assert str(je.value) == str(te.value).split("\n")[0]


def test_cell_assertion_for_3d_input():
    with pytest.raises(AssertionError,
                       match="LSTMCell: Expected input to be 1-D or 2-D but received 3-D"):
        jitgrad.nn.LSTMCell(3, 4)(jitgrad.randn(2, 2, 3))


def test_proj_size_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="proj_size"):
        jitgrad.nn.LSTM(10, 4, proj_size=2)


LENGTHS = [[6, 4, 4, 1], [2, 6, 3, 6]]  # sorted; not (enforce_sorted=False)


@pytest.mark.parametrize("lengths", LENGTHS, ids=["sorted", "unsorted"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_h0", [False, True])
@pytest.mark.parametrize("mode", list(MODES))
def test_packed_sequences_match_torch(mode, with_h0, batch_first, lengths):
    """pack_padded_sequence -> a bidirectional 2-layer RNN -> pad_packed_sequence:
    values and every gradient as PyTorch's."""
    R, TR = jitgrad.nn.utils.rnn, torch.nn.utils.rnn
    dtype = "f64"
    jm, tm = _twins(mode, dtype, IN, HID, 2, bidirectional=True, batch_first=batch_first)
    B = len(lengths)
    x, tx = _pair((B, L, IN) if batch_first else (L, B, IN), dtype, 1)
    enforce = lengths == sorted(lengths, reverse=True)
    jp = R.pack_padded_sequence(x, lengths, batch_first, enforce)
    tp = TR.pack_padded_sequence(tx, torch.tensor(lengths), batch_first, enforce)
    assert jp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    np.testing.assert_array_equal(_np(jp.data), _np(tp.data))
    jins, tins = [jp], [tp]
    if with_h0:
        h, th = _pair((4, B, HID), dtype, 2)
        if mode == "LSTM":
            c, tc = _pair((4, B, HID), dtype, 3)
            jins.append((h, c))
            tins.append((th, tc))
        else:
            jins.append(h)
            tins.append(th)
    jout, thid = jm(*jins)
    tout, tthid = tm(*tins)
    assert isinstance(jout, R.PackedSequence)
    jpad, jlen = R.pad_packed_sequence(jout, batch_first, -1.0, total_length=L + 1)
    tpad, tlen = TR.pad_packed_sequence(tout, batch_first, -1.0, total_length=L + 1)
    assert jlen.tolist() == tlen.tolist() == lengths
    jflat, tflat = _flat((jpad, thid)), _flat((tpad, tthid))
    jl, tl = 0, 0
    for i, (a, b) in enumerate(zip(jflat, tflat)):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), _np(b), **_tol(dtype))
        g, tg = _pair(tuple(b.shape), dtype, 30 + i)
        jl = jl + (a * g.detach()).sum()
        tl = tl + (b * tg.detach()).sum()
    jl.backward()
    tl.backward()
    for (n, p), (_, tp_) in zip(jm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(_np(p.grad), _np(tp_.grad), err_msg=n, **_tol(dtype))
    np.testing.assert_allclose(_np(x.grad), _np(tx.grad), **_tol(dtype))
    for a, b in zip(jins[1:], tins[1:]):
        for u, v in (zip(a, b) if isinstance(a, tuple) else [(a, b)]):
            np.testing.assert_allclose(_np(u.grad), _np(v.grad), **_tol(dtype))


def test_pack_sequence_and_fields_like_torch():
    R, TR = jitgrad.nn.utils.rnn, torch.nn.utils.rnn
    seqs = [np.random.RandomState(i).standard_normal((n, 2)) for i, n in enumerate((1, 3, 2))]
    jp = R.pack_sequence([jitgrad.tensor(s.tolist()) for s in seqs], enforce_sorted=False)
    tp = TR.pack_sequence([torch.tensor(s, dtype=torch.float32) for s in seqs],
                          enforce_sorted=False)
    for f in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        assert getattr(jp, f).tolist() == getattr(tp, f).tolist()
    np.testing.assert_array_equal(_np(jp.data), _np(tp.data))
    data, batch_sizes, sorted_indices, unsorted_indices = jp  # a named tuple, as PyTorch's
    assert R.PackedSequence(data, batch_sizes).unsorted_indices is None
    assert R.PackedSequence(data, batch_sizes, sorted_indices).unsorted_indices.tolist() == \
        unsorted_indices.tolist()


def _packing_errors(T):
    R = T.nn.utils.rnn
    x = T.zeros(4, 3, 1)
    packed = R.pack_padded_sequence(x, [4, 2, 3], enforce_sorted=False)
    gru = T.nn.GRU(1, 2)
    return [
        lambda: R.pack_padded_sequence(x, [2, 4, 3]),
        lambda: R.pack_padded_sequence(x, [4, 2]),
        lambda: R.pack_padded_sequence(x, [4, 2, 0]),
        lambda: R.pad_packed_sequence(packed, total_length=2),
        lambda: R.pad_sequence([]),
        lambda: gru(R.PackedSequence(T.zeros(5, 1, 1), T.tensor([2, 2, 1]))),
        lambda: gru(packed, T.zeros(1, 2, 2)),
        lambda: gru(R.PackedSequence(T.zeros(5, 3), T.tensor([2, 2, 1]))),
    ]


@pytest.mark.parametrize("i", range(len(_packing_errors(torch))))
def test_packing_errors_like_torch(i):
    with pytest.raises(Exception) as te:
        _packing_errors(torch)[i]()
    with pytest.raises(Exception) as je:
        _packing_errors(jitgrad)[i]()
    assert type(je.value) is type(te.value)
    assert str(je.value) == str(te.value).split("\n")[0]


def test_pack_padded_sequence_refuses_lengths_past_the_padding():
    # (PyTorch 1.13 reads past the tensor here)
    with pytest.raises(RuntimeError, match="a length \\(5\\) exceeds the padded sequence length"):
        jitgrad.nn.utils.rnn.pack_padded_sequence(jitgrad.zeros(4, 3, 1), [5, 2, 1])


def test_bad_input_leaves_module_intact():
    m = jitgrad.nn.LSTM(4, 3)
    before = {k: _np(v) for k, v in m.state_dict().items()}
    with pytest.raises(RuntimeError):
        m(jitgrad.randn(2, 2, 5))
    out, _ = m(jitgrad.randn(2, 2, 4))  # a good call afterwards works
    out.sum().backward()
    for k, v in m.state_dict().items():
        assert (_np(v) == before[k]).all()


def test_dropout_between_layers_only_in_training():
    jm, tm = _twins("LSTM", "f64", IN, HID, 2, dropout=0.5)
    x, tx = _pair((L, N, IN), "f64", 4)
    jm.eval()
    tm.eval()
    np.testing.assert_allclose(_np(jm(x)[0]), _np(tm(tx)[0]), rtol=1e-10, atol=1e-10)
    jm.train()
    jitgrad.manual_seed(0)
    a = _np(jm(x)[0])
    jitgrad.manual_seed(0)
    b = _np(jm(x)[0])
    assert (a == b).all()  # from jitgrad's generator
    assert not np.allclose(a, _np(tm.eval()(tx)[0]))  # dropout applied
    # one layer: nothing to drop between layers (PyTorch warns), so training = eval
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last"):
        one, tone = _twins("GRU", "f64", IN, HID, 1, dropout=0.5)
    np.testing.assert_allclose(_np(one(x)[0]), _np(tone(tx)[0]), rtol=1e-10, atol=1e-10)


def test_pad_sequence_like_torch():
    seqs = [np.random.RandomState(i).standard_normal((n, 3)) for i, n in enumerate((4, 2, 3))]
    js = [jitgrad.tensor(s.tolist(), requires_grad=True) for s in seqs]
    ts = [torch.tensor(s, dtype=torch.float32, requires_grad=True) for s in seqs]
    for bf in (False, True):
        a = jitgrad.nn.utils.rnn.pad_sequence(js, batch_first=bf, padding_value=-1.0)
        b = torch.nn.utils.rnn.pad_sequence(ts, batch_first=bf, padding_value=-1.0)
        np.testing.assert_array_equal(_np(a), _np(b))
        (a * a).sum().backward()
        (b * b).sum().backward()
    for a, b in zip(js, ts):
        np.testing.assert_allclose(_np(a.grad), _np(b.grad))




# (backend, mode, dtype, layers, steps): the C backend compiles the whole
# unrolled graph with a C compiler, so its cases are smaller to stay quick
COMPILE_CASES = [("interp", m, d, 2, L) for m in ("LSTM", "GRU", "RNN_TANH")
                 for d in ("float32", "float64")] + \
    [("c", "LSTM", "float32", 1, 2), ("c", "GRU", "float64", 1, 2),
     ("c", "RNN_TANH", "float32", 2, 2)]


@pytest.mark.parametrize("backend,mode,dtype,layers,steps", COMPILE_CASES,
                         ids=["-".join(map(str, c)) for c in COMPILE_CASES])
def test_compiled_equals_eager_bitwise(backend, mode, dtype, layers, steps):
    dt = getattr(jitgrad, dtype)
    jitgrad.manual_seed(3)
    name, extra = MODES[mode]
    m = getattr(jitgrad.nn, name)(IN, HID, layers, bidirectional=True, batch_first=True,
                                  **extra).to(dt)
    x = jitgrad.randn(N, steps, IN, dtype=dt, requires_grad=True)
    h0 = jitgrad.randn(2 * layers, N, HID, dtype=dt, requires_grad=True)
    c0 = jitgrad.randn(2 * layers, N, HID, dtype=dt, requires_grad=True)

    def prog(x, h0, c0):
        out, h = m(x, (h0, c0) if mode == "LSTM" else h0)
        h, c = h if mode == "LSTM" else (h, c0)
        return (out * out).sum() + (h * c).sum()

    ins = [x, h0, c0]
    params = list(m.parameters())
    out = prog(*ins)
    out.backward()
    grads = [t.grad.clone() for t in ins + params]
    for t in ins + params:
        t.grad = None
    fn = jitgrad.compile(prog, backend=backend, fullgraph=True)
    cout = fn(*ins)
    cout.backward()
    assert _np(cout).tobytes() == _np(out).tobytes()
    for t, g in zip(ins + params, grads):
        assert _np(t.grad).tobytes() == _np(g).tobytes()
    assert fn._jitgrad_compiled.fallbacks() == 0


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_packed_equals_eager_bitwise(backend):
    """(a 3-step bidirectional GRU over sequences of lengths 2, 3, 1)"""
    R = jitgrad.nn.utils.rnn
    jitgrad.manual_seed(4)
    m = jitgrad.nn.GRU(IN, HID, 1, bidirectional=True)
    x = jitgrad.randn(3, 3, IN, requires_grad=True)

    def prog(x):
        out, h = m(R.pack_padded_sequence(x, [2, 3, 1], enforce_sorted=False))
        c = h
        padded, _ = R.pad_packed_sequence(out)
        return (padded * padded).sum() + (h * c).sum()

    ins = [x] + list(m.parameters())
    out = prog(x)
    out.backward()
    grads = [t.grad.clone() for t in ins]
    for t in ins:
        t.grad = None
    fn = jitgrad.compile(prog, backend=backend, fullgraph=True)
    cout = fn(x)
    cout.backward()
    assert _np(cout).tobytes() == _np(out).tobytes()
    for t, g in zip(ins, grads):
        assert _np(t.grad).tobytes() == _np(g).tobytes()
    assert fn._jitgrad_compiled.fallbacks() == 0
