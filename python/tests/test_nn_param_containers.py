"""nn.ParameterList and nn.ParameterDict against PyTorch 1.13: registration
(parameters, named_parameters, state_dict keys, load_state_dict, to()),
plain tensors becoming Parameters, non-tensor entries, indexing, slicing,
the list and dict methods, repr, errors; a model using both trains with
SGD as PyTorch's does, and compiled (interp, c) equals eager bitwise."""
from collections import OrderedDict

import numpy as np
import pytest


def vals(t):
    return t.detach().reshape(-1).tolist()


def arr(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def both(jg, torch, a, dtype="float32"):
    return (jg.tensor(a.tolist(), dtype=getattr(jg, dtype)),
            torch.tensor(a.tolist(), dtype=getattr(torch, dtype)))


def build_list(t, tensors):
    P = t.nn.Parameter
    pl = t.nn.ParameterList([P(tensors[0]), tensors[1]])
    pl.append(tensors[2])
    pl.extend([P(tensors[3]), "a string", 7])
    pl += [tensors[4]]
    return pl


def test_parameter_list_registration_matches_torch(jg, torch):
    pairs = [both(jg, torch, arr(i, 2, i + 1), "float64" if i == 1 else "float32")
             for i in range(5)]
    jl, tl = (build_list(t, [p[k] for p in pairs]) for k, t in ((0, jg), (1, torch)))
    assert len(jl) == len(tl) == 7
    assert repr(jl) == repr(tl)
    assert [n for n, _ in jl.named_parameters()] == [n for n, _ in tl.named_parameters()]
    assert list(jl.state_dict().keys()) == list(tl.state_dict().keys())
    for (jn, jp), (tn, tp) in zip(jl.named_parameters(), tl.named_parameters()):
        assert isinstance(jp, jg.nn.Parameter) and jp.requires_grad
        assert vals(jp) == vals(tp) and str(jp.dtype)[8:] == str(tp.dtype)[6:]
    # a plain tensor put in becomes a Parameter sharing its storage
    assert isinstance(jl[1], jg.nn.Parameter) and isinstance(tl[1], torch.nn.Parameter)
    assert jl[4] == "a string" and jl[-1 - 1] == 7 and tl[5] == 7
    assert type(jl[1:4]).__name__ == "ParameterList" and len(jl[1:4]) == len(tl[1:4]) == 3
    assert jl[1:4][0] is jl[1] and jl[::-2][0] is jl[6]
    assert [type(v).__name__ for v in jl] == [type(v).__name__.replace("Parameter", "Parameter")
                                               for v in tl]
    assert "0" not in dir(jl) and "append" in dir(jl)
    # replacing entries
    jl[0], tl[0] = jg.zeros(3), torch.zeros(3)
    assert isinstance(jl[0], jg.nn.Parameter) and repr(jl) == repr(tl)
    for t, pl in ((jg, jl), (torch, tl)):
        with pytest.raises(IndexError, match="index 7 is out of range"):
            pl[7]
        with pytest.raises(IndexError, match="index -8 is out of range"):
            pl[-8] = t.zeros(1)
        with pytest.raises(TypeError, match="ParameterList.extend should be called with an "
                                            "iterable, but got Tensor"):
            pl.extend(t.zeros(2))
        with pytest.raises(TypeError, match="cannot assign 'int' as parameter '0'"):
            pl[0] = 5
        with pytest.raises(RuntimeError, match="ParameterList should not be called."):
            pl(1)
    assert repr(jg.nn.ParameterList()) == repr(torch.nn.ParameterList()) == "ParameterList()"


def test_parameter_list_insert_is_a_list_insert(jg):
    # (PyTorch 1.13's ParameterList has no insert; this one follows list.insert)
    ts = [jg.full((1,), float(i)) for i in range(4)]
    pl = jg.nn.ParameterList(ts[:2])
    ref = [0.0, 1.0]
    for index, k in ((1, 2), (0, 3), (-1, "x"), (10, 9.5)):
        value = jg.full((1,), float(k)) if isinstance(k, int) else k
        pl.insert(index, value)
        ref.insert(index, float(k) if isinstance(k, int) else k)
        got = [v.item() if isinstance(v, jg.Tensor) else v for v in pl]
        assert got == ref
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2", "4"]
    assert all(isinstance(pl[i], jg.nn.Parameter) for i in (0, 1, 2, 4))


def build_dict(t, tensors, order):
    P = t.nn.Parameter
    src = {"w": P(tensors[0]), "b": tensors[1], "name": "x"}
    pd = t.nn.ParameterDict(src if order == "dict" else OrderedDict(src))
    pd["z"] = tensors[2]
    pd.update([("a", tensors[3]), ("w", P(tensors[4]))])
    return pd


@pytest.mark.parametrize("order", ["dict", "ordered"])
def test_parameter_dict_registration_matches_torch(jg, torch, order):
    pairs = [both(jg, torch, arr(i, i + 1, 2), "float64" if i == 2 else "float32")
             for i in range(5)]
    jd, td = (build_dict(t, [p[k] for p in pairs], order) for k, t in ((0, jg), (1, torch)))
    assert list(jd.keys()) == list(td.keys())
    assert repr(jd) == repr(td)
    assert [n for n, _ in jd.named_parameters()] == [n for n, _ in td.named_parameters()]
    assert list(jd.state_dict().keys()) == list(td.state_dict().keys())
    for k in td.keys():
        if isinstance(td[k], torch.Tensor):
            assert isinstance(jd[k], jg.nn.Parameter) and vals(jd[k]) == vals(td[k])
        else:
            assert jd[k] == td[k]
    assert len(jd) == len(td) and ("w" in jd) and ("q" not in jd)
    assert list(reversed(jd)) == list(reversed(td))
    assert jd.get("q", 3) == 3 and jd.get("name") == "x"
    assert isinstance(jd.setdefault("s", jg.ones(2)), jg.nn.Parameter)
    td.setdefault("s", torch.ones(2))
    assert list(jd) == list(td)
    kj, vj = jd.popitem()
    kt, vt = td.popitem()
    assert kj == kt == "s" and vals(vj) == vals(vt)
    assert vals(jd.pop("a")) == vals(td.pop("a"))
    assert list(jd.keys()) == list(td.keys())
    cj, ct = jd.copy(), td.copy()
    assert list(cj.keys()) == list(ct.keys()) and cj["w"] is jd["w"]
    uj = jd | jg.nn.ParameterDict({"extra": jg.zeros(1)})
    ut = td | torch.nn.ParameterDict({"extra": torch.zeros(1)})
    assert list(uj.keys()) == list(ut.keys()) and "extra" not in jd
    jd |= {"extra": jg.zeros(1)}
    td |= {"extra": torch.zeros(1)}
    assert list(jd.keys()) == list(td.keys())
    assert list(jd.fromkeys(["p", "q"]).keys()) == list(td.fromkeys(["p", "q"]).keys())
    del jd["w"]
    del td["w"]
    assert [n for n, _ in jd.named_parameters()] == [n for n, _ in td.named_parameters()]
    for t, pd in ((jg, jd), (torch, td)):
        with pytest.raises(TypeError, match="Index given to ParameterDict cannot be used as a "
                                            "key as it is not a string \\(type is 'int'\\)"):
            pd[1]
        with pytest.raises(AttributeError, match="'ParameterDict' object has no attribute "
                                                 "'missing'"):
            pd.pop("missing")
        with pytest.raises(TypeError, match="ParametersDict.update should be called with an "
                                            "iterable of key/value pairs, but got int"):
            pd.update(3)
        with pytest.raises(ValueError, match="ParameterDict update sequence element #0 has "
                                             "length 3; 2 is required"):
            pd.update([("a", 1, 2)])
        with pytest.raises(RuntimeError, match="ParameterDict should not be called."):
            pd(1)
    jd.clear()
    td.clear()
    assert len(jd) == len(td) == 0 and list(jd.parameters()) == []
    assert repr(jd) == repr(td) == "ParameterDict()"


class Model:
    """The same model for both libraries: a ParameterList of layer weights,
    a ParameterDict of biases and scales."""

    @staticmethod
    def make(t, seed):
        class M(t.nn.Module):
            def __init__(self):
                super().__init__()
                self.ws = t.nn.ParameterList([t.tensor(arr(seed + i, 4, 4).tolist())
                                              for i in range(2)])
                self.extra = t.nn.ParameterDict({"scale": t.tensor([0.5, 1.5, -1.0, 2.0]),
                                                 "bias": t.tensor(arr(seed + 5, 4).tolist())})

            def forward(self, x):
                for w in self.ws:
                    x = (x @ w).tanh()
                return (x * self.extra["scale"] + self.extra["bias"]).sum()

        return M()


def test_model_with_parameter_containers_trains_as_torch(jg, torch):
    jm, tm = Model.make(jg, 3), Model.make(torch, 3)
    assert [n for n, _ in jm.named_parameters()] == [n for n, _ in tm.named_parameters()] == \
        ["ws.0", "ws.1", "extra.bias", "extra.scale"]
    assert list(jm.state_dict().keys()) == list(tm.state_dict().keys())
    assert repr(jm).replace("jitgrad", "torch") == repr(tm).replace("__main__.", "")
    jo = jg.optim.SGD(jm.parameters(), lr=0.1)
    to = torch.optim.SGD(tm.parameters(), lr=0.1)
    x = arr(9, 3, 4)
    for _ in range(3):
        jo.zero_grad()
        to.zero_grad()
        jl, tl = jm(jg.tensor(x.tolist())), tm(torch.tensor(x.tolist(), dtype=torch.float32))
        jl.backward()
        tl.backward()
        jo.step()
        to.step()
        assert abs(jl.item() - tl.item()) <= 1e-5 * (1 + abs(tl.item()))
    for (n, jp), (_, tp) in zip(jm.named_parameters(), tm.named_parameters()):
        assert np.allclose(vals(jp), vals(tp), rtol=1e-5, atol=1e-6), n
    # load_state_dict into a fresh model, and to(float64) keeps the objects
    other = Model.make(jg, 50)
    other.load_state_dict(jm.state_dict())
    assert all(vals(a) == vals(b) for a, b in zip(other.parameters(), jm.parameters()))
    w0 = other.ws[0]
    other.to(jg.float64)
    assert other.ws[0] is w0 and w0.dtype == jg.float64 and other.extra["bias"].dtype == \
        jg.float64
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "extra.scale"'):
        sd = jm.state_dict()
        del sd["extra.scale"]
        other.load_state_dict(sd)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_module_with_parameter_containers_equals_eager(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    m = Model.make(jg, 11)
    x = jg.tensor(arr(12, 3, 4).tolist())
    want = m(x)
    want.backward()
    wg = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    cm = jg.compile(m, backend=backend, fullgraph=True)
    got = cm(x)
    got.backward()
    assert vals(got) == vals(want)
    assert all(vals(p.grad) == vals(g) for p, g in zip(m.parameters(), wg))
    # a parameter rebound in the dict is seen by the compiled module
    m.extra["scale"] = jg.tensor([1.0, 1.0, 1.0, 1.0])
    assert vals(cm(x)) == vals(m(x))


def test_nested_repr_and_deepcopy(jg, torch):
    import copy

    def build(t):
        m = t.nn.Module()
        m.pl = t.nn.ParameterList([t.ones(2), "x"])
        m.pd = t.nn.ParameterDict({"a": t.zeros(3)})
        return m

    jm, tm = build(jg), build(torch)
    assert repr(jm) == repr(tm)
    c = copy.deepcopy(jm)
    assert [n for n, _ in c.named_parameters()] == ["pl.0", "pd.a"]
    assert c.pl[0] is not jm.pl[0] and vals(c.pl[0]) == vals(jm.pl[0]) and c.pl[1] == "x"
    assert len(c.pl) == 2 and list(c.pd.keys()) == ["a"]
