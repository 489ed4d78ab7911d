"""Eager details that follow PyTorch exactly: each test runs one small
program under PyTorch (the reference) and under jitgrad and compares what
the user sees (values bit for bit via repr, shapes, dtypes, requires_grad,
gradients, None vs tensor, error types)."""
import gc
import math

import numpy as np
import pytest


def norm(v):
    """Comparable form: tensors -> nested lists of repr'd floats, dtypes -> names."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if hasattr(v, "tolist") and hasattr(v, "requires_grad"):
        return {"values": norm(v.detach().clone().tolist()), "shape": list(v.shape),
                "dtype": str(v.dtype).split(".")[-1], "requires_grad": v.requires_grad}
    return str(v).split(".")[-1]


def same(torch, jg, program):
    want, got = norm(program(torch)), norm(program(jg))
    assert got == want


def grad_of(x):
    return None if x.grad is None else x.grad.tolist()


# ---- 12: tensor() and from_numpy ----


def test_tensor_float64_from_python_floats_is_exact(torch, jg):
    same(torch, jg, lambda T: T.tensor([0.1, 1 / 3], dtype=T.float64))
    same(torch, jg, lambda T: T.tensor(0.1, dtype=T.float64))
    same(torch, jg, lambda T: T.tensor([[0.1], [2.5]], dtype=T.float64, requires_grad=True))
    assert jg.tensor([0.1], dtype=jg.float64).tolist() == [0.1]


def test_tensor_int_dtype_from_floats_truncates(torch, jg):
    same(torch, jg, lambda T: T.tensor([1.7, -2.7], dtype=T.int64))


def test_tensor_of_numpy_scalars_and_0d_arrays_is_0d(torch, jg):
    same(torch, jg, lambda T: T.tensor(np.float32(2)))
    same(torch, jg, lambda T: T.tensor(np.float64(0.1)))
    same(torch, jg, lambda T: T.tensor(np.int64(3)))
    same(torch, jg, lambda T: T.tensor(np.array(3.5)))
    same(torch, jg, lambda T: T.tensor(np.array(3.5, dtype=np.float32)))
    same(torch, jg, lambda T: T.from_numpy(np.array(3.5)))


def test_from_numpy_shares_memory(torch, jg):
    def program(T):
        a = np.zeros(3, dtype=np.float32)
        t = T.from_numpy(a)
        a[1] = 5
        t[0] = 7
        t.add_(1)
        return t, a.tolist()

    same(torch, jg, program)


def test_from_numpy_strided_and_dtypes(torch, jg):
    for dt in (np.float32, np.float64, np.int64):
        same(torch, jg, lambda T: T.from_numpy(np.arange(6, dtype=dt).reshape(2, 3).T))
    a = np.arange(6.0).reshape(2, 3).T
    t = jg.from_numpy(a)
    assert t.stride() == (1, 3)
    a[0, 1] = 100
    assert t[0, 1].item() == 100


def test_from_numpy_keeps_the_array_alive(jg):
    t = jg.from_numpy(np.arange(4.0))
    v = t[1:]
    del t
    gc.collect()
    assert v.tolist() == [1.0, 2.0, 3.0]
    assert (v * 2).tolist() == [2.0, 4.0, 6.0]


def test_from_numpy_negative_strides_refused(torch, jg):
    for T in (torch, jg):
        with pytest.raises(ValueError, match="negative"):
            T.from_numpy(np.arange(4.0)[::-1])


def test_non_native_byte_order(torch, jg):
    for dt, want in ((">f4", jg.float32), (">f8", jg.float64), (">i8", jg.int64),
                     (">i4", jg.int64)):
        a = np.arange(3).astype(dt)
        t = jg.tensor(a)  # converted (PyTorch refuses these too)
        assert t.dtype is want and t.tolist() == [0, 1, 2]
        for T in (torch, jg):
            with pytest.raises(ValueError, match="byte order"):
                T.from_numpy(a)


def test_from_numpy_int32_and_bool_keep_their_dtype(jg):
    # as PyTorch: int32 and bool arrays give int32 and bool tensors
    t = jg.from_numpy(np.array([1, 2], dtype=np.int32))
    assert t.dtype is jg.int32 and t.tolist() == [1, 2]
    b = jg.from_numpy(np.array([True, False]))
    assert b.dtype is jg.bool and b.tolist() == [True, False]


# ---- 13: views, custom functions, relu ----


def test_view_taken_under_no_grad_sends_no_gradient_to_base(torch, jg):
    def program(T):
        x = T.ones(3, requires_grad=True)
        w = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        with T.no_grad():
            v = x[:]
            u = x[1:]
        r = [v.requires_grad, v.is_leaf, v.grad_fn is None, u.requires_grad]
        (v * w).sum().backward()
        return r, grad_of(x), grad_of(v), grad_of(w)

    same(torch, jg, program)


def test_view_taken_under_no_grad_refuses_inplace_with_grad_mode(torch, jg):
    def program(T):
        x = T.ones(3, requires_grad=True)
        y = x * 2
        out = []
        with T.no_grad():
            v = x[:2]
            u = y[1:]
        for t in (v, u):
            with pytest.raises(RuntimeError) as e:
                t.mul_(2)
            out.append(str(e.value))
        with T.no_grad():
            u.mul_(3)
        return out, y

    same(torch, jg, program)


def test_function_returning_view_under_no_grad(torch, jg):
    def program(T):
        class View(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x[:]

            @staticmethod
            def backward(ctx, g):
                return g

        x = T.ones(3, requires_grad=True)
        with T.no_grad():
            y = View.apply(x)
            z = x[:]
        return y.requires_grad, z.requires_grad, y.grad_fn is None, z.grad_fn is None

    same(torch, jg, program)


def test_grad_fn_class_is_named_after_the_function(torch, jg):
    def program(T):
        class MyId(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g

        x = T.ones(2, requires_grad=True)
        y = MyId.apply(x)
        return type(y.grad_fn).__name__, type((x * x).grad_fn).__name__

    same(torch, jg, program)


def test_function_with_backward_and_vjp_is_refused(torch, jg):
    def program(T):
        class Both(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g

            @staticmethod
            def vjp(ctx, g):
                return g

        x = T.ones(2, requires_grad=True)
        y = Both.apply(x)
        with pytest.raises(RuntimeError) as e:
            y.sum().backward()
        return str(e.value)

    same(torch, jg, program)


def test_function_with_vjp_only(torch, jg):
    def program(T):
        class V(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def vjp(ctx, g):
                return g * 3

        x = T.ones(2, requires_grad=True)
        V.apply(x).sum().backward()
        return grad_of(x)

    same(torch, jg, program)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_nan_and_negative_zero(torch, jg, dtype):
    def program(T):
        x = T.tensor([math.nan, -0.0, 0.0, 1.0, -1.0], dtype=getattr(T, dtype),
                     requires_grad=True)
        y = T.relu(x)
        y.sum().backward()
        return y, grad_of(x), T.relu(T.tensor(-0.0, dtype=getattr(T, dtype)))

    same(torch, jg, program)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_relu_nan_and_negative_zero_compiled(jg, backend):
    def f(x):
        return T_relu(x) * 2

    T_relu = jg.relu
    x = jg.tensor([math.nan, -0.0, 0.0, 1.0, -1.0], requires_grad=True)
    y = f(x)
    y.sum().backward()
    want = (repr(y.tolist()), repr(x.grad.tolist()))
    x2 = jg.tensor([math.nan, -0.0, 0.0, 1.0, -1.0], requires_grad=True)
    y2 = jg.compile(f, fullgraph=True, backend=backend)(x2)
    y2.sum().backward()
    assert (repr(y2.tolist()), repr(x2.grad.tolist())) == want


# ---- 13b ----


def test_mark_non_differentiable_twice_replaces(torch, jg):
    def program(T):
        class F(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                a, b = x * 2, x * 3
                ctx.mark_non_differentiable(a)
                ctx.mark_non_differentiable(b)
                return a, b

            @staticmethod
            def backward(ctx, ga, gb):
                return ga

        x = T.ones(3, requires_grad=True)
        a, b = F.apply(x)
        a.sum().backward()
        return a.requires_grad, b.requires_grad, grad_of(x)

    same(torch, jg, program)


def test_zero_keeps_requires_grad(torch, jg):
    def program(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.zero_()
        r = [y.requires_grad, type(y.grad_fn).__name__, y]
        (y + x).sum().backward()
        with T.no_grad():
            z = x * 1
            z.zero_()
        return r, grad_of(x), z.requires_grad

    same(torch, jg, program)


def test_second_derivative_of_abs_and_relu_is_zeros(torch, jg):
    def program(T):
        out = []
        for f in (T.abs, T.relu):
            p = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
            y = f(p.mean())
            g, = T.autograd.grad(y, p, create_graph=True)
            g2, = T.autograd.grad(g.sum(), p, allow_unused=True)
            out += [g, g2]
            q = T.tensor([1.0, -2.0, 0.0], requires_grad=True)
            g, = T.autograd.grad(f(q).sum(), q, create_graph=True)
            g2, = T.autograd.grad(g.sum(), q, allow_unused=True)
            out += [g, g2]
        return out

    same(torch, jg, program)


def test_max_with_ties_splits_the_gradient_evenly(torch, jg):
    def program(T):
        out = []
        for vals in ([1.0, 3.0, 3.0, 2.0], [3.0, 3.0, 3.0], [[1.0, 5.0], [5.0, 0.0]],
                     [1.0, math.nan, 2.0, math.nan], [4.0]):
            x = T.tensor(vals, requires_grad=True)
            m = x.max()
            (m * 3).backward()
            out += [m, grad_of(x)]
        x = T.tensor([[1.0, 3.0], [3.0, 3.0]], requires_grad=True)
        v, i = x.max(1)
        v.sum().backward()
        return out + [v, i, grad_of(x)]

    same(torch, jg, program)


def test_max_with_ties_double_backward(torch, jg):
    def program(T):
        x = T.tensor([1.0, 3.0, 3.0], requires_grad=True)
        g, = T.autograd.grad(x.max() * 2, x, create_graph=True)
        (g * x).sum().backward()
        return g, grad_of(x)

    same(torch, jg, program)


def test_div_inplace_with_history(torch, jg):
    def program(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        q = T.tensor([2.0, 4.0], requires_grad=True)
        y = x * 3
        y.div_(q)
        y2 = x * 1
        y2 /= q
        y3 = x + 1
        y3 /= 4.0
        r = [type(y.grad_fn).__name__, type(y2.grad_fn).__name__, y, y2, y3]
        (y.sum() + y2.sum() + y3.sum()).backward()
        return r, grad_of(x), grad_of(q)

    same(torch, jg, program)


def test_div_inplace_on_int64_refused(torch, jg):
    for T in (torch, jg):
        x = T.tensor([4, 6])
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
            x /= 2
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
            x.div_(T.tensor([2, 3]))
        assert x.tolist() == [4, 6]


def test_inplace_on_max_values_keeps_backward(torch, jg):
    def program(T):
        x = T.tensor([[1.0, 3.0], [4.0, 2.0]], requires_grad=True)
        v, i = x.max(1)
        v.mul_(2)
        v.sum().backward()
        return v, grad_of(x)

    same(torch, jg, program)


def test_double_backward_of_identity_function_that_saved_its_input(torch, jg):
    def program(T):
        class Id(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * x

        x = T.tensor([1.0, 2.0], requires_grad=True)
        y = Id.apply(x)
        g, = T.autograd.grad(y.sum(), x, create_graph=True)
        g.sum().backward()
        return g, grad_of(x)

    same(torch, jg, program)


def test_elementwise_results_keep_the_operands_layout(torch, jg):
    def program(T):
        a = T.ones(2, 3).t()
        out = []
        for f in (lambda: a + a, lambda: a * 2, lambda: a.exp(), lambda: a + T.ones(3, 2),
                  lambda: T.ones(3, 2) + a, lambda: a + T.ones(2), lambda: a + T.ones(3, 1),
                  lambda: T.relu(a), lambda: -a,
                  lambda: T.ones(1, 2, 1) + T.ones(4, 1, 1),  # contiguous, yet transposed
                  lambda: a.permute(1, 0).unsqueeze(0) * T.ones(3, 1, 1)):
            c = f()
            try:
                c.view(6)
                ok = "ok"
            except RuntimeError as e:
                ok = str(e)[:60]
            out.append([[st for st, n in zip(c.stride(), c.shape) if n != 1], ok])
        return out

    same(torch, jg, program)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_max_with_ties_compiled_equals_eager(jg, backend):
    def f(x, w):
        return (x * w).max() * 3 + jg.relu(x).max()

    def run(fn):
        x = jg.tensor([[1.0, 3.0], [3.0, 2.0]], requires_grad=True)
        w = jg.tensor([1.0, 1.0], requires_grad=True)
        y = fn(x, w)
        y.backward()
        return repr(y.item()), repr(x.grad.tolist()), repr(w.grad.tolist())

    want = run(f)
    assert want[1] == repr([[0.0, 2.0], [2.0, 0.0]])
    assert run(jg.compile(f, fullgraph=True, backend=backend)) == want


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_transposed_elementwise_results_compiled_equal_eager(jg, backend):
    def f(x, w):
        return ((x.t() * 2 + 1) @ w).exp().sum()

    def run(fn):
        jg.manual_seed(3)
        x = jg.randn(9, 5, requires_grad=True)
        w = jg.randn(9, 4, requires_grad=True)
        fn(x, w).backward()
        return repr(x.grad.tolist()), repr(w.grad.tolist())

    assert run(jg.compile(f, fullgraph=True, backend=backend)) == run(f)
