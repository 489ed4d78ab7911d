"""Runs one fuzz program (the source text gen.py makes) in several modes and
compares them.  Self-contained on purpose: a minimized repro is this file
with the program pasted in (see minimize.py), runnable with no other file.

Modes: "eager" (jitgrad), "interp" and "c" (jitgrad.compile with that
backend), "torch" (PyTorch eager, the reference).  A mode's result is one
record per call: the outputs (shape, requires_grad, values), every leaf's
.grad (None stays None), the autograd.grad results, or the first error.
jitgrad modes must agree bitwise (repr of the float lists); torch within
float32 tolerances relative to each tensor's largest magnitude."""
import math
import random
import zlib


def _leaf_maker(T, registry):
    def L(key, shape, rg=True):
        n = 1
        for s in shape:
            n *= s
        rng = random.Random(zlib.crc32(f"{key}{shape}".encode()))
        vals = [round(rng.uniform(-2.0, 2.0), 3) for _ in range(n)]
        t = T.tensor(vals, dtype=T.float32).reshape(*shape) if shape else \
            T.tensor(vals[0], dtype=T.float32)
        t = t.detach().clone()
        t.requires_grad_(bool(rg))
        registry.append(t)
        return t

    return L


def _weights(T, shape):
    n = 1
    for s in shape:
        n *= s
    vals = [((i * 5) % 7 - 3) * 0.25 + 0.125 for i in range(n)]
    return T.tensor(vals, dtype=T.float32).reshape(*shape) if shape else T.tensor(vals[0])


def _val(T, o):
    if not isinstance(o, T.Tensor):
        return repr(o)
    return (tuple(o.shape), bool(o.requires_grad), _list(o))


def _list(t):
    # clone: PyTorch's zero tensors (second derivatives of abs, ...) have
    # no storage, and tolist() refuses them
    return t.detach().clone().tolist()


def _err(e):
    msg = str(e).strip().split("\n")[0][:200]
    return f"{type(e).__name__}: {msg}"


def run_mode(T, src, mode):
    """The list of per-call records of program src under mode."""
    registry = []
    g = {"T": T, "L": _leaf_maker(T, registry), "__name__": "jgfuzz_program"}
    recs = []
    try:
        exec(compile(src, "<fuzz program>", "exec"), g)
        fn = g["fn"]
        if mode in ("interp", "c"):
            kw = {"dynamic": g["DYNAMIC"]} if "DYNAMIC" in g else {}
            fn = T.compile(fn, backend=mode, fullgraph=g.get("FULLGRAPH", False), **kw)
    except Exception as e:  # noqa: BLE001  (any error is a result)
        return [{"error": _err(e)}]
    prev = []
    for i, (call, how) in enumerate(g["CALLS"]):
        rec = {}
        try:
            step = g.get("BETWEEN", {}).get(i)
            if step:
                step()
            args = call(prev)
            out = fn(*args)
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            rec["out"] = [_val(T, o) for o in outs]
            loss = None
            for o in outs:
                if isinstance(o, T.Tensor) and o.requires_grad:
                    term = (o * _weights(T, tuple(o.shape))).sum()
                    loss = term if loss is None else loss + term
            if loss is not None:
                if how == "backward":
                    loss.backward(retain_graph=True)
                else:
                    ins = [t for t in registry if t.requires_grad]
                    gs = T.autograd.grad(loss, ins, retain_graph=True,
                                         create_graph=how == "double", allow_unused=True)
                    rec["agrad"] = [None if x is None else _val(T, x) for x in gs]
                    if how == "double":
                        s = None
                        for x in gs:
                            if x is not None and x.requires_grad:
                                term = (x * x).sum()
                                s = term if s is None else s + term
                        if s is not None:
                            s.backward(retain_graph=True)
            rec["grads"] = [None if t.grad is None else _list(t.grad) for t in registry]
            prev = outs
        except Exception as e:  # noqa: BLE001
            rec["error"] = _err(e)
        recs.append(rec)
        if "error" in rec:
            break
    return recs


# ------------------------------------------------------------------ comparison

def _flat(x):
    if isinstance(x, list):
        for y in x:
            yield from _flat(y)
    else:
        yield x


def _big(x):
    return max([abs(y) for y in _flat(x) if isinstance(y, float) and math.isfinite(y)] + [1.0])


def _close(a, b, scale=1.0):
    """a (jitgrad) vs b (torch) values: same structure, within tolerance:
    relative to the tensor's largest magnitude, and, more tightly, to scale,
    the largest of its record (the gradients of one loss): a gradient that
    cancels to about zero (log_softmax's along its dim) keeps the rounding
    of its terms, which are of that size."""
    fa, fb = list(_flat(a)), list(_flat(b))
    if len(fa) != len(fb):
        return False
    big = _big(fb)
    for x, y in zip(fa, fb):
        if isinstance(x, float) and isinstance(y, float):
            if math.isnan(x) or math.isnan(y):
                if not (math.isnan(x) and math.isnan(y)):
                    return False
            elif math.isinf(x) or math.isinf(y):
                if x != y:
                    return False
            elif abs(x - y) > 1e-5 + 2e-4 * big + 1e-6 * scale:
                return False
        elif x != y:
            return False
    return True


def _vals_differ(a, b, exact, scale=1.0):
    if a is None or b is None:
        return "none" if (a is None) != (b is None) else None
    if isinstance(a, tuple) and isinstance(b, tuple):
        if a[0] != b[0]:
            return "shape"
        if a[1] != b[1]:
            return "requires_grad"
        a, b = a[2], b[2]
    if exact:
        return None if repr(a) == repr(b) else "value"
    if isinstance(a, str) or isinstance(b, str):
        return None if a == b else "value"
    return None if _close(a, b, scale) else "value"


def diff(ra, rb, exact):
    """The first difference between two record lists (a = jitgrad eager or
    compiled, b = the reference), as a short kind string, or None."""
    for i, (a, b) in enumerate(zip(ra, rb)):
        ea, eb = a.get("error"), b.get("error")
        if ea and eb:
            return None
        if ea:
            return f"call{i}: error only here: {ea}"
        if eb:
            return f"call{i}: no error here, reference: {eb}"
        for key in ("out", "agrad", "grads"):
            xa, xb = a.get(key), b.get(key)
            if (xa is None) != (xb is None) or (xa is not None and len(xa) != len(xb)):
                return f"call{i}: {key} count"
            scale = _big([q[2] if isinstance(q, tuple) else q for q in xb or []
                          if not isinstance(q, str)])
            for j, (p, q) in enumerate(zip(xa or [], xb or [])):
                k = _vals_differ(p, q, exact, scale)
                if k:
                    return f"call{i}: {key}[{j}] {k}"
    if len(ra) != len(rb):
        return "call count"
    return None


def compare(recs):
    """{mode: records} -> list of (oracle, difference)."""
    out = []
    e = recs.get("eager")
    for m in ("interp", "c"):
        if m in recs and e is not None:
            d = diff(recs[m], e, exact=True)
            if d:
                out.append((f"{m}!=eager", d))
    if "torch" in recs and e is not None:
        d = diff(e, recs["torch"], exact=False)
        if d:
            out.append(("eager!=torch", d))
    return out


def report(src, modes=("eager", "interp", "c", "torch")):
    """Runs src in every available mode, prints the differences; exit status
    1 when there is one."""
    import jitgrad

    recs = {}
    for m in modes:
        if m == "torch":
            try:
                import torch
            except ImportError:
                continue
            recs[m] = run_mode(torch, src, m)
        elif m == "c" and not jitgrad.HAS_COMPILER:
            continue
        else:
            recs[m] = run_mode(jitgrad, src, m)
    for m, r in recs.items():
        print(f"== {m}")
        for i, rec in enumerate(r):
            print(f"  call{i}: {rec}")
    diffs = compare(recs)
    for oracle, d in diffs:
        print(f"MISMATCH {oracle}: {d}")
    if not diffs:
        print("all modes agree")
    return 1 if diffs else 0
