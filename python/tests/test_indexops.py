"""gather / scatter / scatter_add / index_add / index_copy / index_fill /
masked_select / flip / roll / repeat / repeat_interleave / isnan / isinf /
isfinite / nan_to_num / logsumexp / remainder / fmod / floor_divide /
argsort / outer / dot / mv / addmm / trace against PyTorch 1.13: values,
dtypes, gradients (repeated indices included), errors; finite differences in
float64; compiled == eager bitwise on both backends."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


def dname(d):
    return str(d).split(".")[-1]


def close(jt, tt, tol):
    assert dname(jt.dtype) == dname(tt.dtype), (jt.dtype, tt.dtype)
    assert tuple(jt.shape) == tuple(tt.shape), (jt.shape, tt.shape)
    a = np.array(jt.detach().tolist(), dtype=np.float64)
    b = np.array(tt.detach().tolist(), dtype=np.float64)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


X = [[0.5, -1.25, 2.0, -1.75], [3.0, -0.75, 2.5, -2.5], [0.25, 4.0, -3.0, 1.0]]
INF, NAN = float("inf"), float("nan")


def L(T, v):
    return T.tensor(v, dtype=T.int64)


# name: (fn(T, x) -> tensor, differentiable in x)
CASES = {
    "gather": lambda T, x: x.gather(1, L(T, [[0, 0, 3], [1, 2, 2], [3, 3, 3]])),
    "gather_fn": lambda T, x: T.gather(x, 0, L(T, [[2, 0, 1, 1]])),
    "scatter_src": lambda T, x: x.scatter(1, L(T, [[1, 0], [3, 2]]), x[:2, 2:] * 2),
    "scatter_big_src": lambda T, x: T.scatter(x, 0, L(T, [[2, 1]]), x * 3),
    "scatter_value": lambda T, x: x.scatter(1, L(T, [[0], [3], [1]]), 7.5),
    "scatter_add": lambda T, x: x.scatter_add(1, L(T, [[0, 0, 0], [3, 1, 3], [2, 2, 2]]),
                                              x[:, 1:] * 1.5),
    "scatter_add_big_src": lambda T, x: T.scatter_add(x, 0, L(T, [[0, 0], [2, 0]]), x * x),
    "index_add": lambda T, x: x.index_add(0, L(T, [2, 0, 2, 2]), T.cat([x, x[:1]]) * 0.5),
    "index_add_alpha": lambda T, x: x.index_add(1, T.tensor([3, 3], dtype=T.int32),
                                                x[:, :2], alpha=2),
    "index_copy": lambda T, x: x.index_copy(1, L(T, [2, 0]), x[:, 1:3] * -1),
    "index_fill": lambda T, x: x.index_fill(1, L(T, [1, -1]), -2.0),
    "masked_select": lambda T, x: x.masked_select(x > 0.4),
    "masked_select_bcast": lambda T, x: T.masked_select(x, T.tensor([True, False, True, True])),
    "flip": lambda T, x: x.flip(0),
    "flip_dims": lambda T, x: T.flip(x, (1, -2)) * x,
    "fliplr": lambda T, x: T.fliplr(x),
    "roll": lambda T, x: x.roll(1, 1),
    "roll_flat": lambda T, x: T.roll(x, -5),
    "roll_dims": lambda T, x: T.roll(x, (2, -1), (0, 1)),
    "repeat": lambda T, x: x.repeat(2, 1, 3),
    "repeat_list": lambda T, x: x[0].repeat([2, 2]),
    "repeat_interleave": lambda T, x: x.repeat_interleave(2),
    "repeat_interleave_dim": lambda T, x: T.repeat_interleave(x, L(T, [1, 0, 3]), dim=0),
    "nan_to_num": lambda T, x: T.nan_to_num(x / T.tensor([0.0, 1.0, 0.0, 1.0]) * x),
    "nan_to_num_args": lambda T, x: (x / T.tensor([0.0, 1.0, 0.0, 1.0]))
    .nan_to_num(nan=1.5, posinf=9.0, neginf=-8.0),
    "logsumexp": lambda T, x: T.logsumexp(x, 1),
    "logsumexp_keep": lambda T, x: x.logsumexp((0, 1), keepdim=True),
    "logsumexp_big": lambda T, x: T.logsumexp(x * 100, 0),
    "remainder": lambda T, x: T.remainder(x, T.tensor([0.75, -1.5, 2.0, -0.5])),
    "remainder_op": lambda T, x: x % 1.5 + (-x) % -0.75,
    "rmod": lambda T, x: 5.0 % (x.detach() + 10) + x,  # (torch: no gradient for 5.0 % x)
    "fmod": lambda T, x: T.fmod(x, x[0] + 5),
    "fmod_scalar": lambda T, x: x.fmod(-1.25),
    "argsort": lambda T, x: x.argsort(1),
    "argsort_desc": lambda T, x: T.argsort(x, dim=0, descending=True),
    "outer": lambda T, x: T.outer(x[0], x[1, :3]),
    "dot": lambda T, x: T.dot(x[0], x[1]),
    "mv": lambda T, x: T.mv(x, x[1]),
    "addmm": lambda T, x: T.addmm(x[0], x[:, :3].t(), x),
    "addmm_scaled": lambda T, x: T.addmm(x[:3, :3], x[:, :3].t(), x[:, :3], beta=0.5,
                                         alpha=-2),
    "trace": lambda T, x: x.trace() + T.trace(x[:, :2]),
    "diag_vec": lambda T, x: T.diag(x[1], 1) + T.diag(x[0, 1:], -2).sum(),
    "diag_mat": lambda T, x: T.diag(x) * T.diag(x, 1) + x.diag(-1).sum() + T.diag(x, 3).sum(),
}


# PyTorch 1.13's backward fails for a src larger than the index ("invalid
# gradient"): jitgrad's is checked by finite differences instead
BIG_SRC = ("scatter_big_src", "scatter_add_big_src")


def run(T, name, dtype):
    x = T.tensor(X, dtype=getattr(T, dtype), requires_grad=True)
    out = CASES[name](T, x)
    if not out.dtype.is_floating_point or (T.__name__ == "torch" and name in BIG_SRC):
        return out, None
    w = T.arange(out.numel(), dtype=out.dtype).reshape(out.shape) * 0.25 + 1.0
    (g,) = T.autograd.grad((out * w).sum(), [x])
    return out, g


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(jg, name, dtype):
    jo, jgr = run(jg, name, dtype)
    to, tgr = run(torch, name, dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    close(jo, to, tol)
    if tgr is not None and jgr is not None:
        close(jgr, tgr, tol)
        tn, jn = type(to.grad_fn).__name__, jo.grad_fn.name()
        if name not in ("remainder_op", "rmod", "outer", "repeat_interleave",
                        "repeat_interleave_dim", "flip_dims", "trace", "fmod_scalar",
                        "diag_vec", "diag_mat"):
            assert jn == tn, (jn, tn)


def test_floor_divide_and_int_ops_like_torch(jg):
    a = [7, -7, 6, -6, 0, 5]
    b = [2, 2, -4, -4, 3, -1]
    for f in (lambda T, x, y: x % y, lambda T, x, y: T.fmod(x, y),
              lambda T, x, y: x // y, lambda T, x, y: T.floor_divide(x, 2),
              lambda T, x, y: 9 // y, lambda T, x, y: x % 2.5, lambda T, x, y: 7.5 // y,
              lambda T, x, y: T.remainder(x.float(), y.double()),
              lambda T, x, y: T.floor_divide(x.float() / 3, y.float()),
              lambda T, x, y: T.dot(x, y), lambda T, x, y: T.outer(x, y.float()),
              lambda T, x, y: T.isnan(x), lambda T, x, y: T.isinf(x), lambda T, x, y: x.isfinite(),
              lambda T, x, y: T.nan_to_num(x), lambda T, x, y: x.flip(0).roll(2),
              lambda T, x, y: x.repeat(2), lambda T, x, y: T.logsumexp(x, 0),
              lambda T, x, y: x.gather(0, y.abs()), lambda T, x, y: x.scatter_add(0, y.abs(), x),
              lambda T, x, y: (x > 0).scatter(0, y.abs(), True),
              lambda T, x, y: x.index_add(0, y.abs(), x), lambda T, x, y: x.masked_select(x > 0),
              lambda T, x, y: x.int() % y.int(), lambda T, x, y: x.int().index_fill(0, y.abs(), 3)):
        for T in (torch, jg):
            x, y = T.tensor(a), T.tensor(b)
            r = f(T, x, y)
            if T is torch:
                tr = r
        close(r, tr, 1e-6)


def test_float_specials_like_torch(jg):
    v = [INF, -INF, NAN, 0.0, -0.0, 1.5, -2.5, 1e30]
    for f in (lambda T, x: T.isnan(x), lambda T, x: T.isinf(x), lambda T, x: T.isfinite(x),
              lambda T, x: T.nan_to_num(x), lambda T, x: x % 0.75, lambda T, x: x % -0.75,
              lambda T, x: T.fmod(x, 0.75), lambda T, x: x // 0.75, lambda T, x: x // -0.0,
              lambda T, x: x % 0.0, lambda T, x: T.logsumexp(x[:2], 0),
              lambda T, x: T.logsumexp(x[2:4], 0), lambda T, x: T.logsumexp(x[1:2], 0)):
        for dt in ("float32", "float64"):
            r = f(jg, jg.tensor(v, dtype=getattr(jg, dt)))
            t = f(torch, torch.tensor(v, dtype=getattr(torch, dt)))
            close(r, t, 0)
            # signs of zeros too
            ra, ta = np.array(r.tolist(), dtype=np.float64), np.array(t.tolist(), dtype=np.float64)
            num = ~np.isnan(ta)
            assert (np.signbit(ra[num]) == np.signbit(ta[num])).all(), (ra, ta)


def test_remainder_float_bits_like_torch(jg):
    rng = np.random.RandomState(0)
    a = (rng.randn(200) * 10).astype(np.float32)
    b = (rng.randn(200) * 3).astype(np.float32)
    for f in (lambda T, x, y: x % y, lambda T, x, y: T.fmod(x, y), lambda T, x, y: x // y):
        r = f(jg, jg.tensor(a.tolist()), jg.tensor(b.tolist())).numpy()
        t = f(torch, torch.tensor(a), torch.tensor(b)).numpy()
        assert r.tobytes() == t.tobytes()


def test_repeated_indices_accumulate_in_index_order(jg):
    # gradients through scatter_add / index_add with repeated indices, and
    # their values summed in index order, as PyTorch's CPU kernels do
    vals = [1e8, 1.0, -1e8, 1.0, 3.0]
    for T in (torch, jg):
        src = T.tensor(vals, requires_grad=True)
        base = T.zeros(2, requires_grad=True)
        out = base.scatter_add(0, T.tensor([0, 0, 0, 0, 1]), src)
        out2 = T.zeros(2).index_add(0, T.tensor([0, 0, 0, 0, 1]), src)
        ((out * T.tensor([2.0, 3.0])).sum() + (out2 * out2).sum()).backward()
        if T is torch:
            t = (out, out2, src.grad, base.grad)
        else:
            j = (out, out2, src.grad, base.grad)
    for a, b in zip(j, t):
        assert a.detach().numpy().tobytes() == b.detach().numpy().tobytes()


ERRORS = [
    (lambda T: T.zeros(3, 4).gather(1, T.zeros(2, dtype=T.int64)), RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    (lambda T: T.zeros(3, 4).gather(1, T.full((2, 2), 4, dtype=T.int64)), RuntimeError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    (lambda T: T.zeros(3, 4).gather(1, T.full((2, 2), -1, dtype=T.int64)), RuntimeError,
     "index -1 is out of bounds for dimension 1 with size 4"),
    (lambda T: T.zeros(3, 4).gather(1, T.zeros(2, 2, dtype=T.int32)), RuntimeError,
     "gather(): Expected dtype int64 for index"),
    (lambda T: T.zeros(3, 4).gather(2, T.zeros(2, 2, dtype=T.int64)), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)"),
    (lambda T: T.zeros(3, 4).scatter_add(1, T.zeros(2, 2, dtype=T.int64),
                                         T.ones(2, 2, dtype=T.float64)), RuntimeError,
     "scatter(): Expected self.dtype to be equal to src.dtype"),
    (lambda T: T.zeros(3, 4).scatter_add(1, T.zeros(2, 2, dtype=T.int64), T.ones(1, 2)),
     RuntimeError, "Expected index [2, 2] to be smaller than self [3, 4] apart from dimension 1 "
     "and to be smaller size than src [1, 2]"),
    (lambda T: T.zeros(3, 4).scatter_add(1, T.full((2, 2), 9, dtype=T.int64), T.ones(3, 5)),
     RuntimeError, "index 9 is out of bounds for dimension 1 with size 4"),
    (lambda T: T.zeros(3, 4).scatter(0, T.full((1, 1), 3, dtype=T.int64), 1.0),
     RuntimeError, "index 3 is out of bounds for dimension 0 with size 3"),
    (lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 5]), T.ones(2, 4)), IndexError,
     "index out of range in self"),
    (lambda T: T.zeros(3, 4).index_add(0, T.tensor([-1, 0]), T.ones(2, 4)), IndexError,
     "index out of range in self"),
    (lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 0]), T.ones(3, 4)), RuntimeError,
     "index_add_(): Number of indices (2) should be equal to source.size(dim): (3), for dim: 0"),
    (lambda T: T.zeros(3, 4).index_add(0, T.tensor([0.0, 0]), T.ones(2, 4)), RuntimeError,
     "index_add_(): Expected dtype int32/int64 for index but got: Float"),
    (lambda T: T.zeros(3, 4).index_add(0, T.tensor([0, 0]), T.ones(2, 4, dtype=T.float64)),
     RuntimeError, "index_add_(): self (Float) and source (Double) must have the same scalar type"),
    (lambda T: T.zeros(3, 4).index_copy(0, T.tensor([0, 7]), T.ones(2, 4)), IndexError,
     "index_copy_(): index 7 is out of bounds for dimension 0 with size 3"),
    (lambda T: T.zeros(3, 4).index_fill(0, T.tensor([0, 7]), 2.0), IndexError,
     "index 7 is out of bounds for dimension 0 with size 3"),
    (lambda T: T.zeros(3, 4).flip(0, 0), RuntimeError,
     "dim 0 appears multiple times in the list of dims"),
    (lambda T: T.zeros(3, 4).roll((1, 2), (0,)), RuntimeError,
     "shifts and dimensions must align. shifts: 2, dims:1"),
    (lambda T: T.zeros(3, 4).repeat(2), RuntimeError,
     "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"),
    (lambda T: T.zeros(3, 4).repeat_interleave(-1), RuntimeError, "repeats can not be negative"),
    (lambda T: T.zeros(3, 4).repeat_interleave(T.tensor([1, 2]), 0), RuntimeError,
     "repeats must have the same size as input along dim"),
    (lambda T: T.zeros(3, 4).masked_select(T.ones(3, dtype=T.bool)), RuntimeError,
     "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"),
    (lambda T: T.zeros(3, 4).masked_select(T.ones(4)), RuntimeError,
     "masked_select: expected BoolTensor or ByteTensor for mask"),
    (lambda T: T.tensor([5]) % T.tensor([0]), RuntimeError, "ZeroDivisionError"),
    (lambda T: T.fmod(T.tensor([5]), 0), RuntimeError, "ZeroDivisionError"),
    (lambda T: T.tensor([5]) // 0, RuntimeError, "ZeroDivisionError"),
    (lambda T: T.remainder(T.tensor([True]), T.tensor([True])), RuntimeError,
     "\"remainder_cpu\" not implemented for 'Bool'"),
    (lambda T: T.floor_divide(T.tensor([True]), T.tensor([True])), RuntimeError,
     "\"div_floor_cpu\" not implemented for 'Bool'"),
    (lambda T: T.outer(T.ones(3), T.ones(2, 2)), RuntimeError,
     "outer: Expected 1-D argument vec2, but got 2-D"),
    (lambda T: T.dot(T.ones(3), T.ones(2)), RuntimeError,
     "inconsistent tensor size, expected tensor [3] and src [2] to have the same number of "
     "elements, but got 3 and 2 elements respectively"),
    (lambda T: T.dot(T.ones(3), T.ones(3, dtype=T.float64)), RuntimeError,
     "dot : expected both vectors to have same dtype, but found Float and Double"),
    (lambda T: T.dot(T.ones(3, 2), T.ones(3)), RuntimeError,
     "1D tensors expected, but got 2D and 1D tensors"),
    (lambda T: T.mv(T.ones(3, 2), T.ones(3)), RuntimeError, "size mismatch, got 3, 3x2,3"),
    (lambda T: T.mv(T.ones(3), T.ones(3)), RuntimeError,
     "vector + matrix @ vector expected, got 1, 1, 1"),
    (lambda T: T.addmm(T.ones(3, 4), T.ones(3, 2), T.ones(3, 4)), RuntimeError,
     "mat1 and mat2 shapes cannot be multiplied (3x2 and 3x4)"),
    (lambda T: T.diag(T.ones(2, 2, 2)), RuntimeError, "matrix or a vector expected"),
    (lambda T: T.trace(T.ones(3)), RuntimeError,
     "trace: expected a matrix, but got tensor with dim 1"),
]


@pytest.mark.parametrize("k", range(len(ERRORS)))
def test_errors_like_torch(jg, k):
    call, exc, msg = ERRORS[k]
    for T in (torch, jg):
        with pytest.raises(exc) as e:
            call(T)
        assert msg in str(e.value), (T, str(e.value))


def test_bad_index_leaves_state_intact(jg):
    x = jg.arange(12.0).reshape(3, 4)
    before = x.numpy().tobytes()
    with pytest.raises(RuntimeError):
        x.scatter_add_(1, jg.tensor([[0, 9]]), jg.ones(1, 2))
    with pytest.raises(IndexError):
        x.index_add_(0, jg.tensor([0, 3]), jg.ones(2, 4))
    assert x.numpy().tobytes() == before and x._version == 0


def test_inplace_forms_like_torch(jg):
    for T in (torch, jg):
        x = T.arange(12.0).reshape(3, 4)
        x.scatter_(1, T.tensor([[1], [0], [3]]), 9.0)
        x.scatter_add_(0, T.tensor([[2, 2, 0, 1]]), T.ones(1, 4))
        x.index_add_(1, T.tensor([0, 0]), T.ones(3, 2), alpha=3)
        x.index_fill_(0, T.tensor([1]), -1.0)
        x.index_copy_(1, T.tensor([3]), T.full((3, 1), 5.0))
        x %= 4
        y = T.arange(6).reshape(2, 3)
        y //= 2
        if T is torch:
            t = (x, y)
        else:
            j = (x, y)
    for a, b in zip(j, t):
        close(a, b, 0)


def _fd_check(jg, f, x0, eps=1e-6, tol=1e-6):
    x = jg.tensor(x0, dtype=jg.float64, requires_grad=True)
    out = f(x)
    w = jg.arange(out.numel(), dtype=jg.float64).reshape(out.shape) * 0.5 + 1
    (g,) = jg.autograd.grad((out * w).sum(), [x])
    flat = np.array(x0, dtype=np.float64).reshape(-1)
    num = np.zeros_like(flat)
    for i in range(flat.size):
        for s in (1, -1):
            v = flat.copy()
            v[i] += s * eps
            xv = jg.tensor(v.reshape(np.array(x0).shape).tolist(), dtype=jg.float64)
            num[i] += s * float((f(xv) * w).sum().item()) / (2 * eps)
    np.testing.assert_allclose(np.array(g.tolist()).reshape(-1), num, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["gather", "scatter_src", "scatter_big_src",
                                  "scatter_add_big_src", "scatter_value", "scatter_add",
                                  "index_add_alpha", "index_copy", "index_fill", "masked_select",
                                  "flip_dims", "roll_dims", "repeat", "repeat_interleave_dim",
                                  "logsumexp", "logsumexp_keep", "remainder", "fmod", "outer",
                                  "dot", "mv", "addmm_scaled", "trace", "diag_vec",
                                  "diag_mat"])
def test_gradcheck_float64(jg, name):
    # (X moved off remainder's and fmod's jumps: 2.0 % 2.0)
    _fd_check(jg, lambda x: CASES[name](jg, x), (np.array(X) + 0.0625).tolist())


def test_double_backward_like_torch(jg):
    def f(T, x):
        y = x.scatter_add(1, T.tensor([[0, 0], [1, 3], [2, 2]]), x[:, :2] * x[:, 2:])
        z = T.logsumexp(y.gather(0, T.tensor([[2, 0, 1, 1]])) ** 2, 1) + T.outer(x[0], x[1]).sum()
        (g,) = T.autograd.grad(z.sum(), [x], create_graph=True)
        (gg,) = T.autograd.grad((g * g).sum(), [x])
        return g, gg
    j = f(jg, jg.tensor(X, dtype=jg.float64, requires_grad=True))
    t = f(torch, torch.tensor(X, dtype=torch.float64, requires_grad=True))
    for a, b in zip(j, t):
        close(a, b, 1e-10)


def _prog(T, x, idx, mask):
    a = x.gather(1, idx).sum() + x.scatter_add(1, idx, x[:, :2] * 2).sum()
    b = x.scatter(1, idx, 0.5).sum() + x.index_add(0, idx[:, 0], x * x).sum()
    c = T.logsumexp(x, 1).sum() + (x % 0.7).sum() + T.fmod(x, -0.3).sum() + (x.detach() // 0.4).sum()
    d = x.flip(1).roll(1, 0).repeat(1, 2).sum() + T.nan_to_num(x / x.abs().round()).sum()
    e = T.addmm(x[0, :2], x[:2, :3], x[:, :2]).sum() + T.mv(x, x[0]).sum() + T.dot(x[0], x[1])
    f = T.outer(x[1], x[2]).sum() + x[:, :3].trace() + x.masked_fill(T.isnan(x), 0).sum()
    g = x.index_copy(1, idx[0], x[:, :2]).sum() + x.index_fill(0, idx[:, 1], 1.0).sum()
    return a + b + c + d + e + f + g, x.argsort(1), x.repeat_interleave(2, 0), T.isfinite(x)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_matches_eager_bitwise(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    jg.manual_seed(5)
    x0 = jg.randn(3, 4)
    idx = jg.tensor([[0, 2], [1, 1], [2, 0]])
    mask = x0 > 0

    def run_(f):
        x = x0.clone().requires_grad_()
        outs = f(x, idx, mask)
        outs[0].backward()
        return [o.detach().numpy().tobytes() for o in outs] + [x.grad.numpy().tobytes()]

    eager = run_(lambda x, i, m: _prog(jg, x, i, m))
    cf = jg.compile(lambda x, i, m: _prog(jg, x, i, m), fullgraph=True, backend=backend)
    for _ in range(2):
        assert run_(cf) == eager


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_bad_index_fails_like_eager(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    cf = jg.compile(lambda x, i: x.scatter_add(1, i, x) * 2, fullgraph=True, backend=backend)
    x = jg.ones(2, 3)
    assert cf(x, jg.tensor([[0, 1, 2], [2, 2, 2]])).tolist() == [[4, 4, 4], [2, 2, 8]]
    # (a compiled call raises IndexError for it: the message is eager's)
    with pytest.raises((RuntimeError, IndexError),
                       match="index 3 is out of bounds for dimension 1 with size 3"):
        cf(x, jg.tensor([[0, 1, 3], [2, 2, 2]]))
    cg = jg.compile(lambda x, i: x.gather(0, i) + 1, fullgraph=True, backend=backend)
    with pytest.raises((RuntimeError, IndexError),
                       match="index -1 is out of bounds for dimension 0 with size 2"):
        cg(x, jg.tensor([[0, -1, 0]]))


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_compiled_masked_select_runs_in_pieces(jg, backend):
    # masked_select's length is the mask's count: a compiled call reads it
    # mid-program (a graph break) and still matches eager bitwise
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")

    def prog(x):
        y = (x * 1.5).masked_select(x > 0.2)
        return (y * y).sum() + x.logsumexp(0).sum()

    jg.manual_seed(9)
    x0 = jg.randn(4, 3)
    cf = jg.compile(prog, backend=backend)
    for x_in in (x0, x0 * -1, x0 + 0.5):
        outs = []
        for f in (prog, cf):
            x = x_in.clone().requires_grad_()
            out = f(x)
            out.backward()
            outs.append((out.detach().numpy().tobytes(), x.grad.numpy().tobytes()))
        assert outs[0] == outs[1]
