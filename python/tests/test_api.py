"""jitgrad-only checks of the Python API (no PyTorch needed)."""
import gc
import resource

import pytest

import jitgrad as jg


def test_dtype_inference_and_shapes():
    assert jg.tensor([[1.0, 2], [3, 4]]).dtype is jg.float32
    assert jg.tensor([1, 2]).dtype is jg.int64
    assert jg.tensor(3.5).dim() == 0 and jg.tensor(3.5).item() == 3.5
    x = jg.zeros(2, 3, dtype=jg.float64)
    assert x.dtype is jg.float64 and x.shape == (2, 3) and x.size(1) == 3 and x.numel() == 6
    assert jg.ones((4,)).tolist() == [1.0] * 4
    assert str(x.device) == "cpu" and x.is_leaf and not x.requires_grad
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        jg.tensor([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="CPU only"):
        jg.zeros(2, device="cuda")


def test_seeded_random_is_reproducible():
    jg.manual_seed(0)
    a = jg.randn(5).tolist()
    jg.manual_seed(0)
    assert jg.randn(5).tolist() == a
    r = jg.rand(1000).tolist()
    assert 0 <= min(r) and max(r) < 1


def test_repr_like_torch():
    x = jg.tensor([1.0, 2.5], requires_grad=True)
    assert repr(x) == "tensor([1.0000, 2.5000], requires_grad=True)"
    assert repr(x * 2) == "tensor([2., 5.], grad_fn=<MulBackward1>)"
    assert repr(jg.tensor([1, 2])) == "tensor([1, 2])"


def test_numpy_zero_copy_and_from_numpy():
    np = pytest.importorskip("numpy")
    x = jg.zeros(2, 3)
    a = x.numpy()
    a[1, 2] = 7.0
    assert x[1, 2].item() == 7.0  # shares memory
    t = x.t()
    assert t.numpy().shape == (3, 2) and t.numpy()[2, 1] == 7.0  # strided view
    b = np.arange(6, dtype=np.float64).reshape(2, 3)
    y = jg.from_numpy(b)
    assert y.dtype is jg.float64 and y.tolist() == b.tolist()
    assert jg.tensor(np.array([1, 2], dtype=np.int32)).dtype is jg.int32  # as torch.int32


def test_grad_settable_and_requires_grad_():
    x = jg.ones(3).requires_grad_()
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0] * 3
    (x * 2).sum().backward()
    assert x.grad.tolist() == [4.0] * 3  # accumulates
    x.grad = None
    assert x.grad is None
    x.grad = jg.ones(3)
    x.grad.zero_()
    assert x.grad is not None


def test_no_grad_enable_grad():
    x = jg.ones(2, requires_grad=True)
    with jg.no_grad():
        assert not (x * 2).requires_grad
        with jg.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @jg.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad and jg.is_grad_enabled()


def test_backward_gradient_and_retain_graph():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.backward(jg.tensor([1.0, 0.5]), retain_graph=True)
    y.backward(jg.tensor([1.0, 0.5]))
    assert x.grad.tolist() == [4.0, 4.0]


def test_autograd_grad_create_graph():
    x = jg.tensor([1.0, 2.0], requires_grad=True)
    (g,) = jg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.tolist() == [3.0, 12.0]
    (gg,) = jg.autograd.grad(g.sum(), x)
    assert gg.tolist() == [6.0, 12.0]
    a, b = jg.autograd.grad((x * 2).sum(), [x, jg.ones(1, requires_grad=True)],
                            allow_unused=True)
    assert a.tolist() == [2.0, 2.0] and b is None


def test_inplace_and_indexing_assignment():
    x = jg.zeros(2, 3)
    x[0] = 1.0
    x[1, 1:] = jg.tensor([5.0, 6.0])
    x += 1
    x *= 2
    x -= jg.ones(3)
    assert x.tolist() == [[3.0, 3.0, 3.0], [1.0, 11.0, 13.0]]
    x.add_(1, alpha=2).mul_(0.5)
    assert x[0, 0].item() == 2.5


def test_user_exception_type_propagates():
    class Boom(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            raise ZeroDivisionError("mine")

    x = jg.ones(2, requires_grad=True)
    with pytest.raises(ZeroDivisionError, match="mine"):
        Boom.apply(x).sum().backward()


def test_function_non_tensor_outputs_and_ctx_attributes():
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a, n):
            ctx.n = n
            ctx.anything = {"k": [1, 2]}
            return a * n, n + 1

        @staticmethod
        def backward(ctx, g, _):
            assert ctx.anything == {"k": [1, 2]}
            return g * ctx.n, None

    x = jg.ones(2, requires_grad=True)
    y, m = F.apply(x, 3)
    assert m == 4 and y.grad_fn.name() == "FBackward"
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


# ---- compile


def test_compile_decorator_forms_and_guards():
    @jg.compile(fullgraph=True, backend="eager")
    def f(x, scale, flag=True):
        return x * scale if flag else x + scale

    x = jg.ones(3, requires_grad=True)
    c = f._jitgrad_compiled
    assert f(x, 2.0).tolist() == [2.0] * 3
    assert f(x, 2.0).tolist() == [2.0] * 3
    assert c.entries() == 1
    assert f(x, 3.0).tolist() == [3.0] * 3  # a new non-tensor value re-traces
    assert c.entries() == 2
    assert f(x, 3.0, flag=False).tolist() == [4.0] * 3
    assert c.entries() == 3
    assert "mul_scalar" in c.graph(0)
    g = jg.compile(lambda a, b: (a * b).sum(), backend="inductor")
    a, b = jg.ones(2, requires_grad=True), jg.full((2,), 3.0, requires_grad=True)
    g(a, b).backward()
    assert a.grad.tolist() == [3.0, 3.0] and b.grad.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="unknown backend"):
        jg.compile(lambda a: a, backend="nope")


def test_compile_tensor_branching():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x * 3

    with pytest.raises(RuntimeError, match="traced tensor"):
        jg.compile(f, fullgraph=True)(jg.ones(2))
    cf = jg.compile(f)  # two graphs around the read, each call
    assert cf(jg.ones(2)).tolist() == [2.0, 2.0]
    assert cf(-jg.ones(2)).tolist() == [-3.0, -3.0]
    assert cf._jitgrad_compiled.fallbacks() == 0
    assert cf._jitgrad_compiled.graphs_run() == 4
    assert len(cf._jitgrad_compiled.breaks()) == 1


def test_compile_returns_structure():
    f = jg.compile(lambda x: (x * 2, 5, x.sum()), fullgraph=True)
    a, five, s = f(jg.ones(2))
    assert five == 5 and a.tolist() == [2.0, 2.0] and s.item() == 2.0
    a, five, s = f(jg.ones(2))  # cached entry: same structure
    assert five == 5 and s.item() == 2.0


# ---- reference counting


def rss_kb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def growth(step, n):
    for _ in range(n // 10):  # warm up allocator pools
        step()
    gc.collect()
    before = rss_kb()
    for _ in range(n):
        step()
    gc.collect()
    return rss_kb() - before


def test_million_small_ops_do_not_grow_memory():
    x = jg.ones(4, requires_grad=True)
    y = jg.ones(4)

    def step():
        (x * y + 1.0).sum()

    assert growth(step, 1_000_000 // 3) < 4096  # three ops a step: a million ops


def test_custom_function_and_backward_loop_does_not_leak():
    class F(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, flag):
            ctx.save_for_backward(a, b)
            ctx.flag = flag
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a, None

    x = jg.ones(8, requires_grad=True)

    def step():
        F.apply(x, x, True).sum().backward()
        x.grad = None

    assert growth(step, 30_000) < 4096


def test_compiled_loop_does_not_leak():
    f = jg.compile(lambda a, b: (a * b).exp().sum(), fullgraph=True)
    a, b = jg.ones(8, requires_grad=True), jg.ones(8)

    def step():
        f(a, b).backward()
        a.grad = None

    assert growth(step, 20_000) < 4096
