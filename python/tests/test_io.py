"""jitgrad.save / jitgrad.load in PyTorch 1.13's checkpoint format (both
directions against python3-torch), pickle and copy.deepcopy of tensors."""
import collections
import copy
import io
import pickle
import zipfile

import pytest

import jitgrad

torch = pytest.importorskip("torch")

DTYPES = [("float32", 1.5), ("float64", 2.25), ("int64", 7), ("int32", -3), ("bool", True)]


def _j2t(obj):
    buf = io.BytesIO()
    jitgrad.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


def _t2j(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return jitgrad.load(buf, **kw)


def _same_storage_torch(a, b):
    return a.storage().data_ptr() == b.storage().data_ptr()


# ---------------------------------------------------------------- jitgrad -> torch


@pytest.mark.parametrize("name,v", DTYPES)
def test_save_dtypes_load_in_torch(name, v):
    x = jitgrad.full((2, 3), v, dtype=getattr(jitgrad, name))
    t = _j2t(x)
    assert t.dtype == getattr(torch, name)
    assert t.tolist() == x.tolist()


def test_save_state_dict_nested_containers_load_in_torch():
    w = jitgrad.randn(3, 2, dtype=jitgrad.float64)
    sd = collections.OrderedDict(weight=w, bias=jitgrad.zeros(3), steps=jitgrad.tensor(4))
    obj = {"model": sd, "epoch": 3, "lrs": [0.1, 0.01], "tup": (w, "s"), "dt": jitgrad.float64}
    got = _j2t(obj)
    assert type(got["model"]) is collections.OrderedDict
    assert list(got["model"]) == ["weight", "bias", "steps"]
    assert got["model"]["weight"].tolist() == w.tolist()
    assert got["model"]["weight"].dtype == torch.float64
    assert got["epoch"] == 3 and got["lrs"] == [0.1, 0.01]
    assert got["tup"][0] is got["model"]["weight"]  # one object, as pickled
    assert got["dt"] is torch.float64


def test_save_loads_in_torch_weights_only_and_devices():
    sd = collections.OrderedDict(w=jitgrad.ones(2, 3), b=jitgrad.zeros(4)[1:], n=3,
                                 dt=jitgrad.float64)
    buf = io.BytesIO()
    jitgrad.save(sd, buf)
    buf.seek(0)
    got = torch.load(buf, weights_only=True)  # only PyTorch's own names in the pickle
    assert got["w"].tolist() == [[1.0] * 3] * 2 and got["b"].shape == (3,)
    assert got["dt"] is torch.float64
    assert _j2t({"d": jitgrad.device("cpu")})["d"] == torch.device("cpu")
    assert _t2j({"d": torch.device("cpu")})["d"] == jitgrad.device("cpu")


def test_save_views_share_storage_in_torch():
    base = jitgrad.arange(12.0).reshape(3, 4)
    col = base[:, 1]
    tail = base[2]
    got = _j2t([base, col, tail, base.t()])
    b, c, t, bt = got
    assert c.tolist() == [1.0, 5.0, 9.0] and c.stride() == (4,) and c.storage_offset() == 1
    assert t.storage_offset() == 8 and bt.stride() == (1, 4)
    assert _same_storage_torch(b, c) and _same_storage_torch(b, t)
    b[0, 1] = 100.0
    assert c[0].item() == 100.0  # still a view after loading


def test_save_requires_grad_and_path(tmp_path):
    x = jitgrad.ones(2, requires_grad=True)
    y = x * 2  # not a leaf: saved as a leaf requiring grad, as PyTorch does
    p = tmp_path / "ckpt.pt"
    jitgrad.save({"x": x, "y": y}, p)
    with zipfile.ZipFile(p) as z:
        names = z.namelist()
        assert "ckpt/data.pkl" in names and "ckpt/version" in names
        for info in z.infolist():  # records aligned as PyTorch's writer aligns them
            off = info.header_offset + 30 + len(info.filename) + len(info.extra)
            assert off % 64 == 0
    got = torch.load(p)
    assert got["x"].requires_grad and got["x"].is_leaf
    assert got["y"].requires_grad and got["y"].tolist() == [2.0, 2.0]
    again = jitgrad.load(str(p))
    assert again["y"].requires_grad and again["y"].is_leaf


def test_save_noncontiguous_and_empty_and_scalar():
    x = jitgrad.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1)
    e = jitgrad.zeros(0, 3)
    s = jitgrad.tensor(2.5)
    gx, ge, gs = _j2t([x, e, s])
    assert gx.tolist() == x.tolist() and gx.stride() == tuple(x.stride())
    assert ge.shape == (0, 3) and gs.item() == 2.5 and gs.dim() == 0


def test_save_from_numpy_tensor():
    np = pytest.importorskip("numpy")
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    x = jitgrad.from_numpy(a)[:, 1:]
    assert _j2t(x).tolist() == [[1.0, 2.0], [4.0, 5.0]]


# ---------------------------------------------------------------- torch -> jitgrad


@pytest.mark.parametrize("name,v", DTYPES)
def test_load_torch_dtypes(name, v):
    t = torch.full((3,), v, dtype=getattr(torch, name))
    x = _t2j(t)
    assert x.dtype == getattr(jitgrad, name)
    assert x.tolist() == t.tolist()


def test_load_torch_module_state_dict():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    sd = _t2j(m.state_dict())
    assert type(sd) is collections.OrderedDict
    assert list(sd) == list(m.state_dict())
    for k, v in m.state_dict().items():
        assert sd[k].tolist() == v.tolist()
        assert not sd[k].requires_grad


def test_load_torch_parameter_requires_grad():
    p = torch.nn.Parameter(torch.arange(3.0))
    got = _t2j({"p": p, "frozen": torch.nn.Parameter(torch.ones(2), requires_grad=False)})
    assert got["p"].requires_grad and got["p"].is_leaf
    assert got["p"].tolist() == [0.0, 1.0, 2.0]
    assert not got["frozen"].requires_grad
    (got["p"] * got["p"]).sum().backward()
    assert got["p"].grad.tolist() == [0.0, 2.0, 4.0]


def test_load_torch_views_share_storage():
    y = torch.arange(10.0)
    got = _t2j({"y": y, "v": y[2:8:2], "m": y.view(2, 5).t()})
    assert got["v"].tolist() == [2.0, 4.0, 6.0]
    assert got["v"].stride() == (2,) and got["v"].storage_offset() == 2
    assert got["m"].tolist() == y.view(2, 5).t().tolist()
    assert got["y"]._same_storage(got["v"]) and got["y"]._same_storage(got["m"])
    got["y"][4] = -1.0
    assert got["v"][1].item() == -1.0


def test_load_torch_size_dtype_and_plain_values():
    y = torch.zeros(2, 3)
    got = _t2j({"size": y.shape, "dt": torch.int32, "f": 1.5, "s": "x", "n": None})
    assert got["size"] == (2, 3) and got["dt"] is jitgrad.int32
    assert got["f"] == 1.5 and got["s"] == "x" and got["n"] is None


def test_load_map_location():
    t = torch.ones(2)
    assert _t2j(t, map_location="cpu").tolist() == [1.0, 1.0]
    assert _t2j(t, map_location=jitgrad.device("cpu")).tolist() == [1.0, 1.0]
    assert _t2j(t, map_location={"cuda:0": "cpu"}).tolist() == [1.0, 1.0]
    assert _t2j(t, map_location=lambda s, loc: s).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="CUDA device"):
        _t2j(t, map_location="cuda:0")


def test_roundtrip_jitgrad_and_shared_storage():
    x = jitgrad.randn(4, 4)
    buf = io.BytesIO()
    jitgrad.save({"x": x, "d": x.diagonal() if hasattr(x, "diagonal") else x[1]}, buf)
    buf.seek(0)
    got = jitgrad.load(buf)
    assert got["x"].tolist() == x.tolist()
    assert got["x"]._same_storage(got["d"])
    assert not got["x"]._same_storage(x)  # a copy, not the saved tensor's memory
    got["x"].mul_(2)  # writable
    assert got["x"].tolist() == (x * 2).tolist()


# ---------------------------------------------------------------- bad input


def test_load_unsupported_dtype_names_it():
    with pytest.raises(RuntimeError, match=r"torch.HalfStorage \(dtype float16\).*not support"):
        _t2j(torch.ones(2, dtype=torch.float16))
    with pytest.raises(RuntimeError, match=r"uint8"):
        _t2j(torch.ones(2, dtype=torch.uint8))


def test_load_whole_torch_module_is_an_error():
    with pytest.raises(pickle.UnpicklingError, match="torch.nn.modules.linear.Linear"):
        _t2j(torch.nn.Linear(2, 2))


def test_load_legacy_format_and_garbage():
    buf = io.BytesIO()
    torch.save(torch.ones(2), buf, _use_new_zipfile_serialization=False)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="legacy"):
        jitgrad.load(buf)
    with pytest.raises(pickle.UnpicklingError, match="not a checkpoint"):
        jitgrad.load(io.BytesIO(b"abc"))
    with pytest.raises(TypeError, match="BytesIO"):
        jitgrad.load(b"PK\x03\x04")


def test_load_weights_only():
    class Thing:
        pass

    buf = io.BytesIO()
    jitgrad.save({"w": jitgrad.ones(2), "t": collections.Counter("ab")}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed.*Counter"):
        jitgrad.load(buf, weights_only=True)
    buf.seek(0)
    assert jitgrad.load(buf)["t"] == collections.Counter("ab")
    sd = _t2j(collections.OrderedDict(a=torch.ones(1)), weights_only=True)
    assert sd["a"].tolist() == [1.0]


def test_save_bad_options():
    with pytest.raises(RuntimeError, match="zip"):
        jitgrad.save(jitgrad.ones(1), io.BytesIO(), _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="protocol"):
        jitgrad.save(jitgrad.ones(1), io.BytesIO(), pickle_protocol=1)


def test_save_traced_tensor_is_an_error():
    @jitgrad.compile(backend="interp", fullgraph=True)
    def f(x):
        jitgrad.save(x, io.BytesIO())
        return x * 2

    with pytest.raises(Exception, match="traced"):
        f(jitgrad.ones(2))


# ---------------------------------------------------------------- pickle, deepcopy


@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_pickle_tensors_keep_values_dtype_views(protocol):
    base = jitgrad.arange(6.0, dtype=jitgrad.float64).reshape(2, 3)
    w = jitgrad.ones(2, requires_grad=True)
    i = jitgrad.tensor([1, 2], dtype=jitgrad.int32)
    b, v, w2, i2 = pickle.loads(pickle.dumps([base, base[:, 2], w, i], protocol=protocol))
    assert b.tolist() == base.tolist() and b.dtype == jitgrad.float64
    assert v.tolist() == [2.0, 5.0] and b._same_storage(v)
    assert w2.requires_grad and w2.is_leaf and i2.dtype == jitgrad.int32
    b[1, 2] = 9.0
    assert v[1].item() == 9.0 and base[1, 2].item() == 5.0


def test_pickle_dtype():
    assert pickle.loads(pickle.dumps(jitgrad.float64)) is jitgrad.float64


def test_deepcopy_copies_grad_and_sharing():
    x = jitgrad.arange(4.0, requires_grad=True)
    (x * x).sum().backward()
    d = jitgrad.arange(6.0).reshape(2, 3)
    c = copy.deepcopy({"x": x, "d": d, "row": d[1], "again": x})
    assert c["x"] is c["again"] and c["x"] is not x
    assert c["x"].requires_grad and c["x"].grad.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert not c["x"]._same_storage(x)
    assert c["d"]._same_storage(c["row"]) and not c["d"]._same_storage(d)
    c["d"][1, 0] = -1.0
    assert c["row"][0].item() == -1.0 and d[1, 0].item() == 3.0


def test_deepcopy_non_leaf_error_like_torch():
    x = jitgrad.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as je:
        copy.deepcopy(x * 2)
    tx = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as te:
        copy.deepcopy(tx * 2)
    assert str(je.value) == str(te.value)
    y = copy.copy(x)  # shallow: shares the memory, as PyTorch's copy.copy does
    assert y is not x and y._same_storage(x) and y.requires_grad


def test_pickle_non_leaf_loads_as_leaf():
    x = jitgrad.ones(2, requires_grad=True)
    y = pickle.loads(pickle.dumps(x * 3))
    assert y.is_leaf and y.requires_grad and y.tolist() == [3.0, 3.0]
