"""In-place ops (add_ sub_ mul_ zero_ copy_, +=, -=, *=) on views and bases,
eager and compiled: jitgrad eager against PyTorch eager (values and
gradients to float32 rounding), and compiled (interp and c, fullgraph)
against jitgrad eager, bitwise."""
import pytest


def leaves(T, n=4):
    p = T.tensor([1.5, -2.0, 0.25, 3.0][:n], requires_grad=True)
    q = T.tensor([0.5, 3.0, -1.5, 2.0][:n], requires_grad=True)
    return p, q


# Each program gets two leaves and returns a tensor; the harness also
# backpropagates its sum.

def view_taken_before_base_write(T, p, q):
    base = p * 1
    v = base[0:2]
    base.mul_(q)
    return v * 1


def write_into_view(T, p, q):
    base = p * 1
    v = base[0:2]
    v.mul_(q[0:2])
    base[2:3].add_(q[2:3])
    return base * base


def write_into_view_chain(T, p, q):
    base = p * 1
    row = base.view(2, 2).t()[0]
    row *= q[1:3]
    return base * q


def augmented_assignments(T, p, q):
    t = p * q
    t += q
    t -= p
    t *= 2.0
    t *= q
    t[1:3].zero_()
    t[0:1].copy_(p[3:4])
    return t


def view_of_view_sees_writes(T, p, q):
    base = q * 2
    v = base[1:4]
    w = v[0:2]
    base += p
    w.mul_(p[0:2])
    return v * w.sum()


def zero_then_add(T, p, q):
    t = p * q
    t.zero_()
    t += q
    s = (p * 2).sum()
    s.zero_()
    return t * (s + 1)


def setitem(T, p, q):
    base = p * 2
    row = base[1:3]
    base[1:3] = q[0:2] * 3
    base[0] = 5.0
    return base * q + row.sum()


PROGRAMS = [view_taken_before_base_write, write_into_view, write_into_view_chain,
            augmented_assignments, view_of_view_sees_writes, zero_then_add, setitem]


def run(T, prog, mode):
    p, q = leaves(T)

    def f(a, b):
        return prog(T, a, b)

    if mode != "eager":
        f = T.compile(f, fullgraph=True, backend=mode)
    out = f(p, q)
    out.sum().backward()
    return out.detach().tolist(), [None if x.grad is None else x.grad.tolist() for x in (p, q)]


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return abs(a - b) <= 2e-6 + 2e-5 * abs(b)


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_inplace_eager_matches_torch(torch, jg, prog):
    want = run(torch, prog, "eager")
    got = run(jg, prog, "eager")
    assert close(got[0], want[0]), (got, want)
    assert close(got[1], want[1]), (got, want)


@pytest.mark.parametrize("mode", ["interp", "c"])
@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.__name__)
def test_inplace_compiled_matches_eager(jg, prog, mode):
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    assert run(jg, prog, mode) == run(jg, prog, "eager")


def write_input(x, q):
    v = x[0:2]
    x.mul_(q)
    v -= q[2:4]
    x *= 0.5
    return (x * q).sum(), x


@pytest.mark.parametrize("mode", ["eager", "interp", "c"])
def test_inplace_on_compiled_input(torch, jg, mode):
    """The written input comes back written (same object, bumped version),
    and gradients flow through its new history as in PyTorch."""
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")

    def go(T, mode):
        p, q = leaves(T)
        x = p * 1
        f = write_input if mode == "eager" else T.compile(write_input, fullgraph=True,
                                                          backend=mode)
        v0 = x._version
        s, x2 = f(x, q)
        assert x2 is x and x._version > v0
        (s + (x * x).sum()).backward()
        return x.tolist(), s.item(), p.grad.tolist(), q.grad.tolist(), x._version - v0

    want = go(torch, "eager")
    got = go(jg, mode)
    assert close(list(got[:1]) + [got[1]], list(want[:1]) + [want[1]])
    assert close(got[2], want[2]) and close(got[3], want[3])
    if mode != "eager":
        assert got == go(jg, "eager")


@pytest.mark.parametrize("mode", ["interp", "c"])
def test_inplace_on_compiled_leaf_input_refused(torch, jg, mode):
    if mode == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")
    msg = "a leaf Variable that requires grad is being used in an in-place operation."
    p, q = leaves(torch)
    with pytest.raises(RuntimeError, match=msg):
        write_input(p, q)
    p, q = leaves(jg)
    f = jg.compile(write_input, fullgraph=True, backend=mode)
    with pytest.raises(RuntimeError, match=msg):
        f(p, q)
    assert p.tolist() == [1.5, -2.0, 0.25, 3.0]
    # without grad mode (an optimizer step) it is allowed
    with jg.no_grad():
        f(p, q)
    assert p.tolist() != [1.5, -2.0, 0.25, 3.0]


def test_inplace_into_expand_refused(torch, jg):
    for T in (torch, jg):
        a = T.zeros(1).expand(3)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                               "refers to a single memory location"):
            a.add_(T.ones(3))


def test_copy_between_overlapping_views(torch, jg):
    for T in (torch, jg):
        x = T.tensor([float(i) for i in range(6)])
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the "
                                               "written-to tensor refer to a single memory"):
            x[1:5].copy_(x[0:4])
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_inplace_on_view_of_leaf_refused(torch, jg):
    for T in (torch, jg):
        p = T.zeros(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad "
                                               "is being used in an in-place operation."):
            p[0:2].mul_(2)


def dirty_function(T):
    class Double(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_dirty(x)
            x.mul_(2)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return Double


@pytest.mark.parametrize("as_view", [False, True])
def test_mark_dirty(torch, jg, as_view):
    """The dirty input comes back as itself with the call's history (through
    its base for a view: CopySlices)."""
    def go(T):
        p = T.tensor([1.0, 2.0, 3.0], requires_grad=True)
        b = p * 1
        x = b[0:2] if as_view else b
        o = dirty_function(T).apply(x)
        assert o is x
        (b * T.tensor([1.0, 10.0, 100.0])).sum().backward()
        return b.tolist(), p.grad.tolist()

    assert go(jg) == go(torch)


def test_mark_dirty_leaf_refused(torch, jg):
    for T in (torch, jg):
        p = T.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used "
                                               "in an in-place operation."):
            dirty_function(T).apply(p)


def random_program(seed):
    """A short random program of in-place writes into a 4x3 base and views of
    it (slices, a transpose, a row), read back through views taken before the
    writes.  Returns fn(T, p, q) -> tensor; p is [4, 3], q is [12]."""
    import random

    rnd = random.Random(seed)
    steps = []
    for _ in range(rnd.randint(2, 6)):
        steps.append((rnd.choice(["base", "rows", "col", "t_row", "flat"]),
                      rnd.choice(["add_", "sub_", "mul_", "zero_", "copy_", "iadd", "imul",
                                  "setitem", "scalar"]),
                      rnd.randint(0, 5)))

    def view(T, base, which):
        if which == "base":
            return base
        if which == "rows":
            return base[1:3]
        if which == "col":
            return base.t()[1]
        if which == "t_row":
            return base.t()[0:2].t()[2]
        return base.view(12)[2:8]

    def fn(T, p, q, base_given=False):
        base = p if base_given else p * 1
        early = base[0:2]  # taken before any write
        for which, op, k in steps:
            v = view(T, base, which)
            n = v.numel()
            other = (q[k:k + n] * 0.5 + 0.25).view(v.shape) if n + k <= 12 else \
                (q[0:n] * 1.5).view(v.shape)
            if op == "add_":
                v.add_(other)
            elif op == "sub_":
                v.sub_(other)
            elif op == "mul_":
                v.mul_(other)
            elif op == "zero_":
                v.zero_()
            elif op == "copy_":
                v.copy_(other)
            elif op == "iadd":
                v += other
            elif op == "imul":
                v *= other
            elif op == "setitem":
                v[0:1] = other[0:1] * 2
            else:
                v.mul_(1.5)
        return base * early.sum() + early.sum(0).sum()

    return fn


def run_random(T, seed, mode, base_input=False):
    """base_input: the base is the program's input (written back after a
    compiled call) rather than made inside it."""
    p = T.tensor([[0.5 * i - 2.0 + 0.25 * j for j in range(3)] for i in range(4)],
                 requires_grad=True)
    q = T.tensor([0.3 * i - 1.0 for i in range(12)], requires_grad=True)
    prog = random_program(seed)

    def f(a, b):
        return prog(T, a, b, base_given=base_input)

    if mode != "eager":
        f = T.compile(f, fullgraph=True, backend=mode)
    x = p * 1 if base_input else p
    out = f(x, q)
    loss = out.sum() + (x * x).sum() if base_input else out.sum()
    loss.backward()
    res = [out.detach().tolist(), x.tolist()]
    return res, [None if t.grad is None else t.grad.tolist() for t in (p, q)]


@pytest.mark.parametrize("base_input", [False, True], ids=["inner", "input"])
@pytest.mark.parametrize("seed", range(40))
def test_random_inplace_programs(torch, jg, seed, base_input):
    want = run_random(torch, seed, "eager", base_input)
    got = run_random(jg, seed, "eager", base_input)
    assert close(got[0], want[0]) and close(got[1], want[1]), (got, want)
    assert run_random(jg, seed, "interp", base_input) == got
    if jg.HAS_COMPILER:
        assert run_random(jg, seed, "c", base_input) == got
