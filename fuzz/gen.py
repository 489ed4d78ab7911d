"""Random program generator of the differential fuzzer (see docs/fuzzing.md).

gen(seed, features) returns the Python source of one program written against
the torch-like API of a module named T (jitgrad or torch).  The runner
(runner.py) executes the source with T and L (the leaf maker) as globals.
A program defines:
  fn(*params)   the function under test (eager, or wrapped in T.compile)
  CALLS         [(call_k, how)]: call_k(prev) builds fn's arguments (leaves
                through L, views of them, containers, earlier outputs) and
                how is "backward", "grad" or "double"
  BETWEEN       {k: step}: run before call k (an optimizer-like update of a
                captured tensor, a requires_grad flip)
  FULLGRAPH     passed to T.compile
  DYNAMIC       passed to T.compile as dynamic= (only in programs that call
                fn at a second and third size, feature "dynamic")
Shapes are symbolic: dimension A keeps its size over all calls, B and C may
change from call to call (so a repeated call retraces), "B-1" is B sliced by
one.  Every generated statement is valid for every size assignment, which
lets the minimizer delete statements freely.
"""
import random

# Feature switches.  DEFAULT is everything; --disable removes some.
FEATURES = {
    "elementwise": "unary and binary elementwise ops with broadcasting",
    "reduce": "sum/mean over all or some dims, keepdim",
    "max": "max() and max(dim) (values only)",
    "softmax": "softmax / log_softmax",
    "matmul": "matmul/@ of 1-3 d operands",
    "views": "slices, index, reshape, transpose, unsqueeze, squeeze, expand_as, contiguous",
    "contiguous": ".contiguous() (on contiguous and non-contiguous tensors)",
    "inplace": "in-place ops (add_ sub_ mul_ div_ zero_ copy_ +=) on clones and their views",
    "view_before_inplace": "a view of a tensor taken before an in-place op on it, used after",
    "function": "custom autograd.Function classes",
    "fn_multi_out": "Functions with several outputs",
    "fn_nontensor": "non-tensor arguments to Functions (floats, str, bool, tuples, None)",
    "fn_save_created": "Functions saving an intermediate or an output with save_for_backward",
    "fn_return_input": "Functions returning an input unchanged",
    "fn_none_grad": "backward returning None for a tensor slot",
    "fn_needs_grad": "backward branching on ctx.needs_input_grad",
    "fn_opaque": "forward reading values (float(x.sum()))",
    "fn_materialize": "ctx.set_materialize_grads(False): backward gets None for unused outputs",
    "fn_nondiff": "ctx.mark_non_differentiable on an output",
    "nn": "nn.functional: mse_loss, linear, cross_entropy",
    "ctx_attr": "a tensor kept as a ctx attribute (not saved) and read in backward",
    "fn_object_arg": "a Function receiving an object holding tensors, saving them",
    "fn_expand_arg": "expanded views as Function arguments",
    "alias_args": "the same tensor, overlapping slices or views of one base in several slots",
    "captured": "tensors captured from the enclosing scope (globals, closures)",
    "captured_update": "in-place update / requires_grad flip of a captured tensor between calls",
    "containers": "tensors inside tuples, lists and dicts passed to fn",
    "objects": "tensors inside plain objects passed to fn",
    "repeat": "several calls of one compiled function",
    "shape_change": "calls that change tensor sizes (retrace)",
    "dynamic": "two more calls at new sizes of B and C, compiled with dynamic=True or None",
    "rg_change": "calls that change requires_grad of an argument (guards)",
    "prev_outputs": "earlier outputs passed as arguments",
    "return_input": "fn returning one of its arguments unchanged",
    "autograd_grad": "autograd.grad instead of backward()",
    "double_backward": "create_graph=True and a second backward",
    "read_value": "fn reading values (float(), item()) -> eager fallback",
    "fullgraph": "compile(fullgraph=True)",
    "bool_cmp": "elementwise comparisons (> == ...) with where / float()",
    "opsmath": "sin cos erf clamp maximum minimum pow var std norm prod cumsum topk sort (opt-in)",
    "math2": "floor ceil trunc round frac sign sgn log1p expm1 log2 log10 rsqrt reciprocal sinh "
             "cosh tan asin acos atan erfc atan2 addcmul addcdiv lerp",
    "conv": "conv2d (weight and bias from values), max_pool2d, avg_pool2d (opt-in)",
    "batchnorm": "F.batch_norm in training (batch statistics) and the activations elu softplus "
                 "mish hardswish gelu silu (opt-in)",
    "index": "gather scatter scatter_add index_add index_fill flip roll repeat repeat_interleave "
             "logsumexp remainder fmod floor_divide isfinite nan_to_num argsort outer dot mv "
             "(opt-in)",
}
# opt-in features (named with --features) stay out of the default set
OPT_IN = ("opsmath", "conv", "batchnorm", "index")
DEFAULT = tuple(f for f in FEATURES if f not in OPT_IN)


def _bcast(s1, s2):
    """Broadcast of two symbolic shapes, or None."""
    out = []
    for i in range(1, max(len(s1), len(s2)) + 1):
        a = s1[-i] if i <= len(s1) else 1
        b = s2[-i] if i <= len(s2) else 1
        if a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        else:
            return None
    return tuple(reversed(out))


class V:
    """A tensor variable of the generated code."""

    def __init__(self, name, shape, contig=True, ties=False, clone=False):
        self.name, self.shape, self.contig, self.ties = name, tuple(shape), contig, ties
        self.clone = clone  # made by .clone() here: in-place ops allowed


class Gen:
    def __init__(self, seed, features):
        self.r = random.Random(seed)
        # draws for features added later come from here, so that the
        # programs of published seeds change only where those features act
        self.r2 = random.Random(seed * 1000003 + 17)
        self.r3 = random.Random(seed * 1000033 + 29)  # the "dynamic" feature's
        self.r4 = random.Random(seed * 1000037 + 41)  # the "math2" feature's
        self.r5 = random.Random(seed * 1000039 + 53)  # the "batchnorm" feature's
        self.r6 = random.Random(seed * 1000081 + 67)  # the "index" feature's
        self.seed = seed
        self.f = set(features)
        self.top = []  # top-level statements (classes, captured tensors)
        self.nfn = 0
        self.fns = []  # (class name, n tensor slots, arg kinds, n outputs)
        self.nv = 0

    def on(self, name, p=1.0):
        return name in self.f and self.r.random() < p

    def on2(self, name, p=1.0):
        return name in self.f and self.r2.random() < p

    def fresh(self, prefix="v"):
        self.nv += 1
        return f"{prefix}{self.nv}"

    # ------------------------------------------------------------ shapes
    def rand_shape(self, syms):
        rank = self.r.choice([1, 1, 2, 2, 2, 3])
        return tuple(self.r.choice(syms) for _ in range(rank))

    # ------------------------------------------------------------ Functions
    def gen_function(self):
        r = self.r
        name = f"F{self.nfn}"
        self.nfn += 1
        nt = r.randint(1, 4)
        kinds = ["t"] * nt
        if self.on("fn_nontensor", 0.6):
            for _ in range(r.randint(1, 2)):
                kinds.insert(r.randint(0, len(kinds)), r.choice(["scale", "mode", "flag", "pair", "none"]))
        obj = self.on("fn_object_arg", 0.3)
        if obj:
            kinds.insert(r.randint(0, len(kinds)), "box")
        nout = r.randint(1, 3) if self.on("fn_multi_out", 0.5) else 1
        params, tens = [], []
        for i, k in enumerate(kinds):
            p = f"a{i}" if k == "t" else f"k{i}"
            params.append(p)
            if k == "t":
                tens.append(p)
        body, items = [], list(tens)
        created = []
        scale = next((params[i] for i, k in enumerate(kinds) if k == "scale"), None)
        mode = next((params[i] for i, k in enumerate(kinds) if k == "mode"), None)
        flag = next((params[i] for i, k in enumerate(kinds) if k == "flag"), None)
        pair = next((params[i] for i, k in enumerate(kinds) if k == "pair"), None)
        box = next((params[i] for i, k in enumerate(kinds) if k == "box"), None)
        if box:
            body.append(f"bt = {box}.t * 1.0")
            items.append("bt")
            created.append("bt")
        if self.on("fn_opaque", 0.3):
            body.append(f"sign = 1.0 if float({tens[0]}.detach().sum()) >= 0 else -1.0")
            body.append("ctx.sign = sign")
        for j in range(r.randint(1, 3)):
            t = f"t{j}"
            x, y = r.choice(items), r.choice(items)
            e = r.choice([f"{x} * {y}", f"{x} + {y}", f"{x}.tanh()", f"{x} * 0.5 - {y}",
                          f"{x}.sigmoid() * {y}"])
            if scale and r.random() < 0.4:
                e = f"({e}) * {scale}"
            if pair and r.random() < 0.3:
                e = f"({e}) + {pair}[0]"
            if mode and r.random() < 0.3:
                e = f"({e}) if {mode} == 'both' else {x} * 2.0"
            if flag and r.random() < 0.3:
                e = f"({e}) if {flag} else {y}.tanh()"
            if "sign = " in "".join(body) and r.random() < 0.5:
                e = f"({e}) * sign"
            body.append(f"{t} = {e}")
            items.append(t)
            created.append(t)
        outs = []
        for j in range(nout):
            if j == 0 or r.random() < 0.7:
                outs.append(created[-1 - (j % len(created))] if r.random() < 0.6 else r.choice(created))
            else:
                outs.append(r.choice(created))
        outs = [o if outs.count(o) == 1 or i == outs.index(o) else f"{o} * 1.0"
                for i, o in enumerate(outs)]
        # outputs must be fresh tensors; a created name returned twice is copied
        ret_outs = []
        for j, o in enumerate(outs):
            if self.on("fn_return_input", 0.2):
                o = r.choice(tens)
            ret_outs.append(o)
        # what backward can use
        saved = list(tens) if r.random() < 0.8 else []
        if self.on("fn_save_created", 0.5):
            saved += r.sample(created, r.randint(1, len(created)))
        if box:
            self.on("fn_save_created", 0.7)  # an unused draw: keeps published seeds stable
            saved.append(f"{box}.t")
        if saved:
            body.append(f"ctx.save_for_backward({', '.join(saved)})")
        attr = None
        if self.on("ctx_attr", 0.4):
            attr = r.choice(items)
            body.append(f"ctx.keep = {attr}")
        for i, k in enumerate(kinds):
            if k in ("scale", "mode", "flag"):
                body.append(f"ctx.{params[i]} = {params[i]}")
        materialize = nout > 1 and self.on2("fn_materialize", 0.4)
        if materialize:
            body.append("ctx.set_materialize_grads(False)")
            body.append(f"ctx.shape = tuple({tens[0]}.shape)")
        last = ret_outs[-1]
        if nout > 1 and last in created and ret_outs.count(last) == 1 and \
                self.on2("fn_nondiff", 0.3):
            body.append(f"ctx.mark_non_differentiable({last})")
        body.append("return " + (", ".join(ret_outs) if nout > 1 else ret_outs[0]))
        # backward
        gs = [f"g{j}" for j in range(nout)]
        bb = []
        if materialize:
            bb += [f"{g} = {g} if {g} is not None else T.zeros(ctx.shape)" for g in gs]
        uses = list(gs)
        if saved:
            sv = [f"s{j}" for j in range(len(saved))]
            bb.append(f"{', '.join(sv)}{',' if len(sv) == 1 else ''} = ctx.saved_tensors")
            uses += sv
        if attr:
            uses.append("ctx.keep")
        rets = []
        for i, k in enumerate(kinds):
            if k != "t":
                rets.append("None")
                continue
            if self.on("fn_none_grad", 0.2):
                rets.append("None")
                continue
            terms = []
            for _ in range(r.randint(1, 2)):
                g = r.choice(gs)
                o = r.choice(uses)
                terms.append(r.choice([f"{g} * {o}", f"{g} * 2.0", f"{g}", f"{g} * {o}.tanh()",
                                       f"{g} - {o}"]))
            e = " + ".join(terms)
            if "scale" in kinds and r.random() < 0.3:
                e = f"({e}) * ctx.{params[kinds.index('scale')]}"
            if "mode" in kinds and r.random() < 0.3:
                e = f"({e}) if ctx.{params[kinds.index('mode')]} == 'both' else {gs[0]} * 3.0"
            if "sign = " in "".join(body) and r.random() < 0.5:
                e = f"({e}) * ctx.sign"
            if self.on("fn_needs_grad", 0.3):
                e = f"({e}) if ctx.needs_input_grad[{i}] else None"
            rets.append(e)
        bb.append("return " + (", ".join(rets) if len(rets) > 1 else rets[0]))
        lines = [f"class {name}(T.autograd.Function):",
                 "    @staticmethod",
                 f"    def forward(ctx, {', '.join(params)}):"]
        lines += ["        " + s for s in body]
        lines += ["", "    @staticmethod", f"    def backward(ctx, {', '.join(gs)}):"]
        lines += ["        " + s for s in bb]
        self.top.append("\n".join(lines))
        info = (name, kinds, nout)
        self.fns.append(info)
        return info

    def nontensor_literal(self, kind):
        r = self.r
        return {
            "scale": lambda: r.choice(["0.5", "2.0", "-1.5", "3"]),
            "mode": lambda: r.choice(["'both'", "'one'"]),
            "flag": lambda: r.choice(["True", "False"]),
            "pair": lambda: r.choice(["(0.5, 2)", "(1.0, 'x')", "[-1.0]"]),
            "none": lambda: "None",
        }[kind]()

    # ------------------------------------------------------------ fn body
    def opsmath_op(self, vs, out):
        """One statement using an opsmath op (draws from r2 only)."""
        r = self.r2
        v = r.choice(vs)
        n = self.fresh()
        a = v.name
        k = r.randrange(8)
        if k == 0:
            e = r.choice([f"{a}.sin()", f"T.cos({a})", f"{a}.erf()", f"{a}.clamp(-0.5, 0.75)",
                          f"{a}.clamp_min(0.1)", f"T.clamp({a}, max=0.3)"])
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, v.ties or "clamp" in e)
        if k in (1, 2):
            ws = [w for w in vs if _bcast(v.shape, w.shape) is not None]
            w = r.choice(ws)
            e = r.choice([f"T.maximum({a}, {w.name})", f"{a}.minimum({w.name})",
                          f"({a}.abs() + 0.5) ** {w.name}",
                          f"{a}.clamp({w.name} - 0.5, {w.name} + 0.5)"])
            out.append(f"{n} = {e}")
            return V(n, _bcast(v.shape, w.shape), True, True)
        if not v.shape:
            return None
        d = r.randrange(len(v.shape))
        rest = tuple(x for i, x in enumerate(v.shape) if i != d)
        if k == 3:
            keep = r.random() < 0.4
            op = r.choice(["var", "std", "norm"])
            arg = f"{d}, unbiased=False" if op != "norm" else f"dim={d}"
            out.append(f"{n} = {a}.{op}({arg}{', keepdim=True' if keep else ''})")
            s = tuple(1 if i == d else x for i, x in enumerate(v.shape)) if keep else rest
            return V(n, s, True, v.ties)
        if k == 4:
            out.append(f"{n} = {a}.cumsum({d})")
            return V(n, v.shape, True, v.ties)
        if k == 5:
            out.append(f"{n} = ({a} * 0.5 + 1.0).prod({d})")
            return V(n, rest, True, v.ties)
        if v.ties:
            return None
        if k == 6:
            out.append(f"{n} = {a}.sort({d}, descending={r.random() < 0.5})[0]")
            return V(n, v.shape, True, False)
        out.append(f"{n} = {a}.topk(1, dim={d})[0]")
        return V(n, tuple(1 if i == d else x for i, x in enumerate(v.shape)), True, False)

    def batchnorm_op(self, vs, out):
        """One statement using batch_norm or an activation (draws from r5
        only).  batch_norm only on a tensor with an A-sized dim besides dim
        1 (A is at least 2 and never changes), so a channel has several
        values; the piecewise activations have kinks: ties."""
        r = self.r5
        F = "T.nn.functional"
        n = self.fresh()
        bns = [w for w in vs
               if len(w.shape) >= 2 and any(d == "A" for i, d in enumerate(w.shape) if i != 1)]
        if bns and r.random() < 0.4:
            v = r.choice(bns)
            # eps 0.1: a channel of (nearly) equal values has a variance of
            # rounding noise, which a tiny eps would blow up to O(1) outputs
            # that differ between libraries (seed 4300253)
            out.append(f"{n} = {F}.batch_norm({v.name}, None, None, training=True, eps=0.1)")
            return V(n, v.shape, True, v.ties)
        v = r.choice(vs)
        a = v.name
        # (PyTorch refuses hardsigmoid's double backward: left out)
        e, kink = r.choice([(f"{F}.elu({a})", False), (f"{F}.softplus({a}, beta=2.0)", False),
                            (f"{F}.mish({a})", False), (f"{F}.hardswish({a} * 3.0)", True),
                            (f"{F}.gelu({a})", False), (f"{F}.gelu({a}, approximate='tanh')", False),
                            (f"{F}.silu({a})", False), (f"{F}.leaky_relu({a}, 0.2)", True),
                            (f"{F}.hardtanh({a} * 2.0)", True), (f"{F}.relu6({a} * 4.0)", True)])
        out.append(f"{n} = {e}")
        return V(n, v.shape, True, v.ties or kink)

    def index_op(self, vs, out):
        """One statement using an index op (draws from r6 only).  Indices
        come from the values (x > 0 picks the first or last element of the
        last dim), so they are valid at every size and repeat (gradients
        accumulate); sort order is used only on values without ties."""
        r = self.r6
        v = r.choice(vs)
        n = self.fresh()
        a = v.name
        if not v.shape:
            out.append(f"{n} = T.logsumexp({a}.reshape(1), 0) + {a} % 0.7")
            return V(n, (), True, v.ties)
        last = len(v.shape) - 1
        idx = f"(({a} > 0.1).long() * ({a}.shape[-1] - 1))"
        k = r.randrange(8)
        if k == 0:
            e = r.choice([f"{a}.gather(-1, {idx})", f"T.gather({a} * 2.0, {last}, {idx})",
                          f"{a}.scatter_add(-1, {idx}, {a}.tanh())",
                          f"T.zeros_like({a}).scatter_add({last}, {idx}, {a} * {a})",
                          f"{a}.scatter(-1, {idx}, {a} * 0.5)",
                          f"{a}.scatter(-1, {idx}, -1.5)",
                          f"{a}.index_fill(-1, T.tensor([0]), 0.25)",
                          f"{a}.index_add(0, T.zeros({a}.shape[0], dtype=T.int64), {a}.exp())"])
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, True)
        if k == 1:
            d = r.randrange(len(v.shape))
            e = r.choice([f"{a}.flip({d})",
                          f"T.flip({a}, (-1, 0))" if last else f"{a}.flip(-1)",
                          f"{a}.roll(1, {d})", f"T.roll({a}, -2)",
                          f"{a}.repeat({', '.join(['2'] + ['1'] * last)})"
                          f".reshape(2, *{a}.shape).sum(0)",
                          f"{a}.repeat_interleave(2, dim=-1).reshape(*{a}.shape, 2).sum(-1)"])
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, v.ties)
        if k == 2:
            out.append(f"{n} = T.logsumexp({a}, -1, keepdim=True)")
            return V(n, v.shape[:-1] + (1,), True, v.ties)
        if k == 3:
            ws = [w for w in vs if _bcast(v.shape, w.shape) is not None]
            w = r.choice(ws)
            b = w.name
            e = r.choice([f"{a} % 0.7 + {b}", f"T.fmod({a}, -0.3) + {b}",
                          f"T.remainder({a}, {b}.abs() + 0.5)", f"{a}.fmod({b} * {b} + 0.25)",
                          f"{a} + ({b}.detach() // 0.4)",
                          f"-1.5 % ({a}.detach().abs() + 0.5) + {b}"])
            out.append(f"{n} = {e}")
            return V(n, _bcast(v.shape, w.shape), True, True)
        if k == 4:
            e = r.choice([f"T.nan_to_num({a} / {a}.round())",
                          f"T.where(({a} / {a}.round()).isfinite(), {a}, {a} * 0.5)",
                          f"{a}.masked_fill(T.isnan({a}.log()), 0.5)"])
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, True)
        if k == 5 and not v.ties:
            out.append(f"{n} = {a}.gather(-1, {a}.argsort(-1, descending={r.random() < 0.5}))")
            return V(n, v.shape, True, False)
        vecs = [w for w in vs if len(w.shape) == 1]
        if len(v.shape) == 1 and vecs:
            w = r.choice(vecs)
            if w.shape == v.shape and r.random() < 0.5:
                out.append(f"{n} = T.dot({a}, {w.name})")
                return V(n, (), True, v.ties or w.ties)
            out.append(f"{n} = T.outer({a}, {w.name})")
            return V(n, (v.shape[0], w.shape[0]), True, v.ties or w.ties)
        if len(v.shape) == 2:
            ws = [w for w in vs if w.shape == (v.shape[1],)]
            if ws:
                out.append(f"{n} = T.mv({a}, {r.choice(ws).name})")
                return V(n, (v.shape[0],), True, True)
        out.append(f"{n} = {a}.flip(0) * 0.5")
        return V(n, v.shape, True, v.ties)

    def math2_op(self, vs, out):
        """One statement using a math2 op (draws from r4 only).  Operands
        are kept inside each function's domain and away from overflow."""
        r = self.r4
        v = r.choice(vs)
        n = self.fresh()
        a = v.name
        k = r.randrange(4)
        if k == 0:  # piecewise constant: ties, zero gradients
            e = r.choice([f"({a} * 2.0).floor()", f"T.ceil({a} * 2.0)", f"({a} * 3.0).round()",
                          f"{a}.trunc()", f"({a} * 2.0).frac()", f"{a}.sign()", f"T.sgn({a})",
                          f"({a} * 3.0).round(decimals=1)", f"T.fix({a} * 2.0)"])
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, True)
        if k == 1:
            p = f"({a}.abs() + 0.5)"
            e = r.choice([f"{p}.log1p()", f"({a} * 0.5).expm1()", f"{p}.log2()",
                          f"T.log10({p})", f"{p}.rsqrt()", f"{p}.reciprocal()",
                          f"({a} * 0.5).sinh()", f"T.cosh({a} * 0.5)",
                          f"({a}.tanh() * 1.2).tan()", f"({a}.tanh() * 0.9).asin()",
                          f"T.acos({a}.tanh() * 0.9)", f"T.arcsin({a}.tanh() * 0.5)",
                          f"{a}.atan()", f"{a}.erfc()"])
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, v.ties)
        ws = [w for w in vs if _bcast(v.shape, w.shape) is not None]
        w = r.choice(ws)
        s = _bcast(v.shape, w.shape)
        b = w.name
        e = r.choice([f"T.atan2({a}, {b} * {b} + 0.5)", f"{a}.arctan2({b}.abs() + 0.25)",
                      f"{a}.addcmul({b}, {a}, value=0.5)", f"T.addcmul({a}, {a}, {b})",
                      f"T.addcdiv({a}, {b}, {b}.abs() + 1.0, value=-0.75)",
                      f"T.lerp({a}, {b}, {r.choice(['0.3', '0.8', '-0.5', '1.0'])})",
                      f"{a}.lerp({b}, {b}.sigmoid())"])
        out.append(f"{n} = {e}")
        return V(n, s, True, v.ties or w.ties)

    def conv_op(self, vs, out):
        """One statement using conv2d / max_pool2d / avg_pool2d (draws from
        r2 only): the value seen as a [1, 1, n, 1] image, a (3, 1) window
        padded by one, so the result has the value's shape for any size."""
        r = self.r2
        v = r.choice(vs)
        n = self.fresh()
        a = v.name
        x = f"{a}.reshape(1, 1, -1, 1)"
        F = "T.nn.functional"
        k = r.randrange(4)
        if k == 0:
            e = f"{F}.conv2d({x}, T.linspace(-1.0, 1.0, 3).reshape(1, 1, 3, 1), padding=(1, 0))"
        elif k == 1:
            w = r.choice(vs).name
            e = (f"{F}.conv2d({x}, ({w}.tanh().sum() * T.linspace(-1.0, 0.5, 3))"
                 f".reshape(1, 1, 3, 1), ({w}.sum() * 0.5).reshape(1), padding=(1, 0))")
        elif k == 2:
            incl = r.choice(["True", "False"])
            e = f"{F}.avg_pool2d({x}, (3, 1), 1, (1, 0), count_include_pad={incl})"
        else:
            if v.ties:
                return None
            e = f"{F}.max_pool2d({x}, (3, 1), 1, (1, 0))"
        out.append(f"{n} = {e}.reshape_as({a})")
        return V(n, v.shape, True, v.ties or k == 3)

    def body_op(self, vs, out, boxes):
        """Appends one statement to out; returns the new V or None."""
        if "opsmath" in self.f and self.r2.random() < 0.3:
            res = self.opsmath_op(vs, out)
            if res is not None:
                return res
        if "math2" in self.f and self.r4.random() < 0.15:
            return self.math2_op(vs, out)
        if "conv" in self.f and self.r2.random() < 0.25:
            res = self.conv_op(vs, out)
            if res is not None:
                return res
        if "batchnorm" in self.f and self.r5.random() < 0.15:
            return self.batchnorm_op(vs, out)
        if "index" in self.f and self.r6.random() < 0.2:
            return self.index_op(vs, out)
        r = self.r
        f = self.on
        v = r.choice(vs)
        n = self.fresh()
        choice = r.random()
        if choice < 0.25 and "elementwise" in self.f:
            e = r.choice([f"{v.name}.tanh()", f"{v.name}.sigmoid()", f"{v.name}.relu()",
                          f"{v.name}.abs()", f"-{v.name}", f"{v.name}.tanh().exp()",
                          f"{v.name} * {v.name}", f"{v.name} * 0.5", f"{v.name} + 1.0",
                          f"2.0 - {v.name}", f"({v.name} * {v.name} + 0.5).sqrt()",
                          f"({v.name}.abs() + 1.0).log()", f"{v.name} ** 2",
                          f"{v.name} / 4.0", f"T.tanh({v.name})", f"{v.name}.square()"])
            ties = v.ties or "relu" in e or "abs" in e
            out.append(f"{n} = {e}")
            return V(n, v.shape, True, ties)
        if choice < 0.5 and "elementwise" in self.f:
            ws = [w for w in vs if _bcast(v.shape, w.shape) is not None]
            w = r.choice(ws)
            s = _bcast(v.shape, w.shape)
            e = r.choice([f"{v.name} + {w.name}", f"{v.name} - {w.name}", f"{v.name} * {w.name}",
                          f"{v.name} / ({w.name} * {w.name} + 1.0)",
                          f"{v.name}.add({w.name}, alpha=2)", f"{v.name}.mul({w.name})",
                          f"T.mul({v.name}, {w.name}.tanh())"])
            if f("bool_cmp", 0.15):
                e = r.choice([f"T.where({v.name} > {w.name}, {v.name}, {w.name})",
                              f"({v.name} >= 0).float() * {w.name}",
                              f"{v.name} * ({w.name} != 0.0).float()"])
            out.append(f"{n} = {e}")
            return V(n, s, True, v.ties or w.ties)
        if choice < 0.6 and "reduce" in self.f:
            if not v.shape or r.random() < 0.3:
                e = r.choice([f"{v.name}.sum()", f"{v.name}.mean()"])
                out.append(f"{n} = {e}")
                return V(n, (), True, v.ties)
            d = r.randrange(len(v.shape))
            keep = r.random() < 0.4
            op = r.choice(["sum", "mean"])
            e = f"{v.name}.{op}({d}{', keepdim=True' if keep else ''})"
            if len(v.shape) >= 2 and r.random() < 0.2:
                e = f"{v.name}.sum((0, {len(v.shape) - 1}))"
                s = tuple(x for i, x in enumerate(v.shape) if i not in (0, len(v.shape) - 1))
            else:
                s = tuple(1 if i == d else x for i, x in enumerate(v.shape)) if keep else \
                    tuple(x for i, x in enumerate(v.shape) if i != d)
            out.append(f"{n} = {e}")
            return V(n, s, True, v.ties)
        if choice < 0.65 and "max" in self.f and not v.ties and v.shape:
            if r.random() < 0.3:
                out.append(f"{n} = {v.name}.max()")
                return V(n, (), True, False)
            d = r.randrange(len(v.shape))
            out.append(f"{n} = {v.name}.max({d})[0]")
            return V(n, tuple(x for i, x in enumerate(v.shape) if i != d), True, False)
        if choice < 0.7 and "softmax" in self.f and v.shape:
            d = r.randrange(len(v.shape))
            op = r.choice(["softmax", "log_softmax"])
            out.append(f"{n} = {v.name}.{op}({d})")
            return V(n, v.shape, True, False)
        if choice < 0.78 and "matmul" in self.f:
            if len(v.shape) in (2, 3):
                q = v.shape[-1]
                ws = [w for w in vs if len(w.shape) in (1, 2) and w.shape[0] == q]
                ws2 = [w for w in vs if len(w.shape) == 2 and w.shape[1] == q]
                if ws and (not ws2 or r.random() < 0.5):
                    w = r.choice(ws)
                    out.append(f"{n} = {v.name} @ {w.name}")
                    s = v.shape[:-1] + w.shape[1:]
                    return V(n, s, True, False)
                if ws2:
                    w = r.choice(ws2)
                    out.append(f"{n} = {v.name}.matmul({w.name}.t())")
                    return V(n, v.shape[:-1] + (w.shape[0],), True, False)
            return None
        if choice < 0.9 and "views" in self.f:
            k = r.randrange(8)
            if k == 0 and len(v.shape) >= 2:
                out.append(f"{n} = {v.name}.transpose(0, 1)")
                return V(n, (v.shape[1], v.shape[0]) + v.shape[2:], False, v.ties)
            if k == 1:
                d = r.randint(0, len(v.shape))
                out.append(f"{n} = {v.name}.unsqueeze({d})")
                return V(n, v.shape[:d] + (1,) + v.shape[d:], v.contig, v.ties)
            if k == 2 and v.shape:
                out.append(f"{n} = {v.name}.reshape(-1)" if r.random() < 0.5 else
                           f"{n} = {v.name}.flatten()")
                return V(n, ("*".join(map(str, v.shape)),) if len(v.shape) > 1 else v.shape,
                         True, v.ties)
            if k == 3 and v.shape:
                d = r.randrange(len(v.shape))
                x = v.shape[d]
                if isinstance(x, str) and "-" not in x and "*" not in x:
                    if r.random() < 0.5:
                        out.append(f"{n} = {v.name}[{':, ' * d}1:]")
                    else:
                        out.append(f"{n} = {v.name}[{':, ' * d}:-1]")
                    return V(n, v.shape[:d] + (x + "-1",) + v.shape[d + 1:], False, v.ties)
                out.append(f"{n} = {v.name}[{':, ' * d}0:1]")
                return V(n, v.shape[:d] + (1,) + v.shape[d + 1:], False, v.ties)
            if k == 4 and v.shape:
                out.append(f"{n} = {v.name}[0]")
                return V(n, v.shape[1:], v.contig, v.ties)
            if k == 5 and 1 in v.shape:
                d = v.shape.index(1)
                out.append(f"{n} = {v.name}.squeeze({d})")
                return V(n, v.shape[:d] + v.shape[d + 1:], v.contig, v.ties)
            if k == 6:
                ws = [w for w in vs if w is not v and _bcast(w.shape, v.shape) == w.shape
                      and w.shape != v.shape]
                if ws:
                    w = r.choice(ws)
                    out.append(f"{n} = {v.name}.expand_as({w.name})")
                    return V(n, w.shape, False, v.ties)
            if "contiguous" in self.f:
                out.append(f"{n} = {v.name}.contiguous()")
                return V(n, v.shape, True, v.ties)
            return None
        if choice < 0.93 and self.on2("nn", 0.5):
            k = self.r2.randrange(3)
            F = "T.nn.functional"
            if k == 0:
                ws = [w for w in vs if w.shape == v.shape]
                out.append(f"{n} = {F}.mse_loss({v.name}, {self.r2.choice(ws).name})")
                return V(n, (), True, False)
            if k == 1 and v.shape:
                ws = [w for w in vs if len(w.shape) == 2 and w.shape[1] == v.shape[-1]]
                if ws:
                    w = self.r2.choice(ws)
                    bs = [b for b in vs if b.shape == (w.shape[0],)]
                    bias = f", {self.r2.choice(bs).name}" if bs and self.r2.random() < 0.5 else ""
                    out.append(f"{n} = {F}.linear({v.name}, {w.name}{bias})")
                    return V(n, v.shape[:-1] + (w.shape[0],), True, False)
            if len(v.shape) == 2:
                out.append(f"{n} = {F}.cross_entropy({v.name}, "
                           f"T.zeros({v.name}.shape[0], dtype=T.int64))")
                return V(n, (), True, False)
            return None
        if choice < 0.97 and "function" in self.f:
            return self.call_function(vs, out, boxes, n)
        if "inplace" in self.f:
            ws = [w for w in vs if _bcast(v.shape, w.shape) == v.shape]
            w = r.choice(ws)
            out.append(f"{n} = {v.name}.clone()")
            target = n
            view = None
            if f("view_before_inplace", 0.3) and v.shape:
                view = self.fresh()
                out.append(f"{view} = {n}[0:1]")
            elif v.shape and r.random() < 0.3 and w.shape == () :
                target = f"{n}[0:1]"
            op = r.choice(["mul_", "add_", "sub_", "div_", "+=", "*=", "-=", "zero_", "copy_"])
            if op == "div_":
                out.append(f"{target}.div_({w.name} * {w.name} + 1.0)")
            elif op in ("+=", "*=", "-="):
                if target == n:
                    out.append(f"{n} {op} {w.name}")
                else:
                    out.append(f"{target}.add_({w.name})")
            elif op == "zero_":
                out.append(f"{target}.zero_()")
            elif op == "copy_":
                out.append(f"{target}.copy_({w.name})" if target == n else f"{target}.mul_(2.0)")
            elif op == "add_" and r.random() < 0.5:
                out.append(f"{target}.add_({w.name}, alpha=-0.5)")
            else:
                out.append(f"{target}.{op}({w.name})")
            res = V(n, v.shape, True, True)
            if view:
                vv = V(view, (1,) + v.shape[1:], False, True)
                return [res, vv]
            return res
        return None

    def call_function(self, vs, out, boxes, n):
        r = self.r
        if self.fns and r.random() < 0.35:
            name, kinds, nout = r.choice(self.fns)
        else:
            name, kinds, nout = self.gen_function()
        v = r.choice(vs)
        shape = v.shape
        same = [w for w in vs if w.shape == shape]
        bcast = [w for w in vs if w.shape != shape and _bcast(shape, w.shape) == shape]
        args = []
        for k in kinds:
            if k == "t":
                if bcast and self.on("fn_expand_arg", 0.25):
                    args.append(f"{r.choice(bcast).name}.expand_as({v.name})")
                elif args and self.on("alias_args", 0.3):
                    prev = [a for a in args if not a.startswith(("'", "(", "[", "bx"))
                            and a not in ("True", "False", "None") and not a[0].isdigit()
                            and not a.startswith("-")]
                    args.append(r.choice(prev) if prev else r.choice(same).name)
                else:
                    args.append(r.choice(same).name)
            elif k == "box":
                b = self.fresh("bx")
                out.append(f"{b} = Box(t={r.choice(same).name})")
                args.append(b)
            else:
                args.append(self.nontensor_literal(k))
        call = f"{name}.apply({', '.join(args)})"
        if nout == 1:
            out.append(f"{n} = {call}")
            return V(n, shape, True, True)
        names = [n] + [self.fresh() for _ in range(nout - 1)]
        if r.random() < 0.5:
            out.append(f"{', '.join(names)} = {call}")
        else:
            rr = self.fresh("r")
            out.append(f"{rr} = {call}")
            out += [f"{x} = {rr}[{j}]" for j, x in enumerate(names)]
        return [V(x, shape, True, True) for x in names]

    # ------------------------------------------------------------ program
    def program(self):
        r = self.r
        f = self.on
        dims = {"A": r.randint(2, 4), "B": r.randint(2, 4), "C": r.randint(2, 4)}
        ncalls = r.randint(2, 3) if f("repeat", 0.8) else 1
        call_dims = [dims]
        for _ in range(ncalls - 1):
            d = dict(call_dims[-1])
            if f("shape_change", 0.4):
                for s in ("B", "C"):
                    if r.random() < 0.6:
                        d[s] = r.randint(2, 5)
            call_dims.append(d)
        # dynamic sizes: the entry goes dynamic at the second size (or the
        # first, dynamic=True), and later sizes run from its template
        dyn = "dynamic" in self.f and self.r3.random() < 0.3
        if dyn:
            for _ in range(2):
                d = dict(call_dims[-1])
                while d == call_dims[-1]:
                    for s in ("B", "C"):
                        if self.r3.random() < 0.6:
                            d[s] = self.r3.randint(2, 6)
                call_dims.append(d)
        # parameters of fn: ("t", shape) tensors, ("list"/"dict"/"obj", [shapes])
        params = []
        for i in range(r.randint(1, 3)):
            params.append(("t", self.rand_shape(["A", "B", "C", 1])))
        if f("containers", 0.3):
            params.append((r.choice(["tuple", "list", "dict"]),
                           [self.rand_shape(["A", "B", "C", 1]) for _ in range(r.randint(1, 2))]))
        if f("objects", 0.2):
            params.append(("obj", [self.rand_shape(["A", "B", "C", 1])]))
        pnames = [f"x{i}" for i in range(len(params))]
        # fn body
        body, vs, boxes = [], [], []
        for pn, (kind, sh) in zip(pnames, params):
            if kind == "t":
                vs.append(V(pn, sh, contig=False))  # an argument may be a view
            else:
                for j, s in enumerate(sh):
                    n = self.fresh()
                    if kind == "dict":
                        body.append(f"{n} = {pn}['k{j}']")
                    elif kind == "obj":
                        body.append(f"{n} = {pn}.t{j}")
                    else:
                        body.append(f"{n} = {pn}[{j}]")
                    vs.append(V(n, s, contig=False))
        captured = []
        if f("captured", 0.35):
            for j in range(r.randint(1, 2)):
                cn = f"C{j}"
                sh = r.choice([("A",), (1, "A"), ("A", 1), (1,)])
                captured.append((cn, sh))
                vs.append(V(cn, sh, contig=True))
        if f("read_value", 0.1):
            v = r.choice(vs)
            n = self.fresh()
            body.append(f"{n} = {v.name} * (1.0 if float({v.name}.detach().sum()) > 0 else -2.0)")
            vs.append(V(n, v.shape))
        made = []
        for _ in range(r.randint(2, 8)):
            res = self.body_op(vs, body, boxes)
            if res is None:
                continue
            for x in (res if isinstance(res, list) else [res]):
                vs.append(x)
                made.append(x)
        if not made:
            n = self.fresh()
            body.append(f"{n} = {vs[0].name} * 2.0")
            made.append(V(n, vs[0].shape))
        nret = r.randint(1, 3)
        rets = [made[-1]] + r.sample(made, min(len(made), nret - 1))
        rets = list(dict.fromkeys(x.name for x in rets))
        if f("return_input", 0.15):
            rets.append(r.choice([p for p, (k, _) in zip(pnames, params) if k == "t"]))
        ret = ", ".join(rets) if len(rets) > 1 or r.random() < 0.5 else rets[0]
        if len(rets) == 1 and "," not in ret and r.random() < 0.3:
            ret = f"({ret},)"
        body.append(f"return {ret}")
        # the calls
        calls = []
        rgs = [r.random() < 0.85 for _ in range(len(params) * 3)]
        n_regular = len(call_dims) - (2 if dyn else 0)
        base_state = None
        for ci, d in enumerate(call_dims):
            lines, args = [], []
            if ci < n_regular and ci and f("rg_change", 0.3):
                k = r.randrange(len(rgs))
                rgs[k] = not rgs[k]
            # the extra calls of "dynamic" pass arguments made like the last
            # regular call's (same views, aliasing, requires_grad) at new
            # sizes, so that only sizes change and the entry can go dynamic
            if ci == n_regular - 1:
                base_state = r.getstate()
            elif ci >= n_regular:
                r.setstate(base_state)
            li = 0

            def leaf(shape, rg=None, suffix=""):
                nonlocal li
                li += 1
                nm = f"l{li}"
                conc = tuple(_size(x, d) for x in shape)
                rg = rgs[li % len(rgs)] if rg is None else rg
                lines.append(f"{nm} = L('c{ci}{nm}{suffix}', {conc!r}, {rg})")
                return nm

            tensor_args = []  # (expr, shape)
            for pn, (kind, sh) in zip(pnames, params):
                if kind == "t":
                    e = self.arg_expr(sh, d, leaf, lines, tensor_args, ci)
                    tensor_args.append((e, sh))
                    args.append(e)
                else:
                    es = []
                    for s in sh:
                        e = self.arg_expr(s, d, leaf, lines, tensor_args, ci)
                        tensor_args.append((e, s))
                        es.append(e)
                    if kind == "tuple":
                        args.append("(" + ", ".join(es) + ",)")
                    elif kind == "list":
                        args.append("[" + ", ".join(es) + "]")
                    elif kind == "dict":
                        args.append("{" + ", ".join(f"'k{j}': {e}" for j, e in enumerate(es)) + "}")
                    else:
                        args.append("Box(" + ", ".join(f"t{j}={e}" for j, e in enumerate(es)) + ")")
            lines.append(f"return [{', '.join(args)}]")
            how = "backward"
            if f("autograd_grad", 0.25):
                how = "grad"
            if f("double_backward", 0.2):
                how = "double"
            calls.append((lines, how))
        between = {}
        if captured and len(calls) > 1 and f("captured_update", 0.5):
            k = r.randint(1, len(calls) - 1)
            cn = captured[0][0]
            between[k] = r.choice([f"with T.no_grad():\n        {cn}.mul_(0.5)",
                                   f"{cn}.requires_grad_(not {cn}.requires_grad)",
                                   f"with T.no_grad():\n        {cn}.add_(1.0)"])
        # assemble
        src = [f"# jitgrad fuzz program, seed {self.seed}"]
        if "Box(" in "\n".join(body + self.top + sum((c[0] for c in calls), [])):
            src.append("class Box:\n    def __init__(self, **kw):\n        self.__dict__.update(kw)")
        src += self.top
        cap = []
        for cn, sh in captured:
            conc = tuple(_size(x, dims) for x in sh)
            cap.append(f"{cn} = L('{cn}', {conc!r}, {r.random() < 0.8})")
        fdef = f"def fn({', '.join(pnames)}):\n" + "\n".join("    " + s for s in body)
        if captured and self.on2("captured", 0.5):
            # closure variables instead of globals (also returned, for the steps)
            names = ", ".join(cn for cn, _ in captured)
            inner = cap + fdef.split("\n") + [f"return fn, {names}"]
            src.append("def make_fn():\n" + "\n".join("    " + x for x in inner))
            src.append(f"fn, {names} = make_fn()")
        else:
            src += cap
            src.append(fdef)
        for ci, (lines, how) in enumerate(calls):
            src.append(f"def call{ci}(prev):\n" + "\n".join("    " + s for s in lines))
        for k, s in between.items():
            src.append(f"def step{k}():\n    {s}")
        src.append("CALLS = [" + ", ".join(f"(call{ci}, {how!r})" for ci, (_, how) in
                                          enumerate(calls)) + "]")
        src.append("BETWEEN = {" + ", ".join(f"{k}: step{k}" for k in between) + "}")
        fg = "fullgraph" in self.f and r.random() < 0.3 and "float(" not in "\n".join(body)
        src.append(f"FULLGRAPH = {fg}")
        if dyn:
            src.append(f"DYNAMIC = {True if self.r3.random() < 0.5 else None}")
        return "\n\n".join(src) + "\n"

    def arg_expr(self, sh, d, leaf, lines, prior, ci):
        """An expression of symbolic shape sh for one call: a fresh leaf, an
        earlier argument (aliasing), a slice / transpose / expand of a leaf."""
        r = self.r
        conc = tuple(_size(x, d) for x in sh)
        same = [e for e, s in prior if s == sh]
        k = r.random()
        if same and self.on("alias_args", 0.35):
            return r.choice(same)
        if ci and self.on("prev_outputs", 0.15):
            # an earlier output of the same shape, if there is one
            lines.append(f"p = [o for o in prev if hasattr(o, 'shape') and tuple(o.shape) == {conc!r}]")
            alt = leaf(sh)
            return f"(p[0] if p else {alt})"
        if self.on("alias_args", 0.4) and conc:
            if k < 0.3:
                # a slice of a bigger leaf: base has one more row
                big = (conc[0] + 1,) + conc[1:]
                nm = f"b{len(lines)}"
                lines.append(f"{nm} = L('c{ci}{nm}', {big!r}, {r.random() < 0.85})")
                return f"{nm}[{r.choice(['1:', ':-1'])}]"
            if k < 0.5 and len(conc) == 2:
                nm = f"b{len(lines)}"
                lines.append(f"{nm} = L('c{ci}{nm}', {(conc[1], conc[0])!r}, {r.random() < 0.85})")
                return f"{nm}.t()"
            if k < 0.7 and any(c != 1 for c in conc):
                small = tuple(1 if (c != 1 and r.random() < 0.5) else c for c in conc)
                nm = f"b{len(lines)}"
                lines.append(f"{nm} = L('c{ci}{nm}', {small!r}, {r.random() < 0.85})")
                return f"{nm}.expand{conc!r}" if len(conc) > 1 else f"{nm}.expand({conc[0]})"
            if k < 0.85 and len(conc) >= 1:
                # overlapping slices of one base shared by later arguments
                big = (conc[0] + 1,) + conc[1:]
                nm = "shared"
                if not any(s.startswith("shared =") for s in lines):
                    lines.append(f"shared = L('c{ci}shared{big!r}', {big!r}, True)")
                elif not any(s.startswith(f"shared = L('c{ci}shared{big!r}'") for s in lines):
                    return leaf(sh)
                return f"{nm}[{r.choice(['1:', ':-1'])}]"
        return leaf(sh)


def _size(x, d):
    if x == 1:
        return 1
    if "*" in x:
        p = 1
        for y in x.split("*"):
            p *= _size(y if y != "1" else 1, d)
        return p
    if x.endswith("-1"):
        return d[x[:-2]] - 1
    return d[x]


def gen(seed, features=DEFAULT):
    g = Gen(seed, features)
    return g.program()


if __name__ == "__main__":
    import sys

    print(gen(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
