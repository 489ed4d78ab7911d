"""The C state_dict API (jg_state_dict_save / jg_state_dict_load, through
examples/state_dict_io.c) and PyTorch's checkpoint format: torch.load and
jitgrad.load read what C writes, C reads what torch.save and jitgrad.save
write, tied entries share memory on both sides."""
import collections
import os
import subprocess

import numpy as np
import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("JITGRAD_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
PROG = os.path.join(BUILD, "examples", "state_dict_io")


@pytest.fixture(scope="module")
def prog():
    if not os.path.exists(PROG):
        pytest.skip("examples/state_dict_io is not built")
    return PROG


def c_write(prog, path):
    subprocess.run([prog, "write", path], check=True)


def c_read(prog, path):
    r = subprocess.run([prog, "read", path], check=True, capture_output=True, text=True)
    entries, shared = collections.OrderedDict(), set()
    for line in r.stdout.splitlines():
        parts = line.split(" ")
        if parts[0] == "shared":
            shared.add((parts[1], parts[2]))
            continue
        name, dtype = parts[0], parts[1]
        rest = line.split("]", 1)
        shape = [int(s) for s in rest[0].split("[", 1)[1].split(",") if s.strip()]
        vals = rest[1].split()
        rg = bool(vals) and vals[0] == "requires_grad"
        if rg:
            vals = vals[1:]
        entries[name] = (dtype, shape, rg, [float(v) for v in vals])
    return entries, shared


WANT = {
    "wte.weight": ("float32", [2, 3], [1.5, -2.0, 3.25, 0.1, 1e-30, -0.0]),
    "f64": ("float64", [3], [0.1, -0.2, 1e300]),
    "i64": ("int64", [5], [-3, 0, 1, 10**12, 7]),
    "i64_view": ("int64", [3], [0, 1, 10**12]),
    "bool": ("bool", [3], [True, False, True]),
    "i32": ("int32", [2], [-7, 100000]),
    "wt": ("float32", [3, 2], [1.5, 0.1, -2.0, 1e-30, 3.25, -0.0]),
    "lm_head.weight": ("float32", [2, 3], [1.5, -2.0, 3.25, 0.1, 1e-30, -0.0]),
    "param": ("float32", [2], [0.5, 0.5]),
}


def test_torch_loads_c_state_dict(prog, tmp_path):
    torch = pytest.importorskip("torch")
    path = str(tmp_path / "c.pt")
    c_write(prog, path)
    sd = torch.load(path)
    assert list(sd) == list(WANT)
    for name, (dtype, shape, vals) in WANT.items():
        t = sd[name]
        assert str(t.dtype) == "torch." + dtype, name
        assert list(t.shape) == shape, name
        want = np.array(vals, dtype=np.dtype(dtype if dtype != "bool" else "bool")).reshape(shape)
        assert np.array_equal(t.detach().numpy(), want), name
        assert t.requires_grad == (name == "param")
    assert sd["wte.weight"].data_ptr() == sd["lm_head.weight"].data_ptr()
    assert sd["wt"].stride() == (1, 3)
    assert sd["i64_view"].storage_offset() == 1
    sd["wte.weight"][0, 0] = 9  # one storage: the tied entries see the write
    assert sd["lm_head.weight"][0, 0].item() == 9 and sd["wt"][0, 0].item() == 9


def test_jitgrad_loads_c_state_dict(prog, tmp_path):
    path = str(tmp_path / "c.pt")
    c_write(prog, path)
    sd = jitgrad.load(path)
    assert list(sd) == list(WANT)
    for name, (dtype, shape, vals) in WANT.items():
        assert str(sd[name].dtype).endswith(dtype), name
        assert list(sd[name].shape) == shape
        np.testing.assert_array_equal(sd[name].detach().numpy(),
                                      np.array(vals).astype(sd[name].detach().numpy().dtype)
                                      .reshape(shape))


def _torch_dict(torch):
    w = torch.arange(6, dtype=torch.float32).view(2, 3) / 7
    sd = collections.OrderedDict()
    sd["wte.weight"] = w
    sd["lm_head.weight"] = w
    sd["h.0.bias"] = torch.tensor([0.25, -1e-8])
    sd["d"] = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64).t()
    sd["i"] = torch.arange(4)[1:]
    sd["b"] = torch.tensor([False, True])
    sd["i32"] = torch.tensor([3], dtype=torch.int32)
    sd["s"] = torch.tensor(2.5)
    return sd


@pytest.mark.parametrize("lib", ["torch", "jitgrad"])
def test_c_reads_saved_state_dict(prog, tmp_path, lib):
    torch = pytest.importorskip("torch") if lib == "torch" else jitgrad
    sd = _torch_dict(torch)
    path = str(tmp_path / f"{lib}.pt")
    torch.save(sd, path)
    got, shared = c_read(prog, path)
    assert list(got) == list(sd)
    for name, t in sd.items():
        dtype, shape, rg, vals = got[name]
        assert dtype == str(t.dtype).split(".")[-1], name
        assert shape == list(t.shape), name
        assert not rg
        want = t.detach().numpy().astype(np.float64).ravel()
        np.testing.assert_array_equal(np.array(vals), want)
    assert ("wte.weight", "lm_head.weight") in shared


def test_c_reads_model_state_dict(prog, tmp_path):
    """A real module's state_dict (with its _metadata) saved by torch.save."""
    torch = pytest.importorskip("torch")
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    path = str(tmp_path / "m.pt")
    torch.save(m.state_dict(), path)
    got, _ = c_read(prog, path)
    assert list(got) == list(m.state_dict())
    for name, t in m.state_dict().items():
        np.testing.assert_array_equal(np.array(got[name][3]),
                                      t.numpy().astype(np.float64).ravel())


def test_c_rejects_other_objects(prog, tmp_path):
    path = str(tmp_path / "list.pt")
    jitgrad.save([jitgrad.ones(2)], path)
    r = subprocess.run([prog, "read", path], capture_output=True, text=True)
    assert r.returncode == 1
    assert "holds a list, not a state_dict" in r.stderr
