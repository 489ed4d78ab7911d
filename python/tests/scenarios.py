"""Scenarios written once against the torch API.  Each is run under PyTorch
(eager: the reference) and under jitgrad (eager, and compiled where the
scenario is a function of its inputs).

A scenario is (inputs, fn): inputs(T) builds the leaf tensors (same values
in both libraries, from Python's random with a fixed seed), fn(T, *leaves)
computes an output; the runner sums the output to a scalar, calls backward
and records the output values and every leaf's .grad (None stays None)."""
import random


def det(T, *shape, seed=0, requires_grad=True, scale=1.0, positive=False, dtype=None):
    rng = random.Random(seed)
    n = 1
    for s in shape:
        n *= s
    vals = [rng.uniform(0.2, 2.0) if positive else rng.uniform(-2.0, 2.0) for _ in range(n)]
    vals = [v * scale for v in vals]
    t = T.tensor(vals, dtype=dtype or T.float32).reshape(*shape) if shape else \
        T.tensor(vals[0], dtype=dtype or T.float32)
    t = t.detach().clone()
    t.requires_grad_(requires_grad)
    return t


# ---------------------------------------------------------------- custom functions

def make_functions(T):
    """The autograd.Function classes of the scenarios, for module T."""
    F = {}

    class MyFn(T.autograd.Function):  # the seed's function
        @staticmethod
        def forward(ctx, q, k, v, mask_v_grad):
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
                dk = dk + dv
                return dq, dk, None, None
            return dq, dk, dv, None

    class FirstNone(T.autograd.Function):  # None in the first aliased slot
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return None, g * a * 3

    class Three(T.autograd.Function):  # three slots, distinct gradients
        @staticmethod
        def forward(ctx, a, b, c):
            return a + 2 * b + 3 * c

        @staticmethod
        def backward(ctx, g):
            return g, g * 2, g * 3

    class Identity(T.autograd.Function):  # forward returns its input unchanged
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    class Mixed(T.autograd.Function):  # non-tensors in any position
        @staticmethod
        def forward(ctx, scale, x, mode, y, nothing, pair):
            ctx.scale = scale
            ctx.mode = mode
            ctx.pair = pair
            ctx.save_for_backward(x, y)
            assert nothing is None and isinstance(mode, str)
            return x * y * scale + pair[0]

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            gx = g * y * ctx.scale
            gy = g * x * ctx.scale if ctx.mode == "both" else None
            return None, gx, None, gy, None, None

    class TwoOut(T.autograd.Function):  # several outputs, one non-differentiable
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            y = x * 2
            idx = x.max(0)[1]
            ctx.mark_non_differentiable(idx)
            return y, x.exp(), idx

        @staticmethod
        def backward(ctx, gy, gexp, gidx):
            assert gidx is None or True
            out = None
            if gy is not None:
                out = gy * 2
            if gexp is not None:
                out = gexp if out is None else out + gexp
            return out

    class NeedsGrad(T.autograd.Function):  # records needs_input_grad
        seen = []

        @staticmethod
        def forward(ctx, a, flag, b):
            NeedsGrad.seen.append(tuple(ctx.needs_input_grad))
            return a * b

        @staticmethod
        def backward(ctx, g):
            NeedsGrad.seen.append(tuple(ctx.needs_input_grad))
            return g * 2, None, g * 3

    class Scalar(T.autograd.Function):  # returns one value for one input
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.tanh()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            t = x.tanh()
            return g * (1 - t * t)

    for c in (MyFn, FirstNone, Three, Identity, Mixed, TwoOut, NeedsGrad, Scalar):
        F[c.__name__] = c
    return F


_FN_CACHE = {}


def fns(T):
    if T.__name__ not in _FN_CACHE:
        _FN_CACHE[T.__name__] = make_functions(T)
    return _FN_CACHE[T.__name__]


# ---------------------------------------------------------------- the scenarios

def v(n, seed, **kw):
    return lambda T: det(T, n, seed=seed, **kw)


SCENARIOS = {
    # ---- the aliasing family (custom functions)
    "seed_mask_true": (lambda T: [det(T, 16, seed=1), det(T, 16, seed=2)],
                       lambda T, q, k: fns(T)["MyFn"].apply(q, k, k, True).sum()),
    "seed_mask_false": (lambda T: [det(T, 16, seed=1), det(T, 16, seed=2)],
                        lambda T, q, k: fns(T)["MyFn"].apply(q, k, k, False).sum()),
    "seed_no_alias": (lambda T: [det(T, 16, seed=1), det(T, 16, seed=2), det(T, 16, seed=3)],
                      lambda T, q, k, v: fns(T)["MyFn"].apply(q, k, v, True).sum()),
    "alias_q_everywhere": (lambda T: [det(T, 8, seed=4)],
                           lambda T, q: fns(T)["MyFn"].apply(q, q, q, False).sum()),
    "alias_first_slot_none": (lambda T: [det(T, 5, seed=5)],
                              lambda T, a: fns(T)["FirstNone"].apply(a, a).sum()),
    "alias_three_slots": (lambda T: [det(T, 6, seed=6)],
                          lambda T, a: fns(T)["Three"].apply(a, a, a)),
    "alias_two_of_three": (lambda T: [det(T, 6, seed=6), det(T, 6, seed=7)],
                           lambda T, a, b: fns(T)["Three"].apply(b, a, a)),
    "alias_plus_fanout": (lambda T: [det(T, 16, seed=1), det(T, 16, seed=2)],
                          lambda T, q, k: (fns(T)["MyFn"].apply(q, k, k, True) * k
                                           + k * 3).sum()),
    "two_functions_share": (lambda T: [det(T, 4, seed=8), det(T, 4, seed=9)],
                            lambda T, a, b: (fns(T)["MyFn"].apply(a, b, b, True)
                                             + fns(T)["FirstNone"].apply(b, a)).sum()),
    "alias_views": (lambda T: [det(T, 2, 3, seed=10)],
                    lambda T, x: fns(T)["Three"].apply(x, x.reshape(2, 3), x * 1).sum()),
    "alias_view_transposed": (lambda T: [det(T, 3, 3, seed=11)],
                              lambda T, x: fns(T)["FirstNone"].apply(x, x.t()).sum()),
    "alias_slot_without_grad": (lambda T: [det(T, 5, seed=12),
                                           det(T, 5, seed=13, requires_grad=False)],
                                lambda T, q, c: fns(T)["MyFn"].apply(q, c, c, False).sum()),
    "identity_forward": (lambda T: [det(T, 4, seed=14)],
                         lambda T, x: (fns(T)["Identity"].apply(x) * x).sum()),
    "mixed_args_both": (lambda T: [det(T, 3, seed=15), det(T, 3, seed=16)],
                        lambda T, x, y: fns(T)["Mixed"].apply(2.5, x, "both", y, None,
                                                              (1.0, 2)).sum()),
    "mixed_args_aliased": (lambda T: [det(T, 3, seed=15)],
                           lambda T, x: fns(T)["Mixed"].apply(-1.0, x, "one", x, None,
                                                              (0.5, 1)).sum()),
    "two_outputs_unused": (lambda T: [det(T, 5, seed=17)],
                           lambda T, x: fns(T)["TwoOut"].apply(x)[0].sum()),
    "two_outputs_both": (lambda T: [det(T, 5, seed=17)],
                         lambda T, x: (lambda r: r[0].sum() + r[1].sum())(
                             fns(T)["TwoOut"].apply(x))),
    "single_return_value": (lambda T: [det(T, 4, seed=18)],
                            lambda T, x: (fns(T)["Scalar"].apply(x) ** 2).sum()),
    "builtin_mul_alias": (lambda T: [det(T, 7, seed=19)], lambda T, x: (x * x).sum()),
    # ---- arithmetic
    "scalars_both_sides": (lambda T: [det(T, 2, 3, seed=20, positive=True)],
                           lambda T, x: (2 + x * 3 - 1.5 / x + (4 - x) / 2 - x - 1)),
    "tensor_binary_broadcast": (lambda T: [det(T, 2, 3, seed=21), det(T, 3, seed=22)],
                                lambda T, a, b: a * b + a / (b * b + 1) - b),
    "neg_pow": (lambda T: [det(T, 4, seed=23, positive=True)],
                lambda T, x: -(x ** 3) + x ** 0.5 + x ** -1),
    "matmul_2d": (lambda T: [det(T, 3, 4, seed=24), det(T, 4, 2, seed=25)],
                  lambda T, a, b: a @ b),
    "matmul_vec": (lambda T: [det(T, 3, 4, seed=24), det(T, 4, seed=26)],
                   lambda T, a, b: a @ b),
    "matmul_batched": (lambda T: [det(T, 2, 3, 4, seed=27), det(T, 2, 4, 2, seed=28)],
                       lambda T, a, b: a.matmul(b)),
    "unary_chain": (lambda T: [det(T, 6, seed=29, positive=True)],
                    lambda T, x: x.exp().log() + x.tanh() + x.sigmoid() + x.relu() + x.sqrt()),
    "relu_negative": (lambda T: [det(T, 8, seed=30)], lambda T, x: T.relu(x) * x),
    # abs at its kink: |x| where x has exact zeros (gradient 0 there, as torch)
    "abs_with_zeros": (lambda T: [det(T, 9, seed=50)],
                       lambda T, x: abs(x * 0) + x.abs() * 2 + T.abs(x - x)),
    "methods_add_alpha": (lambda T: [det(T, 3, seed=31), det(T, 3, seed=32)],
                          lambda T, a, b: a.add(b, alpha=2).sub(b, alpha=0.5).mul(b).div(2.0)),
    # ---- reductions
    "sum_dims": (lambda T: [det(T, 2, 3, 4, seed=33)],
                 lambda T, x: x.sum(1) * 2 + x.sum((0, 2), keepdim=True).sum() + x.sum(-1, keepdim=True).sum(
                     2).sum(1, keepdim=True)),
    "mean_dims": (lambda T: [det(T, 2, 3, seed=34)],
                  lambda T, x: x.mean(0) + x.mean() + x.mean(1, keepdim=True).squeeze(1).sum()),
    "max_dim": (lambda T: [det(T, 3, 4, seed=35)],
                lambda T, x: x.max(1)[0] * 2 + x.max(dim=1, keepdim=True).values.squeeze()),
    "max_all": (lambda T: [det(T, 3, 4, seed=36)], lambda T, x: x.max() * x.sum()),
    "softmax": (lambda T: [det(T, 3, 5, seed=37)],
                lambda T, x: x.softmax(1) * T.tensor([1.0, 2.0, 3.0, 4.0, 5.0])),
    "log_softmax_dim0": (lambda T: [det(T, 3, 5, seed=38)],
                         lambda T, x: T.nn.functional.log_softmax(x, dim=0) ** 2),
    # ---- views and copies
    "views": (lambda T: [det(T, 2, 3, 4, seed=39)],
              lambda T, x: x.view(6, 4).t().reshape(4, 3, 2).transpose(0, 2).permute(1, 0, 2)
              .contiguous() * T.arange(24.0).reshape(3, 2, 4)),
    "expand": (lambda T: [det(T, 3, 1, seed=40)],
               lambda T, x: x.expand(3, 4) * T.arange(12.0).reshape(3, 4)),
    "detach_clone": (lambda T: [det(T, 4, seed=41)],
                     lambda T, x: x.clone() * x.detach() + x.clone().detach()),
    "indexing": (lambda T: [det(T, 4, 5, seed=42)],
                 lambda T, x: x[1:3, ::1].sum() * x[0] + x[-1, 2:] .sum() + x[..., 1] .sum()
                 + x[None, 2, :4].sum()),
    "unsqueeze_flatten": (lambda T: [det(T, 2, 3, seed=43)],
                          lambda T, x: x.unsqueeze(0).flatten() * T.arange(6.0)),
    # ---- nn.functional
    "cross_entropy": (lambda T: [det(T, 4, 3, seed=44)],
                      lambda T, x: T.nn.functional.cross_entropy(x, T.tensor([0, 2, 1, 2]))),
    # -100 (the default ignore_index) and an explicit ignore_index; sum and none
    "cross_entropy_ignore": (lambda T: [det(T, 5, 3, seed=45)],
                             lambda T, x: T.nn.functional.cross_entropy(
                                 x, T.tensor([0, -100, 2, 1, -100]))
                             + T.nn.functional.cross_entropy(x, T.tensor([0, 1, 2, 1, 2]),
                                                             ignore_index=1, reduction="sum")),
    "cross_entropy_rows": (lambda T: [det(T, 4, 3, seed=46)],
                           lambda T, x: (T.nn.functional.cross_entropy(
                               x * 2, T.tensor([2, 0, -100, 1]), reduction="none") ** 2).sum()),
    "mse_loss": (lambda T: [det(T, 5, seed=45), det(T, 5, seed=46)],
                 lambda T, a, b: T.nn.functional.mse_loss(a, b)),
    "linear_relu": (lambda T: [det(T, 4, 3, seed=47), det(T, 2, 3, seed=48), det(T, 2, seed=49)],
                    lambda T, x, w, b: T.nn.functional.relu(T.nn.functional.linear(x, w, b))),
    "softmax_functional": (lambda T: [det(T, 2, 4, seed=50)],
                           lambda T, x: T.nn.functional.softmax(x, dim=-1)[:, 1:3]),
    "float64": (lambda T: [det(T, 3, seed=51, dtype=T.float64)],
                lambda T, x: (x * x).exp().sum()),
}

