"""A compiled function run in pieces (a value read splits it) that calls a
custom Function with an object argument holding a tensor (Box(t=v)); a
create_graph backward through an EARLIER call's graph, after later calls,
runs that call's custom forward again and needs that call's Box.

Regression (fuzz seeds 3402457, 3702919, 3802979): the pieces path kept a
call's object arguments only until the next call, so the rerun raised
"cannot rebuild the argument Box@...#N of a custom function called outside
its Python call" where eager succeeds.  The objects now live as long as
the custom call's ctx in the compiled graph that may rerun it, copied with
the tensors the trace lifted left out, so they are no reference cycle
through that graph: everything is freed once the program's tensors go."""
import gc
import weakref

import pytest

N = 24  # (tensors of 64 bytes or less are not counted by memory_allocated)


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def make_fn(T, read_in_forward, save_object_tensor, boxes=None):
    class F0(T.autograd.Function):
        @staticmethod
        def forward(ctx, a0, k1, a2):
            # a read inside forward makes the traced call opaque (seeds
            # 3402457, 3702919): it then runs eagerly inside the compiled call
            sign = (1.0 if float(a0.detach().sum()) >= 0 else -1.0) if read_in_forward else 1.0
            ctx.sign = sign
            bt = k1.t * 1.0
            t0 = (a0.tanh() * bt) * sign
            # (the seeds save it: see test_pieces_saved_object_tensor_frees_all)
            ctx.save_for_backward(a0, a2, *([k1.t] if save_object_tensor else []))
            return t0, bt

        @staticmethod
        def backward(ctx, g0, g1):
            s0, s2, *st = ctx.saved_tensors
            st = st[0] if st else s0
            return (g0 * st.tanh() + g0 - s2) * ctx.sign, None, (g0 * s0 + g1 * s2.tanh()) * ctx.sign

    def fn(x, y):
        v = y * (1.0 if float(y.detach().sum()) > 0 else -2.0)  # the read: pieces
        bx = Box(t=v)
        if boxes is not None:
            boxes.append(weakref.ref(bx))
        t0, bt = F0.apply(x.contiguous(), bx, v)
        return t0 * 2.0, bt.sigmoid()

    return fn


def leaf(T, key):
    vals = [((i * 7 + key * 3) % 11 - 5) * 0.19 for i in range(N)]
    return T.tensor(vals, dtype=T.float32).requires_grad_()


def run(T, backend, read_in_forward, pattern, save_object_tensor=True, boxes=None):
    fn = make_fn(T, read_in_forward, save_object_tensor, boxes)
    if backend:
        fn = T.compile(fn, backend=backend)
    x0, y0, y1, y2 = leaf(T, 0), leaf(T, 1), leaf(T, 2), leaf(T, 3)
    w = T.tensor([((i * 5) % 7 - 3) * 0.25 + 0.125 for i in range(N)], dtype=T.float32)
    a, b = fn(x0, y0)
    ((a + b) * w).sum().backward(retain_graph=True)
    if pattern == "feed":
        # seeds 3402457, 3702919: the later call's input is the earlier call's
        # output, and the double backward runs through both calls
        c, d = fn(b, y1)
        loss = ((c + d) * w).sum()
        ins = [x0, y0, y1]
    elif pattern == "now":
        # before any later call (the objects were always found then)
        loss = ((a + b) * w).sum()
        ins = [x0, y0]
    else:
        # seed 3802979 (and more): later calls that do not feed it, then the
        # double backward through the first call's graph alone
        for y in (y1, y2, y1):
            fn(x0 * 0.5, y)
        loss = ((a + b) * w).sum()
        ins = [x0, y0]
    gs = T.autograd.grad(loss, ins, create_graph=True, allow_unused=True)
    s = sum((g * g).sum() for g in gs if g is not None)
    s.backward()
    return [None if g is None else g.tolist() for g in gs], [t.grad.tolist() for t in ins]


CASES = [(r, p) for r in (True, False) for p in ("feed", "later", "now")]


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("read_in_forward,pattern", CASES)
def test_pieces_rerun_custom_object_after_later_calls(jg, backend, read_in_forward, pattern):
    assert run(jg, backend, read_in_forward, pattern) == run(jg, None, read_in_forward, pattern)


@pytest.mark.parametrize("read_in_forward,pattern", CASES)
def test_pieces_rerun_custom_object_after_later_calls_vs_torch(jg, torch, read_in_forward,
                                                               pattern):
    got = run(jg, "c", read_in_forward, pattern)
    ref = run(torch, None, read_in_forward, pattern)
    flat = lambda r: [v for part in r for g in part if g is not None for v in g]  # noqa: E731
    assert flat(got) == pytest.approx(flat(ref), rel=1e-5, abs=1e-5)


def live_boxes():
    return sum(isinstance(o, Box) for o in gc.get_objects())


def frees_all(jg, backend, read_in_forward, pattern, save_object_tensor):
    gc.collect()
    base, base_boxes = jg.memory_allocated(), live_boxes()
    boxes = []
    run(jg, None, read_in_forward, pattern, save_object_tensor, boxes)
    gc.collect()
    assert jg.memory_allocated() == base
    assert boxes and all(r() is None for r in boxes)
    for _ in range(2):
        boxes = []
        run(jg, backend, read_in_forward, pattern, save_object_tensor, boxes)
        gc.collect()
        assert jg.memory_allocated() == base
        assert boxes and all(r() is None for r in boxes)
        assert live_boxes() == base_boxes  # (the copies kept for a rerun too)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("read_in_forward,pattern", CASES)
def test_pieces_rerun_custom_object_frees_all(jg, backend, read_in_forward, pattern):
    """The objects kept for a rerun, and the graphs that keep them, are
    freed with the program's tensors and the compiled function; the Boxes
    themselves live no longer than in eager mode."""
    frees_all(jg, backend, read_in_forward, pattern, save_object_tensor=read_in_forward)


@pytest.mark.parametrize("pattern", ["now", "later"])
def test_pieces_saved_object_tensor_frees_all(jg, pattern):
    """Regression: a traced custom call in a piece saving a tensor of the
    piece reached through an object argument made a reference cycle
    (entry -> call ctx -> saved tensor -> piece node -> entry)."""
    frees_all(jg, "interp", False, pattern, save_object_tensor=True)


def run_shared_box(T, backend):
    """One Box given to every call, its scalar changed between calls: the
    rerun of the latest call's forward reads it as that call did, though the
    earlier call's graph, alive, keeps it as well."""

    class F1(T.autograd.Function):
        @staticmethod
        def forward(ctx, a0, k1):
            bt = k1.t * k1.scale
            ctx.save_for_backward(a0, bt)
            return a0.tanh() * bt

        @staticmethod
        def backward(ctx, g0):
            s0, sb = ctx.saved_tensors
            return g0 * sb * (1.0 - s0.tanh() ** 2), None

    box = Box(scale=2.0)

    def fn(x, y):
        v = y * (1.0 if float(y.detach().sum()) > 0 else -2.0)
        box.t = v
        return F1.apply(x, box)

    if backend:
        fn = T.compile(fn, backend=backend)
    x, y = leaf(T, 0), leaf(T, 1)
    first = fn(x, y)  # (its graph alive: it holds the Box as the first call saw it)
    box.scale = 3.0
    out = fn(x, y)
    (g,) = T.autograd.grad((out * out).sum(), [x], create_graph=True)
    (g * g).sum().backward()
    return g.tolist(), x.grad.tolist(), y.grad, first.tolist()


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_pieces_rerun_shared_object_reads_latest_call(jg, backend):
    assert run_shared_box(jg, backend) == run_shared_box(jg, None)


class NoCopy:
    def __init__(self, t):
        self.t = t

    def __copy__(self):
        raise TypeError("no copies")


def test_pieces_rerun_uncopyable_object_is_a_clear_error(jg):
    """An object holding a lifted tensor that copy.copy refuses cannot be
    kept without the tensor (a cycle through the graph): the call runs, and
    a rerun fails naming the object, with nothing else changed."""

    class F2(jg.autograd.Function):
        @staticmethod
        def forward(ctx, a, k):
            ctx.save_for_backward(a)
            return a.tanh() * k.t

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * (1 - a.tanh() ** 2), None

    def fn(x, y):
        v = y * (1.0 if float(y.detach().sum()) > 0 else -2.0)
        return F2.apply(x, NoCopy(v))

    f = jg.compile(fn, backend="interp")
    x, y = leaf(jg, 0), leaf(jg, 1)
    out = f(x, y)
    assert out.tolist() == fn(x, y).tolist()
    with pytest.raises(RuntimeError, match=r"cannot rebuild the argument .*NoCopy@0x"):
        jg.autograd.grad(out.sum(), [x], create_graph=True)
    (g,) = jg.autograd.grad(out.sum(), [x])  # (the graph is intact)
    (ge,) = jg.autograd.grad(fn(x, y).sum(), [x])
    assert g.tolist() == ge.tolist()
