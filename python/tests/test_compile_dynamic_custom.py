"""Dynamic sizes through custom autograd.Functions: the seed program (k in
two slots, a backward that returns different per-slot gradients) runs every
batch size from one graph after the second size (dynamic=None) or the first
(dynamic=True), gradients bitwise eager's at every size and k.grad = dk + dv;
sizes a Function keeps in its ctx are fitted like any other; a comparison
of sizes in its backward with a result that depends on the size keeps the
dims static; the GPT example's custom attention trains with a changing
batch size from at most two traces."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BACKENDS = ["interp", "c"]
BATCHES = [4, 7, 3, 9, 16]


def need(jg, backend):
    if backend == "c" and not jg.HAS_COMPILER:
        pytest.skip("no C compiler")


def seed_fn(T):
    class MyFn(T.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, mask_v_grad: bool):
            ctx.save_for_backward(q, k, v)
            ctx.mask_v_grad = mask_v_grad
            return q * (k + v)

        @staticmethod
        def backward(ctx, dout):
            q, k, v = ctx.saved_tensors
            dq = dout * (k + v)
            dk = dout * q
            dv = dout * q
            if ctx.mask_v_grad:
                dk = dk + dv  # bwd pre-aggregates; returns None for v slot
                return dq, dk, None, None
            return dq, dk, dv, None

    return MyFn


def b(t):
    return t.detach().numpy().tobytes()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("mask", [True, False])
def test_seed_program_every_batch_size_one_graph(jg, backend, dynamic, mask):
    need(jg, backend)
    MyFn = seed_fn(jg)

    def f(q, k):
        return MyFn.apply(q, k, k, mask).sum()  # same tensor k at slots 2 AND 3

    cf = jg.compile(f, fullgraph=True, dynamic=dynamic, backend=backend)
    for i, n in enumerate(BATCHES):
        jg.manual_seed(n)
        q = jg.randn(n, 16, requires_grad=True)
        k = jg.randn(n, 16, requires_grad=True)
        want = f(q, k)
        want.backward()
        gq, gk = b(q.grad), b(k.grad)
        q.grad = k.grad = None
        got = cf(q, k)
        assert b(got) == b(want), n
        got.backward()
        assert b(q.grad) == gq, n
        assert b(k.grad) == gk, n
        assert b(k.grad) == b(2 * q), n  # dk + dv (or dk + dv pre-added): q + q
        entries = cf._jitgrad_compiled.entries()
        assert entries == (1 if dynamic or i == 0 else 2), (n, entries)
    assert cf._jitgrad_compiled.fallbacks() == 0


def run_logged(src):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                       text=True, env={**os.environ, "JITGRAD_LOG": "recompiles"}, timeout=300)
    assert p.returncode == 0, p.stderr
    return [line for line in p.stderr.splitlines() if line.startswith("jitgrad:")]


def test_log_says_why_dims_stay_static():
    """A comparison the backward makes (its trial run on stand-ins while the
    program is traced records it) with a result that depends on the size:
    with 4 and 7 the traces differ, with 8 and 16 they do not but 3 would
    take the other branch; both keep the dims static.  Without the
    comparison, the dims go dynamic."""
    log = run_logged("""
        import jitgrad as torch

        class MyFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v):
                ctx.save_for_backward(q)
                ctx.B = q.shape[0]
                return q * (k + v)

            @staticmethod
            def backward(ctx, dout):
                q, = ctx.saved_tensors
                return dout * 2.0 if ctx.B > 5 else dout, dout * q, dout * q

        f = torch.compile(lambda q, k: MyFn.apply(q, k, k).sum(), backend="interp")
        for n in [4, 7, 3]:
            f(torch.randn(n, 4, requires_grad=True), torch.randn(n, 4, requires_grad=True))
        g = torch.compile(lambda q, k: MyFn.apply(q, k, k).sum(), backend="interp")
        for n in [8, 16, 3]:
            g(torch.randn(n, 4, requires_grad=True), torch.randn(n, 4, requires_grad=True))

        class Plain(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v):
                ctx.save_for_backward(q)
                return q * (k + v)

            @staticmethod
            def backward(ctx, dout):
                q, = ctx.saved_tensors
                return dout, dout * q, dout * q

        h = torch.compile(lambda q, k: Plain.apply(q, k, k).sum(), backend="interp")
        for n in [4, 7, 3]:
            h(torch.randn(n, 4, requires_grad=True), torch.randn(n, 4, requires_grad=True))
    """)
    assert sum("went dynamic" in line for line in log) == 1, log
    assert "jitgrad: dim 0 of q, dim 0 of k went dynamic (4 -> 7)" in log, log
    assert any("stay static: the program compared sizes with a result that depends on the size "
               "(4 > 5, then 7 > 5)" in line for line in log), log
    assert any("stay static: the program compared sizes with a result that depends on the size "
               "(8 > 5, then 16 > 5)" in line for line in log), log


def kept_sizes_fn(T):
    class ScaledColumnSum(T.autograd.Function):
        """sum over the batch, scaled by n ** -0.5; the backward rebuilds
        the input's shape from sizes kept in the ctx, not from a tensor."""

        @staticmethod
        def forward(ctx, x):
            ctx.B, ctx.n = x.shape
            ctx.scale = x.size(-1) ** -0.5
            return x.sum(0) * ctx.scale

        @staticmethod
        def backward(ctx, g):
            return g.view(1, ctx.n).expand(ctx.B, ctx.n) * ctx.scale

    return ScaledColumnSum


@pytest.mark.parametrize("backend", BACKENDS)
def test_sizes_kept_in_the_ctx_are_fitted(jg, backend):
    """ctx.B is the base trace's batch at every instance unless the
    backward is fitted from both traces: expand(ctx.B, n) would fail or
    give another gradient."""
    need(jg, backend)
    F = kept_sizes_fn(jg)
    w = jg.randn(5, requires_grad=True)

    def f(x):
        return (F.apply(x * w) ** 2).sum()

    cf = jg.compile(f, backend=backend)
    for n in BATCHES:
        x = jg.randn(n, 5, requires_grad=True)
        want = f(x)
        want.backward()
        gx, gw = b(x.grad), b(w.grad)
        x.grad = w.grad = None
        got = cf(x)
        assert b(got) == b(want), n
        got.backward()
        assert (b(x.grad), b(w.grad)) == (gx, gw), n
        w.grad = None
    assert cf._jitgrad_compiled.entries() == 2


def test_backward_comparing_a_size_stays_static(jg):
    """The backward compares the kept batch with 5: true at 8 and 16, so
    both traces make one graph, but false at 3; the comparison keeps the
    dims static and 3 gets its own trace (eager's gradient)."""

    class Branch(jg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.B = x.shape[0]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0 if ctx.B > 5 else g * 3.0

    def f(x):
        return Branch.apply(x).sum()

    cf = jg.compile(f, backend="interp")
    for n in [8, 16, 3]:
        x = jg.randn(n, 2, requires_grad=True)
        cf(x).backward()
        assert b(x.grad) == b(jg.full((n, 2), 2.0 if n > 5 else 3.0)), n
    assert cf._jitgrad_compiled.entries() == 3


def load(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("whole", [False, True])
def test_gpt_custom_attention_changing_batch(jg, whole):
    """The GPT example with attn="custom" (SharedKVAttention.apply(q, k, k,
    scale)): a training loop whose batch is 4, with partial batches of 3
    and 2, traces at most twice, compiled as compile(model) (backward and
    AdamW outside) or as the whole step; losses and parameters bitwise the
    eager loop's."""
    backend = "c" if whole else "interp"
    need(jg, backend)
    M = load("jitgrad_test_gpt_model", "examples/gpt/model.py")
    GPT, _ = M.build(jg)
    cfg = M.GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16,
                      attn="custom")
    runs = []
    for compiled in (False, True):
        jg.manual_seed(3)
        model = GPT(cfg)
        opt = jg.optim.AdamW(model.parameters(), lr=1e-2)
        fwd = jg.compile(model, backend=backend) if compiled and not whole else model

        def step(x, y):
            _, loss = fwd(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        run = jg.compile(step, backend=backend) if compiled and whole else step
        jg.manual_seed(4)
        losses = []
        for n in [4, 4, 3, 4, 2, 4, 3, 4, 2]:
            x, y = jg.randint(0, 32, (n, 8)), jg.randint(0, 32, (n, 8))
            losses.append(b(run(x, y)))
        comp = (run if whole else fwd.forward)._jitgrad_compiled if compiled else None
        runs.append((losses, [b(p) for p in model.parameters()], comp))
    (le, pe, _), (lc, pc, comp) = runs
    assert lc == le
    assert pc == pe
    assert comp.entries() <= 2, comp.entries()


def test_gpt_stats_custom_attention_traces(jg):
    """bench/gpt_stats.py --vary --attn custom (three batch sizes), short:
    at most two graphs per compiled program."""
    cmd = [sys.executable, os.path.join(ROOT, "bench", "gpt_stats.py"), "--steps", "21",
           "--vary", "--attn", "custom", "--layers", "1", "--width", "32", "--block", "16",
           "--modes", "interp,step-c" if jg.HAS_COMPILER else "interp"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [dict(kv.split("=", 1) for kv in line.split()[1:])
             for line in p.stdout.splitlines() if line.startswith("gpt_stats ")]
    assert lines, p.stdout
    for e in lines:
        assert e["attn"] == "custom"
        assert int(e["graphs"]) <= 2, e


def test_dropped_call_fitted_from_a_freed_ctx():
    """Regression (fuzz seed 2500030, then its minimized program): the
    program calls F0 and drops its result.  The compiler removed the dead
    call and freed its ctx while the entry's copy of the traced graph, kept
    for dynamic sizes, still pointed at it: the second size traced F0's
    backward from the freed ctx (SIGSEGV, or a fit failing with garbage).
    Run in a child so that a crash fails the test; each size's outputs and
    gradients are eager's bit for bit and the dims go dynamic at the second
    size."""
    log = run_logged("""
        import gc
        import jitgrad as torch

        class F0(torch.autograd.Function):
            @staticmethod
            def forward(ctx, k0, a1, a2, k3):
                t0 = a1 + a1
                ctx.save_for_backward(a1, a2, t0)
                ctx.k3 = k3
                return t0

            @staticmethod
            def backward(ctx, g0):
                s0, s1, s2 = ctx.saved_tensors
                return None, g0 * s0.tanh() + g0 * s2.tanh(), g0 * 2.0 + g0 * s2, None

        def fn(x0, x1):
            v2 = (x0 / (x1 * x1 + 1.0)).mean()
            F0.apply(None, v2, v2, "one")  # dropped: a dead call
            return x1.tanh()

        def b(t):
            return t.detach().numpy().tobytes()

        for backend in ["interp", "c"]:
            if backend == "c" and not torch.HAS_COMPILER:
                continue
            cf = torch.compile(fn, backend=backend, fullgraph=True)
            for n in [4, 2, 6, 3, 9]:
                x0 = torch.randn(1, requires_grad=True)
                x1 = torch.randn(n, requires_grad=True)
                want = fn(x0, x1)
                want.sum().backward()
                g = b(x1.grad)
                x1.grad = None
                got = cf(x0, x1)
                assert b(got) == b(want), n
                got.sum().backward()
                assert b(x1.grad) == g and x0.grad is None, n
                # reuse the freed memory, as the fuzzer's child did
                junk = [torch.randn(n + 1) for _ in range(50)]
                del junk
                gc.collect()
            assert cf._jitgrad_compiled.entries() == 2, backend

        # the fuzzer's minimized program: the dropped call is all there is
        class Min(torch.autograd.Function):
            @staticmethod
            def forward(ctx, k0, a1, a2, k3):
                return a1

            @staticmethod
            def backward(ctx, g0):
                return None, g0, g0, None

        def fn_min(x0, x1):
            Min.apply(None, x0, x0, "one")

        cf = torch.compile(fn_min, backend="interp")
        for n in [4, 2, 5]:
            x0, x1 = torch.randn(1, requires_grad=True), torch.randn(n, requires_grad=True)
            assert cf(x0, x1) is None, n
        assert cf._jitgrad_compiled.entries() == 2
    """)
    assert sum("went dynamic" in line for line in log) >= 2, log
    assert not any("could not be traced" in line for line in log), log
