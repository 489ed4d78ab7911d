"""Programs with custom Functions in every shape the tracer must handle,
built for jitgrad or torch (mk(T, name) returns the program)."""
import dataclasses

@dataclasses.dataclass
class P:
    a: object
    b: object

def mk(T, name):
    F = T.autograd.Function
    if name == "save_input_twice_slots":
        class C(F):
            @staticmethod
            def forward(ctx, x, y):
                ctx.save_for_backward(x, y)
                return x * y
            @staticmethod
            def backward(ctx, g):
                x, y = ctx.saved_tensors
                return g * y, g * x
        return lambda x: C.apply(x, x).sum()
    if name == "return_input":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x
            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * 2
        return lambda x: (C.apply(x) * x).sum()
    if name == "save_view_of_output":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y[0:2])
                return y
            @staticmethod
            def backward(ctx, g):
                v, = ctx.saved_tensors
                return g * v.sum()
        return lambda x: C.apply(x).sum()
    if name == "save_none_and_input":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(None, x)
                return x * 3
            @staticmethod
            def backward(ctx, g):
                n, x = ctx.saved_tensors
                assert n is None
                return g * 3
        return lambda x: C.apply(x).sum()
    if name == "nested_function_in_forward":
        class In(F):
            @staticmethod
            def forward(ctx, x):
                y = x * x
                ctx.save_for_backward(y)
                return y
            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return g * y
        class C(F):
            @staticmethod
            def forward(ctx, x):
                y = In.apply(x)
                ctx.save_for_backward(y)
                ctx.k = y * 2
                return y + 1
            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return g * y + ctx.k
        return lambda x: C.apply(x).sum()
    if name == "function_in_backward":
        class In(F):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                return g * 2
        class C(F):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y
            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return In.apply(g * y)
        return lambda x: C.apply(x).sum()
    if name == "ctx_attr_input_and_output":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                ctx.x = x
                y = x.exp()
                ctx.y = y
                return y
            @staticmethod
            def backward(ctx, g):
                return g * ctx.y + 0 * ctx.x
        return lambda x: C.apply(x).sum()
    if name == "ctx_attr_list":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                ctx.ts = [x * 2, x * 3]
                return x * 5
            @staticmethod
            def backward(ctx, g):
                return g * (ctx.ts[0] + ctx.ts[1])
        return lambda x: C.apply(x).sum()
    if name == "dataclass_concrete_rg":
        p = P(T.ones(3, requires_grad=True) * 2, T.ones(3))
        class C(F):
            @staticmethod
            def forward(ctx, x, p):
                ctx.save_for_backward(x, p.a)
                return x * p.a + p.b
            @staticmethod
            def backward(ctx, g):
                x, a = ctx.saved_tensors
                return g * a, None
        return lambda x: C.apply(x, p).sum()
    if name == "dataclass_symbolic":
        class C(F):
            @staticmethod
            def forward(ctx, x, p):
                ctx.save_for_backward(p.a)
                return x * p.a
            @staticmethod
            def backward(ctx, g):
                a, = ctx.saved_tensors
                return g * a, None
        return lambda x: C.apply(x, P(x * 2, None)).sum()
    if name == "closure_symbolic_in_backward":
        holder = {}
        class C(F):
            @staticmethod
            def forward(ctx, x):
                return x * 2
            @staticmethod
            def backward(ctx, g):
                return g * holder["t"]
        def prog(x):
            holder["t"] = x.exp()
            return C.apply(x).sum()
        return prog
    if name == "mark_non_diff_saved":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                z = x * 3
                ctx.mark_non_differentiable(z)
                ctx.save_for_backward(z)
                return y, z
            @staticmethod
            def backward(ctx, g, gz):
                z, = ctx.saved_tensors
                return g * 2 + 0 * z
        return lambda x: C.apply(x)[0].sum()
    if name == "needs_input_grad_branch":
        c0 = T.ones(3)
        class C(F):
            @staticmethod
            def forward(ctx, x, c):
                ctx.save_for_backward(x, c)
                return x * c
            @staticmethod
            def backward(ctx, g):
                x, c = ctx.saved_tensors
                return (g * c if ctx.needs_input_grad[0] else None,
                        g * x if ctx.needs_input_grad[1] else None)
        return lambda x: C.apply(x, c0).sum()
    if name == "chain_three_multi":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                dx = 3 * x ** 2
                ctx.save_for_backward(x, dx)
                return x ** 3, dx
            @staticmethod
            def backward(ctx, go, gd):
                x, dx = ctx.saved_tensors
                return go * dx + gd * 6 * x
        def prog(x):
            y, d = C.apply(x)
            z, d2 = C.apply(y * 0.5)
            w, _ = C.apply(d2 * 0.1)
            return (w + d).sum()
        return prog
    if name == "materialize_off_uses_none":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3
            @staticmethod
            def backward(ctx, g1, g2):
                r = None
                if g1 is not None: r = g1 * 2
                if g2 is not None: r = g2 * 3 if r is None else r + g2 * 3
                return r
        return lambda x: C.apply(x)[1].sum()
    if name == "same_fn_twice_different_patterns":
        class C(F):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3
            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 3
        def prog(x):
            a, b = C.apply(x)
            c, d = C.apply(x.tanh())
            return (a + b + c).sum()
        return prog
    raise KeyError(name)

# programs whose Function reaches a traced tensor that is not one of its
# arguments: a graph break (eager fallback; an error with fullgraph)
FOREIGN = {"closure_symbolic_in_backward"}

NAMES = ["save_input_twice_slots", "return_input", "save_view_of_output", "save_none_and_input",
         "nested_function_in_forward", "function_in_backward", "ctx_attr_input_and_output",
         "ctx_attr_list", "dataclass_concrete_rg", "dataclass_symbolic",
         "closure_symbolic_in_backward", "mark_non_diff_saved", "needs_input_grad_branch",
         "chain_three_multi", "materialize_off_uses_none", "same_fn_twice_different_patterns"]
