"""utils.data's IterableDataset, ChainDataset, WeightedRandomSampler and
get_worker_info against PyTorch 1.13: DataLoader batches, drop_last,
lengths, errors; the sampler's distribution and reproducibility."""
import numpy as np
import pytest

import jitgrad
from jitgrad.utils import data as jd

torch = pytest.importorskip("torch")
td = pytest.importorskip("torch.utils.data")


def _range_ds(mod, lib, n, with_len=True, kind="tensor"):
    class Stream(mod.IterableDataset):
        def __init__(self, start, end):
            self.start, self.end = start, end

        def __iter__(self):
            for i in range(self.start, self.end):
                if kind == "tensor":
                    yield lib.tensor([float(i), 2.0 * i])
                elif kind == "tuple":
                    yield (i, float(i) / 2)
                else:
                    yield {"x": lib.tensor([i]), "y": i}

    if with_len:
        Stream.__len__ = lambda self: self.end - self.start
    return Stream(0, n)


def _plain(batch):
    """Batches as nested Python lists / values."""
    if hasattr(batch, "tolist"):
        return ("T", str(batch.dtype).split(".")[-1], batch.tolist())
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [_plain(b) for b in batch]
    return batch


def _both(n, kind="tensor", with_len=True, **kw):
    out = []
    for mod, lib in ((jd, jitgrad), (td, torch)):
        ds = _range_ds(mod, lib, n, with_len, kind)
        out.append((mod.DataLoader(ds, **kw), ds))
    return out


@pytest.mark.parametrize("kind", ["tensor", "tuple", "dict"])
@pytest.mark.parametrize("n,bs,drop", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False),
                                       (2, 5, True), (7, 1, False), (0, 2, False)])
def test_iterable_batches(kind, n, bs, drop):
    (jl, _), (tl, _) = _both(n, kind, batch_size=bs, drop_last=drop)
    got = [_plain(b) for b in jl]
    want = [_plain(b) for b in tl]
    assert got == want
    assert len(jl) == len(tl)
    assert [_plain(b) for b in jl] == want  # a second epoch starts over


def test_iterable_unbatched_and_collate_fn():
    (jl, _), (tl, _) = _both(4, batch_size=None)
    assert [_plain(b) for b in jl] == [_plain(b) for b in tl]
    assert len(jl) == len(tl) == 4
    (jl, _), (tl, _) = _both(5, "tuple", batch_size=2, collate_fn=lambda b: [x[0] for x in b])
    assert list(jl) == list(tl) == [[0, 1], [2, 3], [4]]
    (jl, _), (tl, _) = _both(5, num_workers=0, batch_size=2, shuffle=False)
    assert [_plain(b) for b in jl] == [_plain(b) for b in tl]


def test_iterable_without_len():
    (jl, _), (tl, _) = _both(5, with_len=False, batch_size=2)
    assert [_plain(b) for b in jl] == [_plain(b) for b in tl]
    with pytest.raises(TypeError):
        len(jl)
    with pytest.raises(TypeError):
        len(tl)


def _errors(make):
    msgs = []
    for mod, lib in ((jd, jitgrad), (td, torch)):
        with pytest.raises(Exception) as e:
            make(mod, _range_ds(mod, lib, 4))
        msgs.append((type(e.value), str(e.value)))
    assert msgs[0] == msgs[1]


def test_iterable_loader_errors():
    _errors(lambda m, ds: m.DataLoader(ds, shuffle=True))
    _errors(lambda m, ds: m.DataLoader(ds, batch_size=None, drop_last=True))
    _errors(lambda m, ds: m.DataLoader(ds, batch_size=0))
    with pytest.raises(ValueError, match="expected unspecified sampler option"):
        jd.DataLoader(_range_ds(jd, jitgrad, 4), sampler=[0, 1])
    with pytest.raises(ValueError, match="expected unspecified batch_sampler option"):
        jd.DataLoader(_range_ds(jd, jitgrad, 4), batch_sampler=[[0, 1]])


def test_iterable_base_class():
    with pytest.raises(NotImplementedError):
        iter(jd.IterableDataset())
    assert isinstance(_range_ds(jd, jitgrad, 3), jd.Dataset)


def test_chain_dataset():
    outs = []
    for mod, lib in ((jd, jitgrad), (td, torch)):
        a, b = _range_ds(mod, lib, 3, kind="tuple"), _range_ds(mod, lib, 2, kind="tuple")
        c = mod.ChainDataset([a, b])
        assert len(c) == 5
        added = a + b
        assert isinstance(added, mod.ChainDataset) and len(added) == 5
        outs.append((list(c), list(added), [_plain(x) for x in mod.DataLoader(c, batch_size=2)]))
    assert outs[0] == outs[1]


def test_chain_dataset_errors():
    for mod, lib in ((jd, jitgrad), (td, torch)):
        bad = mod.ChainDataset([_range_ds(mod, lib, 2), mod.TensorDataset(lib.ones(3))])
        with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
            list(bad)
        with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
            len(bad)
        with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
            mod.ConcatDataset([_range_ds(mod, lib, 2)])


def test_get_worker_info():
    assert jd.get_worker_info() is None and td.get_worker_info() is None


@pytest.mark.parametrize("replacement", [True, False])
def test_weighted_sampler_basics(replacement):
    w = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6]
    s = jd.WeightedRandomSampler(w, 5, replacement=replacement)
    idx = list(s)
    assert len(idx) == len(s) == 5 and all(isinstance(i, int) for i in idx)
    assert all(0 <= i < 6 for i in idx)
    if not replacement:
        assert len(set(idx)) == 5
    ts = td.WeightedRandomSampler(w, 5, replacement=replacement)
    assert str(s.weights.dtype).split(".")[-1] == str(ts.weights.dtype).split(".")[-1]
    assert s.weights.tolist() == ts.weights.tolist()
    assert (s.num_samples, s.replacement) == (ts.num_samples, ts.replacement)


def test_weighted_sampler_distribution():
    jitgrad.manual_seed(0)
    w = np.array([1.0, 2.0, 0.0, 5.0])
    idx = np.array(list(jd.WeightedRandomSampler(w.tolist(), 20000)))
    freq = np.bincount(idx, minlength=4) / len(idx)
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.015)
    # without replacement: the first draw follows the weights
    firsts = [next(iter(jd.WeightedRandomSampler([1.0, 3.0], 2, replacement=False)))
              for _ in range(3000)]
    assert abs(np.mean(firsts) - 0.75) < 0.03
    assert sorted(jd.WeightedRandomSampler([1.0, 3.0, 2.0], 3, replacement=False)) == [0, 1, 2]


def test_weighted_sampler_generator():
    g1, g2 = jitgrad.Generator().manual_seed(7), jitgrad.Generator().manual_seed(7)
    a = list(jd.WeightedRandomSampler([0.2, 0.3, 0.5], 12, generator=g1))
    b = list(jd.WeightedRandomSampler([0.2, 0.3, 0.5], 12, generator=g2))
    assert a == b
    jitgrad.manual_seed(3)
    c = list(jd.WeightedRandomSampler(jitgrad.tensor([0.2, 0.3, 0.5]), 12))
    jitgrad.manual_seed(3)
    d = list(jd.WeightedRandomSampler(jitgrad.tensor([0.2, 0.3, 0.5]), 12))
    assert c == d


def test_weighted_sampler_in_loader():
    ds = jd.TensorDataset(jitgrad.arange(10.0))
    s = jd.WeightedRandomSampler([1.0] * 10, 7, replacement=False,
                                 generator=jitgrad.Generator().manual_seed(1))
    batches = [b[0].tolist() for b in jd.DataLoader(ds, batch_size=3, sampler=s)]
    assert [len(b) for b in batches] == [3, 3, 1]
    flat = sum(batches, [])
    assert len(set(flat)) == 7


def test_weighted_sampler_errors():
    cases = [lambda m: m.WeightedRandomSampler([[1.0]], 2),
             lambda m: m.WeightedRandomSampler([1.0], 0),
             lambda m: m.WeightedRandomSampler([1.0], True),
             lambda m: m.WeightedRandomSampler([1.0], 2, 1),
             lambda m: list(m.WeightedRandomSampler([1.0, 2.0, 3.0], 4, False)),
             lambda m: list(m.WeightedRandomSampler([0.0, 0.0], 2))]
    for c in cases:
        with pytest.raises(Exception) as te:
            c(td)
        with pytest.raises(type(te.value)) as je:
            c(jd)
        assert str(je.value) == str(te.value)
