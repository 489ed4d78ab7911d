"""utils.data, printing (repr summarization, __format__), the legacy
Tensor constructor and the small torch-namespace queries, against PyTorch."""
import collections

import pytest

import jitgrad
from jitgrad.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

torch = pytest.importorskip("torch")


def _rename(s):
    return s.replace("torch.", "jitgrad.")


# ---------------------------------------------------------------- printing


def _build(lib, expr):
    return eval(expr, {"lib": lib})


REPR_CASES = [
    "lib.arange(30.)",
    "lib.arange(2000.)",
    "lib.arange(3000).reshape(30, 100)",
    "lib.arange(2000.).reshape(10, 10, 20) / 7",
    "lib.arange(1001.).reshape(1001, 1)",
    "lib.arange(24.).reshape(2, 3, 4) * 1.5",
    "lib.tensor([1e-5, 1.0])",
    "lib.tensor([1.0, 2000.0])",
    "lib.tensor([0.5, float('inf'), float('nan')])",
    "lib.tensor([0.0, float('-inf')])",
    "lib.tensor(3.25, dtype=lib.float64)",
    "lib.tensor([True, False])",
    "lib.tensor([1, -20], dtype=lib.int32)",
    "lib.zeros(0, 3)",
    "lib.zeros(0, dtype=lib.int64)",
    "lib.ones(40, requires_grad=True)",
    "lib.ones(2, 2, dtype=lib.float64, requires_grad=True) * 2.5",
    "(lib.arange(1200.) * 1.1).reshape(2, 600)",
    "lib.arange(5000) - 2500",
]


@pytest.mark.parametrize("expr", REPR_CASES)
def test_repr_like_torch(expr):
    got = repr(_build(jitgrad, expr))
    want = _rename(repr(_build(torch, expr)))
    # grad_fn names for scalar operands differ (MulBackward0/1); compare the rest
    if "grad_fn" in want:
        got, want = got.split("grad_fn")[0], want.split("grad_fn")[0]
    assert got == want


def test_set_printoptions_like_torch():
    try:
        for lib in (torch, jitgrad):
            lib.set_printoptions(precision=2, threshold=5, edgeitems=1, linewidth=40)
        assert repr(jitgrad.arange(10.) / 3) == repr(torch.arange(10.) / 3)
    finally:
        for lib in (torch, jitgrad):
            lib.set_printoptions(profile="default")
    assert repr(jitgrad.arange(10.) / 3) == repr(torch.arange(10.) / 3)


def test_format():
    t = jitgrad.tensor(3.14159)
    assert "{:.2f}".format(t) == "3.14" and f"{t:>8.3f}" == "   3.142"
    assert f"{jitgrad.tensor(7):03d}" == "007"
    assert f"{jitgrad.tensor([1.0, 2.0])}" == str(jitgrad.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="unsupported format string"):
        "{:.2f}".format(jitgrad.tensor([1.0, 2.0]))


# ---------------------------------------------------------------- misc


def test_legacy_constructor_like_torch():
    for args in ([[1, 2]], [[[1.5], [2]]], [2, 3], [], [(4, 5)]):
        got, want = jitgrad.Tensor(*args), torch.Tensor(*args)
        assert got.dtype == jitgrad.float32 and tuple(got.shape) == tuple(want.shape)
        if args != [2, 3]:  # PyTorch leaves sizes-only tensors uninitialized
            assert got.tolist() == want.tolist()
    x = jitgrad.ones(2)
    y = jitgrad.Tensor(x)
    assert y._same_storage(x)
    with pytest.raises(TypeError):
        jitgrad.Tensor(3.5)
    assert jitgrad.Tensor(jitgrad.ones(2, dtype=jitgrad.int64)).dtype == jitgrad.int64
    assert isinstance(jitgrad.Tensor([1]), jitgrad.Tensor)


def test_device_queries_and_default_dtype():
    assert jitgrad.cuda.is_available() is False and jitgrad.cuda.device_count() == 0
    assert jitgrad.backends.mps.is_available() is False
    jitgrad.cuda.manual_seed_all(0)
    jitgrad.backends.cudnn.deterministic = True
    assert jitgrad.get_default_dtype() is jitgrad.float32
    assert jitgrad.tensor([1.5]).dtype is jitgrad.get_default_dtype()


# ---------------------------------------------------------------- utils.data


def _pairs(n=10):
    x = jitgrad.arange(float(n * 2)).reshape(n, 2)
    y = jitgrad.arange(n)
    return x, y


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (5, False), (1, False)])
def test_dataloader_batches_like_torch(batch_size, drop_last):
    x, y = _pairs()
    jl = DataLoader(TensorDataset(x, y), batch_size=batch_size, drop_last=drop_last)
    tl = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(x.tolist()), torch.tensor(y.tolist())),
        batch_size=batch_size, drop_last=drop_last)
    assert len(jl) == len(tl)
    got = [[b.tolist() for b in batch] for batch in jl]
    want = [[b.tolist() for b in batch] for batch in tl]
    assert got == want
    first = next(iter(jl))
    assert isinstance(first, list) and first[0].dtype == jitgrad.float32
    assert first[1].dtype == jitgrad.int64


def test_dataloader_shuffle_uses_library_rng():
    x, y = _pairs(20)
    dl = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    jitgrad.manual_seed(1)
    e1 = [b[1].tolist() for b in dl]
    e2 = [b[1].tolist() for b in dl]
    jitgrad.manual_seed(1)
    again = [b[1].tolist() for b in dl]
    assert e1 == again  # the same seed gives the same order
    flat = sorted(v for b in e1 for v in b)
    assert flat == list(range(20)) and e1 != e2
    assert [b[1].tolist() for b in DataLoader(TensorDataset(x, y), batch_size=4)] != e1
    for xb, yb in DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True):
        assert xb[:, 0].tolist() == [2.0 * v for v in yb.tolist()]  # pairs stay together


def test_default_collate_like_torch():
    Point = collections.namedtuple("Point", "a b")
    cases = [
        [1, 2, 3],
        [1.5, 2.5],
        [True, False],
        ["a", "b"],
        [{"x": 1, "y": 2.0}, {"x": 3, "y": 4.0}],
        [(1, 2.0), (3, 4.0)],
        [[1, 2], [3, 4]],
        [Point(1, 2.0), Point(3, 4.0)],
    ]

    def norm(v, lib):
        if isinstance(v, lib.Tensor):
            return ("T", str(v.dtype).split(".")[-1], v.tolist())
        if isinstance(v, dict):
            return {k: norm(u, lib) for k, u in v.items()}
        if isinstance(v, (list, tuple)):
            return (type(v).__name__, [norm(u, lib) for u in v])
        return v

    for batch in cases:
        got = norm(default_collate(batch), jitgrad)
        want = norm(torch.utils.data.default_collate(batch), torch)
        assert got == want, batch
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])


def test_dataloader_custom_dataset_and_options():
    class Squares(Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return {"i": i, "sq": jitgrad.tensor([float(i * i)])}

    dl = DataLoader(Squares(), batch_size=3)
    batches = list(dl)
    assert [b["i"].tolist() for b in batches] == [[0, 1, 2], [3, 4, 5], [6]]
    assert batches[0]["sq"].tolist() == [[0.0], [1.0], [4.0]]
    assert [b["i"] for b in DataLoader(Squares(), batch_size=None)] == list(range(7))
    bs = BatchSampler(SequentialSampler(range(7)), 2, drop_last=True)
    assert [b["i"].tolist() for b in DataLoader(Squares(), batch_sampler=bs)] == \
        [[0, 1], [2, 3], [4, 5]]
    assert list(DataLoader(Squares(), batch_size=4, collate_fn=len)) == [4, 3]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Squares(), sampler=SequentialSampler(range(7)), shuffle=True)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(Squares(), batch_size=0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler([])


def test_subset_random_split_concat():
    x, y = _pairs(10)
    ds = TensorDataset(x, y)
    jitgrad.manual_seed(0)
    a, b = random_split(ds, [7, 3])
    idx = sorted(a.indices + b.indices)
    assert idx == list(range(10)) and len(a) == 7 and len(b) == 3
    s = Subset(ds, [4, 1])
    assert s[1][1].item() == 1
    cat = ds + s
    assert len(cat) == 12 and cat[10][1].item() == 4 and cat[-1][1].item() == 1
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(ds, [5, 4])
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(x, jitgrad.arange(3))


# ---------------------------------------------------------------- DLPack


def test_dlpack_to_numpy_and_torch_share_memory():
    np = pytest.importorskip("numpy")
    x = jitgrad.arange(6.0).reshape(2, 3)
    assert x.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(x)
    assert a.ctypes.data == x.data_ptr() and a.tolist() == x.tolist()
    t = torch.from_dlpack(x.t())
    assert t.stride() == (1, 3) and t.tolist() == x.t().tolist()
    t[0, 1] = -5.0  # writes show on the other side: no copy
    assert x[1, 0].item() == -5.0 and a[1, 0] == -5.0
    for d in ("float64", "int64", "int32"):
        y = jitgrad.ones(3, dtype=getattr(jitgrad, d))
        assert torch.from_dlpack(y).dtype == getattr(torch, d)
        assert str(np.from_dlpack(y).dtype) == d
    cap = jitgrad.utils.dlpack.to_dlpack(jitgrad.ones(2))
    assert torch.utils.dlpack.from_dlpack(cap).tolist() == [1.0, 1.0]


def test_dlpack_from_numpy_and_torch_share_memory():
    np = pytest.importorskip("numpy")
    tt = torch.arange(10)[::2]
    j = jitgrad.from_dlpack(tt)
    assert j.stride() == (2,) and j.dtype == jitgrad.int64
    tt[1] = 99
    assert j.tolist() == [0, 99, 4, 6, 8]
    na = np.arange(4, dtype=np.int32)
    j = jitgrad.from_dlpack(na)
    na[0] = 7
    del na  # the tensor keeps the array's memory alive
    assert j.tolist() == [7, 1, 2, 3] and j.dtype == jitgrad.int32
    for dt in (torch.float32, torch.float64, torch.int32, torch.int64):
        got = jitgrad.from_dlpack(torch.full((2, 2), 3, dtype=dt))
        assert got.tolist() == [[3, 3], [3, 3]]
        assert got.dtype == getattr(jitgrad, str(dt).split(".")[1])
    cap = torch.utils.dlpack.to_dlpack(torch.ones(2))
    assert jitgrad.utils.dlpack.from_dlpack(cap).tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="consumed"):
        jitgrad.from_dlpack(cap)


def test_dlpack_errors():
    with pytest.raises(RuntimeError, match="Can't export tensors that require gradient"):
        jitgrad.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(RuntimeError, match="Bool type is not supported by dlpack"):
        jitgrad.ones(2, dtype=jitgrad.bool).__dlpack__()
    with pytest.raises(RuntimeError, match="no jitgrad counterpart"):
        jitgrad.from_dlpack(torch.ones(2, dtype=torch.float16))
    with pytest.raises(TypeError, match="__dlpack__"):
        jitgrad.from_dlpack(3)
    jitgrad.ones(3).__dlpack__()  # an unconsumed capsule frees its tensor


# ---------------------------------------------------------------- docstrings


def _public_callables():
    import inspect

    mods = [jitgrad, jitgrad.autograd, jitgrad.nn, jitgrad.nn.functional, jitgrad.utils.data,
            jitgrad.cuda, jitgrad.backends]
    for mod in mods:
        for name in dir(mod):
            obj = getattr(mod, name)
            if not name.startswith("_") and callable(obj) and not inspect.ismodule(obj):
                yield f"{mod.__name__}.{name}", obj
    for name in dir(jitgrad.Tensor):
        if not name.startswith("_") and callable(getattr(jitgrad.Tensor, name)):
            yield f"Tensor.{name}", getattr(jitgrad.Tensor, name)


def test_every_public_callable_has_a_docstring():
    missing = [n for n, obj in _public_callables() if not (obj.__doc__ or "").strip()]
    assert missing == []
    assert "Sum of all elements" in jitgrad.sum.__doc__
    assert jitgrad.Tensor.view.__doc__.startswith("view(*shape)")
    assert "checkpoint" in jitgrad.save.__doc__ and "torch.save" in jitgrad.load.__doc__
