"""More of PyTorch's math, shape and search functions: einsum, tensordot,
inner, kron, vdot, chain_matmul, addmv, addr, addbmm; cdist, dist, diff,
cross, logaddexp / logaddexp2, hypot, float_power, copysign, fmax / fmin,
heaviside, sinc, rad2deg / deg2rad, exp2, rsub, positive; cumprod, cummax /
cummin, logcumsumexp, aminmax; take_along_dim, select, tensor_split and the
h/v/dsplit family, split_with_sizes, rot90, diag_embed, diagflat, diagonal,
block_diag, cartesian_prod, combinations, meshgrid, tril_indices /
triu_indices, vander, Tensor.unfold, sum_to_size; median / nanmedian,
kthvalue, mode, msort, unique / unique_consecutive, bincount, histc,
searchsorted / bucketize, isin, isneginf / isposinf / isreal, argwhere,
trapz / trapezoid / cumulative_trapezoid, cov, corrcoef, renorm.

Every differentiable result is a composite of existing differentiable
jitgrad ops (matmul / bmm for contractions, gather for selected elements,
products for scans), so autograd and jitgrad.compile see the ops it is made
of.  Results that are host computations (unique, bincount, histc, mode's
choice) read values with numpy: under compile that is a graph break, as
every value read is (the call runs eagerly; fullgraph=True raises).
"""
import builtins as _b
import collections as _collections
import itertools as _itertools
import math as _math
import numbers as _numbers

import numpy as _np

from . import _C
from ._C import Tensor
from ._opsshape import cat as _cat, stack as _stack


def _t(x, fn, arg="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _wrap(d, ndim):
    n = _b.max(ndim, 1)
    if not isinstance(d, _numbers.Integral):
        raise TypeError(f"dim must be int, not {type(d).__name__}")
    if d < -n or d >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return int(d) + n if d < 0 else int(d)


def _float(x):
    """Integer and bool tensors compute in float32, as PyTorch's float ops."""
    return x if x.is_floating_point() else x.to(_C.float32)


def _promote(a, b):
    """a and b as one dtype (PyTorch's promotion among jitgrad's dtypes)."""
    if a.dtype == b.dtype:
        return a, b
    order = [_C.bool, _C.int32, _C.int64, _C.float32, _C.float64]
    fa, fb = a.is_floating_point(), b.is_floating_point()
    if fa and not fb:
        return a, b.to(a.dtype)
    if fb and not fa:
        return a.to(b.dtype), b
    d = order[_b.max(order.index(a.dtype), order.index(b.dtype))]
    return a.to(d), b.to(d)


def _type_name(dtype):
    from ._inplace import _type_name as name

    return name(dtype)


def _no_grad():
    from . import no_grad

    return no_grad()


def _shape(x):
    return tuple(int(s) for s in x.shape)


def _long(values):
    return _C.tensor(list(values), dtype=_C.int64)


# ---------------------------------------------------------------- products

def _diag_last(x, d1, d2):
    """The diagonal of dims d1 and d2 (same size) as x's last dim."""
    n = x.dim()
    order = [i for i in range(n) if i not in (d1, d2)] + [d1, d2]
    y = x.permute(*order)
    k = y.shape[-1]
    return y.reshape(*y.shape[:-2], k * k)[..., ::k + 1]


def _sum_dims(x, dims):
    return x.sum(dim=tuple(dims)) if dims else x


def _einsum_parse(equation, operands):
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, rhs = eq.split("->", 1)
        explicit = True
    else:
        lhs, rhs, explicit = eq, None, False
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation"
                           if len(operands) > len(terms) else
                           "einsum(): fewer operands were provided than specified in the equation")
    ell_dims = 0
    parsed = []
    for i, (term, op) in enumerate(zip(terms, operands)):
        if term.count("...") > 1 or term.replace("...", "").count(".") or (
                "..." not in term and "." in term):
            raise RuntimeError("einsum(): found '.' for operand "
                               f"{i} that is not part of any ellipsis")
        for c in term.replace("...", ""):
            if not c.isalpha():
                raise RuntimeError(f"einsum(): invalid subscript given at index {lhs.index(c)} "
                                   "in the equation string, subscripts must be in [a-zA-Z]")
        nlab = len(term.replace("...", ""))
        if "..." in term:
            if op.dim() < nlab:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nlab}) "
                                   "is more than the number of dimensions "
                                   f"({op.dim()}) for operand {i}")
            ell_dims = _b.max(ell_dims, op.dim() - nlab)
        elif op.dim() != nlab:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nlab}) does "
                               "not match the number of dimensions "
                               f"({op.dim()}) for operand {i} and no ellipsis was given")
        parsed.append(term)
    # ellipsis dims as the labels chr(0) .. chr(ell_dims - 1), right-aligned
    ell = [chr(i) for i in range(ell_dims)]
    labels = []
    for term, op in zip(parsed, operands):
        if "..." in term:
            a, b = term.split("...")
            k = op.dim() - len(a) - len(b)
            labels.append(list(a) + ell[ell_dims - k:] + list(b))
        else:
            labels.append(list(term))
    if explicit:
        if rhs.count("...") > 1 or rhs.replace("...", "").count("."):
            raise RuntimeError("einsum(): found '.' for output that is not part of any ellipsis")
        seen = set()
        for c in rhs.replace("...", ""):
            if not c.isalpha():
                raise RuntimeError("einsum(): invalid subscript given at index "
                                   f"{len(lhs) + 2 + rhs.index(c)} in the equation string, "
                                   "subscripts must be in [a-zA-Z]")
            if c in seen:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                   "the output")
            seen.add(c)
            if not any(c in lab for lab in labels):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   "equation for any input operand")
        if "..." in rhs:
            a, b = rhs.split("...")
            out = list(a) + ell + list(b)
        else:
            out = list(rhs)
    else:
        count = _collections.Counter(c for lab in labels for c in lab if c not in ell)
        # PyTorch numbers A-Z before a-z
        out = ell + sorted((c for c, n in count.items() if n == 1),
                           key=lambda c: (c.islower(), c))
    return labels, out


def einsum(*args):
    """einsum(equation, *operands), einsum(equation, [operands]) or the
    sublist form einsum(op1, [0, 1], op2, [1, 2], [0, 2]): repeated
    subscripts within an operand take its diagonal, subscripts no other
    operand nor the output has are summed first, and the operands are
    contracted left to right, each pair as one batched matmul (size-1 dims
    broadcast)."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], Tensor):
        def sub(n):
            if n is Ellipsis:
                return "..."
            if 0 <= n < 26:
                return chr(ord("A") + n)
            if 26 <= n < 52:
                return chr(ord("a") + n - 26)
            raise ValueError("einsum(): subscript in subscript list is not within the valid "
                             "range [0, 52)")

        equation = ",".join("".join(sub(n) for n in lst) for lst in args[1::2])
        if len(args) % 2 == 1:
            equation += "->" + "".join(sub(n) for n in args[-1])
            args = (equation,) + tuple(args[:-1:2])
        else:
            args = (equation,) + tuple(args[::2])
    if not isinstance(args[0], str):
        raise TypeError("einsum(): argument 'equation' (position 1) must be str")
    equation, ops = args[0], list(args[1:])
    if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
        ops = list(ops[0])
    if not ops:
        raise RuntimeError("einsum(): must provide at least one operand")
    for i, o in enumerate(ops):
        _t(o, "einsum", "operands", i + 2)
    labels, out = _einsum_parse(equation, ops)
    sizes = {}
    for k, (lab, op) in enumerate(zip(labels, ops)):
        own = {}
        for c, s in zip(lab, op.shape):
            if c in own and own[c] != s:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but "
                                   f"the sizes don't match, {s} != {own[c]}")
            own[c] = s
        for c, s in own.items():
            if c in sizes and sizes[c] != s and s != 1 and sizes[c] != 1:
                if c.isalpha():
                    raise RuntimeError(f"einsum(): subscript {c} has size {s} for operand {k} "
                                       "which does not broadcast with previously seen size "
                                       f"{sizes[c]}")
                raise RuntimeError("einsum(): operands do not broadcast with remapped shapes "
                                   f"(original->remapped): {list(op.shape)}")
            sizes[c] = s if c not in sizes or sizes[c] == 1 else sizes[c]
    # repeated subscripts within an operand: its diagonal
    terms = []
    for lab, op in zip(labels, ops):
        lab = list(lab)
        while len(set(lab)) != len(lab):
            c = next(c for c in lab if lab.count(c) > 1)
            i = lab.index(c)
            j = lab.index(c, i + 1)
            op = _diag_last(op, i, j)
            lab = [x for k, x in enumerate(lab) if k not in (i, j)] + [c]
        terms.append((op, lab))
    while True:
        # sum the subscripts no other operand nor the output needs
        for k, (op, lab) in enumerate(terms):
            others = set(out)
            for m, (_, lb) in enumerate(terms):
                if m != k:
                    others.update(lb)
            drop = [i for i, c in enumerate(lab) if c not in others]
            if drop:
                terms[k] = (_sum_dims(op, drop), [c for i, c in enumerate(lab) if i not in drop])
        if len(terms) == 1:
            break
        (a, la), (b, lb) = terms[0], terms[1]
        rest = set(out)
        for _, lab in terms[2:]:
            rest.update(lab)
        terms = [_contract(a, la, b, lb, rest)] + terms[2:]
    op, lab = terms[0]
    # a subscript of size 1 in every operand broadcast against nothing stays;
    # expand dims that were broadcast away
    res = op.permute(*[lab.index(c) for c in out]) if lab else op
    target = [sizes[c] for c in out]
    if list(res.shape) != target:
        res = res.expand(*target)
    return res


def _mm(a, b):
    """matmul; integer operands as a broadcast product and sum, so that the
    result stays integer (jitgrad's matmul computes in floating point)."""
    if a.is_floating_point() or b.is_floating_point():
        return a.matmul(b)
    return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(dim=-2)


def _contract(a, la, b, lb, keep):
    """a (subscripts la) times b (lb), summed over the shared subscripts not
    in keep: one bmm over [batch, left, k] x [batch, k, right]."""
    # a contracted subscript of size 1 on one side: sum it on the other first
    for c in [c for c in la if c in lb and c not in keep]:
        i, j = la.index(c), lb.index(c)
        if a.shape[i] != b.shape[j]:
            if a.shape[i] == 1:
                b = b.sum(dim=j, keepdim=True)
            else:
                a = a.sum(dim=i, keepdim=True)
    batch = [c for c in la if c in lb and c in keep]
    contr = [c for c in la if c in lb and c not in keep]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]

    def size(t, lab, c):
        return t.shape[lab.index(c)]

    bs = [_b.max(size(a, la, c), size(b, lb, c)) for c in batch]
    ls = [size(a, la, c) for c in left]
    rs = [size(b, lb, c) for c in right]
    ks = [size(a, la, c) for c in contr]
    pa = a.permute(*[la.index(c) for c in batch + left + contr])
    pb = b.permute(*[lb.index(c) for c in batch + contr + right])
    if bs:
        pa = pa.expand(*bs, *pa.shape[len(bs):])
        pb = pb.expand(*bs, *pb.shape[len(bs):])
    nb, nl, nr, nk = _math.prod(bs), _math.prod(ls), _math.prod(rs), _math.prod(ks)
    if nk == 1 and not contr:
        # an outer product per batch: broadcast multiply
        r = pa.reshape(nb, nl, 1) * pb.reshape(nb, 1, nr)
    else:
        r = _mm(pa.reshape(nb, nl, nk), pb.reshape(nb, nk, nr))
    return r.reshape(*bs, *ls, *rs), batch + left + right


def tensordot(a, b, dims=2, out=None):
    """Sum of products over dims[0] of a and dims[1] of b (an int n: a's
    last n dims and b's first n), as one matmul."""
    if out is not None:
        raise TypeError("tensordot(): jitgrad does not support out=")
    _t(a, "tensordot", "a", 1)
    _t(b, "tensordot", "b", 2)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, _numbers.Integral):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.dim() or dims > b.dim():
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da = list(range(a.dim() - dims, a.dim()))
        db = list(range(dims))
    else:
        if len(dims) != 2:
            raise RuntimeError("tensordot expects dims to be a pair of lists or an int")
        da, db = dims
        da = [da] if isinstance(da, _numbers.Integral) else list(da)
        db = [db] if isinstance(db, _numbers.Integral) else list(db)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    da = [_wrap(d, a.dim()) for d in da]
    db = [_wrap(d, b.dim()) for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[x]} in dim {x} and second has size {b.shape[y]} "
                               f"in dim {y}")
    ra = [i for i in range(a.dim()) if i not in da]
    rb = [i for i in range(b.dim()) if i not in db]
    k = _math.prod(a.shape[i] for i in da)
    pa = a.permute(*(ra + da)).reshape(_math.prod(a.shape[i] for i in ra), k)
    pb = b.permute(*(db + rb)).reshape(k, _math.prod(b.shape[i] for i in rb))
    return _mm(pa, pb).reshape(*[a.shape[i] for i in ra], *[b.shape[i] for i in rb])


def inner(input, other, *, out=None):
    """Sum over the last dims of both (a product when one is a scalar)."""
    if out is not None:
        raise TypeError("inner(): jitgrad does not support out=")
    _t(input, "inner")
    _t(other, "inner", "other", 2)
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def kron(input, other, *, out=None):
    """The Kronecker product: every element of input times other, laid out
    block by block (a broadcast multiply and a reshape)."""
    if out is not None:
        raise TypeError("kron(): jitgrad does not support out=")
    _t(input, "kron")
    _t(other, "kron", "other", 2)
    n = _b.max(input.dim(), other.dim())
    sa = [1] * (n - input.dim()) + list(input.shape)
    sb = [1] * (n - other.dim()) + list(other.shape)
    a = input.reshape(*[v for s in sa for v in (s, 1)])
    b = other.reshape(*[v for s in sb for v in (1, s)])
    return (a * b).reshape(*[x * y for x, y in zip(sa, sb)])


def vdot(input, other, *, out=None):
    """The dot product of two 1-D tensors (jitgrad has no complex dtypes, so
    nothing is conjugated)."""
    if out is not None:
        raise TypeError("vdot(): jitgrad does not support out=")
    _t(input, "vdot")
    _t(other, "vdot", "other", 2)
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D "
                           "tensors")
    if input.dtype != other.dtype:
        raise RuntimeError("expected scalar type " + _type_name(input.dtype) + " but found " +
                           _type_name(other.dtype))
    if input.shape[0] != other.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{input.shape[0]}] and "
                           f"src [{other.shape[0]}] to have the same number of elements, but got "
                           f"{input.shape[0]} and {other.shape[0]} elements respectively")
    return input.dot(other)


def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices, left to right (PyTorch deprecates it for
    linalg.multi_dot)."""
    if out is not None:
        raise TypeError("chain_matmul(): jitgrad does not support out=")
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        _t(m, "chain_matmul", "matrices", 1)
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    r = matrices[0]
    for m in matrices[1:]:
        r = r.mm(m)
    return r


def _scaled_add(input, prod, beta, alpha):
    """beta * input + alpha * prod; beta == 0 ignores input (NaN included)."""
    if alpha != 1:
        prod = prod * alpha
    if beta == 0:
        return prod + _C.zeros_like(input)
    return (input if beta == 1 else input * beta) + prod


def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat @ vec)."""
    if out is not None:
        raise TypeError("addmv(): jitgrad does not support out=")
    _t(input, "addmv")
    _t(mat, "addmv", "mat", 2)
    _t(vec, "addmv", "vec", 3)
    if mat.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, {mat.dim()}, "
                           f"{vec.dim()}")
    if mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got {input.shape[0] if input.dim() else 1}, "
                           f"{mat.shape[0]}x{mat.shape[1]},{vec.shape[0]}")
    return _scaled_add(input, mat.mv(vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * outer(vec1, vec2)."""
    if out is not None:
        raise TypeError("addr(): jitgrad does not support out=")
    _t(input, "addr")
    _t(vec1, "addr", "vec1", 2)
    _t(vec2, "addr", "vec2", 3)
    if vec1.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, but got {vec1.dim()}-D")
    if vec2.dim() != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec2, but got {vec2.dim()}-D")
    return _scaled_add(input, vec1.outer(vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * sum over the batch of batch1[i] @ batch2[i]:
    one matmul of [n, b*k] by [b*k, m]."""
    if out is not None:
        raise TypeError("addbmm(): jitgrad does not support out=")
    _t(input, "addbmm")
    _t(batch1, "addbmm", "batch1", 2)
    _t(batch2, "addbmm", "batch2", 3)
    if batch1.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if batch2.dim() != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    b, n, k = batch1.shape
    b2, k2, m = batch2.shape
    if b != b2:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {b} and "
                           f"{b2}")
    if k != k2:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{k} and {k2}x{m})")
    prod = batch1.permute(1, 0, 2).reshape(n, b * k).matmul(batch2.reshape(b * k, m))
    return _scaled_add(input, prod, beta, alpha)


# ---------------------------------------------------------------- distances

def _safe_root(s, p):
    """s ** (1 / p) with a zero gradient where s == 0 (PyTorch's norm and
    cdist backward give 0 there, not NaN)."""
    zero = s == 0
    safe = _C.where(zero, _C.ones_like(s), s)
    r = safe.sqrt() if p == 2 else safe.pow(1.0 / p)
    return _C.where(zero, _C.zeros_like(s), r)


def _safe_abs_pow(a, p):
    """|a| ** p with a zero gradient where a == 0."""
    if p == 1:
        return a.abs()
    if p == 2:
        return a * a
    z = a == 0
    safe = _C.where(z, _C.ones_like(a), a.abs())
    return _C.where(z, _C.zeros_like(a), safe.pow(p))


def _pnorm(d, p, dim, keepdim=False):
    if p == _math.inf:
        return d.abs().amax(dim=dim, keepdim=keepdim)
    if p == -_math.inf:
        return d.abs().amin(dim=dim, keepdim=keepdim)
    if p == 0:
        return (d != 0).to(d.dtype).sum(dim=dim, keepdim=keepdim)
    s = _safe_abs_pow(d, p).sum(dim=dim, keepdim=keepdim)
    return s if p == 1 else _safe_root(s, p)


_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of x1 [..., P, M] and each row of
    x2 [..., R, M]: [..., P, R].  p == 2 with P or R above 25 (or
    compute_mode 'use_mm_for_euclid_dist') takes its values from PyTorch's
    matmul expansion |a|^2 - 2 a.b + |b|^2 and, as PyTorch's backward, its
    gradient from the differences; otherwise the differences are formed."""
    _t(x1, "cdist", "x1", 1)
    _t(x2, "cdist", "x2", 2)
    if not x1.is_floating_point():
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: "
                           f"{_type_name(x1.dtype)}")
    if not x2.is_floating_point():
        raise RuntimeError(f"cdist only supports floating-point dtypes, X2 got: "
                           f"{_type_name(x2.dtype)}")
    if x1.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D")
    if x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X2 got: {x2.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.dtype != x2.dtype:
        raise RuntimeError("cdist: X1 and X2 must have the same dtype")
    from ._aliases import broadcast_shapes

    batch = tuple(broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2])))
    a = x1.expand(*batch, *x1.shape[-2:])
    b = x2.expand(*batch, *x2.shape[-2:])
    P, R = x1.shape[-2], x2.shape[-2]
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == _CDIST_MODES[0] and (P > 25 or R > 25)))
    if use_mm:
        an = (a * a).sum(dim=-1, keepdim=True)
        bn = (b * b).sum(dim=-1, keepdim=True)
        a_ = _cat([a * -2.0, an, _C.ones_like(an)], -1)
        b_ = _cat([b, _C.ones_like(bn), bn], -1)
        with _no_grad():
            sq = a_.matmul(b_.transpose(-1, -2)).clamp_min(0.0)
            dist = _safe_root(sq, 2)
        if not (_C.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
            return dist
        # PyTorch's backward uses the differences, not the expansion (whose
        # rounding near a zero distance would blow up sqrt's derivative):
        # the value of the expansion, the gradient of the exact distance
        exact = _pnorm(a.unsqueeze(-2) - b.unsqueeze(-3), 2.0, -1)
        return dist + (exact - exact.detach())
    d = a.unsqueeze(-2) - b.unsqueeze(-3)
    return _pnorm(d, float(p), -1)


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), a 0-d tensor."""
    _t(input, "dist")
    _t(other, "dist", "other", 2)
    if isinstance(p, Tensor):
        p = p.item()
    d = input - other
    return _pnorm(d.reshape(-1), float(p), 0)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim, after prepend / append are
    concatenated (logical_xor for bool)."""
    _t(input, "diff")
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    dim = _wrap(dim, input.dim())
    parts = []
    for extra in (prepend, input, append):
        if extra is None:
            continue
        if extra is not input:
            _t(extra, "diff", "prepend" if extra is prepend else "append", 4)
            if extra.dim() != input.dim():
                raise RuntimeError("diff expects prepend or append to be the same dimension as "
                                   "input")
        parts.append(extra)
    x = _cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        L = x.shape[dim]
        if L == 0:
            break
        hi, lo = x.narrow(dim, 1, L - 1), x.narrow(dim, 0, L - 1)
        x = hi.logical_xor(lo) if x.dtype == _C.bool else hi - lo
    return x


def cross(input, other, dim=None, *, out=None):
    """The cross product along dim (None: the first dim of size 3, PyTorch
    1.13's deprecated default), inputs broadcast."""
    if out is not None:
        raise TypeError("cross(): jitgrad does not support out=")
    _t(input, "cross")
    _t(other, "cross", "other", 2)
    if input.dim() != other.dim():
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions.")
    from ._aliases import broadcast_shapes

    shape = tuple(broadcast_shapes(tuple(input.shape), tuple(other.shape)))
    if dim is None:
        d = next((i for i, s in enumerate(shape) if s == 3), None)
        if d is None:
            raise RuntimeError("no dimension of size 3 in input")
        dim = d
    dim = _wrap(dim, len(shape))
    if input.shape[dim] != 3 or other.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{input.shape[dim]} and {other.shape[dim]}")
    a, b = _promote(input, other)
    a, b = a.expand(*shape), b.expand(*shape)
    a0, a1, a2 = (a.narrow(dim, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(dim, i, 1) for i in range(3))
    return _cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], dim)


# ---------------------------------------------------------------- pointwise

def _binary(input, other, fn):
    _t(input, fn)
    if not isinstance(other, Tensor):
        if isinstance(other, (_numbers.Real, bool)):
            other = _C.tensor(other, dtype=input.dtype if input.is_floating_point() else (
                _C.float32 if isinstance(other, float) else input.dtype))
        else:
            raise TypeError(f"{fn}(): argument 'other' (position 2) must be Tensor, not "
                            f"{type(other).__name__}")
    return _promote(input, other)


def logaddexp(input, other, *, out=None):
    """log(exp(input) + exp(other)) without overflow: max + log1p(exp(-|d|))
    (equal infinities give themselves)."""
    if out is not None:
        raise TypeError("logaddexp(): jitgrad does not support out=")
    a, b = _binary(input, other, "logaddexp")
    a, b = _float(a), _float(b)
    m = a.maximum(b)
    r = m + (-(a - b).abs()).exp().log1p()
    same_inf = a.isinf() & (a == b)
    return _C.where(same_inf, a.expand_as(r), r)


def logaddexp2(input, other, *, out=None):
    """log2(2**input + 2**other) without overflow."""
    if out is not None:
        raise TypeError("logaddexp2(): jitgrad does not support out=")
    a, b = _binary(input, other, "logaddexp2")
    a, b = _float(a), _float(b)
    m = a.maximum(b)
    r = m + (-(a - b).abs() * _math.log(2.0)).exp().log1p() * (1.0 / _math.log(2.0))
    same_inf = a.isinf() & (a == b)
    return _C.where(same_inf, a.expand_as(r), r)


def hypot(input, other, *, out=None):
    """sqrt(input**2 + other**2) as max * sqrt(1 + (min / max)**2), so it
    neither overflows nor underflows (an infinity wins over NaN, as C's
    hypot); its gradient at (0, 0) is 0 where PyTorch's is NaN."""
    if out is not None:
        raise TypeError("hypot(): jitgrad does not support out=")
    _t(input, "hypot")
    _t(other, "hypot", "other", 2)
    a, b = _promote(_float(input), _float(other))
    aa, bb = a.abs(), b.abs()
    m, n = aa.maximum(bb), aa.minimum(bb)
    zero = m == 0
    q = n / _C.where(zero, _C.ones_like(m), m)
    r = m * (q * q + 1.0).sqrt()
    inf = aa.isinf() | bb.isinf()
    return _C.where(inf, _C.full(tuple(r.shape), _math.inf, dtype=r.dtype), r)


def float_power(input, exponent, *, out=None):
    """input ** exponent in float64."""
    if out is not None:
        raise TypeError("float_power(): jitgrad does not support out=")
    if isinstance(input, Tensor):
        base = input.to(_C.float64)
        e = exponent.to(_C.float64) if isinstance(exponent, Tensor) else float(exponent)
        return base.pow(e)
    if isinstance(exponent, Tensor):
        return _C.pow(float(input), exponent.to(_C.float64))
    raise TypeError("float_power(): argument 'input' must be Tensor")


def _negative_sign(b):
    """b < 0, -0.0 included (1 / -0.0 is -inf)."""
    if not b.is_floating_point():
        return b < 0
    return (b < 0) | ((b == 0) & ((1.0 / b) < 0))


def copysign(input, other, *, out=None):
    """|input| with other's sign (-0.0 counts as negative); integer inputs
    compute in float32."""
    if out is not None:
        raise TypeError("copysign(): jitgrad does not support out=")
    a, b = _binary(input, other, "copysign")
    a = _float(a)
    b = b.to(a.dtype) if b.is_floating_point() else b
    mag = a.abs()
    neg = _negative_sign(b.detach())
    return _C.where(neg, -mag, mag)


def _fmaxmin(input, other, fn, keep_first):
    _t(other, fn, "other", 2)
    a, b = _binary(input, other, fn)
    if a.is_floating_point():
        cond = keep_first(a, b) | b.isnan()
    else:
        cond = keep_first(a, b)
    shape = tuple(_np.broadcast_shapes(_shape(a), _shape(b)))
    return _C.where(cond, a.expand(*shape), b.expand(*shape))


def fmax(input, other, *, out=None):
    """The larger of input and other, a NaN losing to a number (both NaN:
    NaN); ties and NaN others send the gradient to input, as PyTorch's."""
    if out is not None:
        raise TypeError("fmax(): jitgrad does not support out=")
    return _fmaxmin(input, other, "fmax", lambda a, b: a >= b)


def fmin(input, other, *, out=None):
    """The smaller of input and other, a NaN losing to a number."""
    if out is not None:
        raise TypeError("fmin(): jitgrad does not support out=")
    return _fmaxmin(input, other, "fmin", lambda a, b: a <= b)


def heaviside(input, values, *, out=None):
    """0 where input < 0, 1 where input > 0, values where input == 0 (same
    dtypes required); not differentiable, as in PyTorch."""
    if out is not None:
        raise TypeError("heaviside(): jitgrad does not support out=")
    _t(input, "heaviside")
    _t(values, "heaviside", "values", 2)
    if input.dtype != values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    x, v = input.detach(), values.detach()
    shape = tuple(_np.broadcast_shapes(_shape(x), _shape(v)))
    pos = (x > 0).to(x.dtype).expand(*shape)
    return _C.where(x == 0, v.expand(*shape), pos)


def sinc(input, *, out=None):
    """sin(pi x) / (pi x), 1 at 0 (with a zero gradient there)."""
    if out is not None:
        raise TypeError("sinc(): jitgrad does not support out=")
    x = _float(_t(input, "sinc"))
    zero = x == 0
    px = x * _math.pi
    safe = _C.where(zero, _C.ones_like(px), px)
    return _C.where(zero, _C.ones_like(px), safe.sin() / safe)


def rad2deg(input, *, out=None):
    if out is not None:
        raise TypeError("rad2deg(): jitgrad does not support out=")
    return _float(_t(input, "rad2deg")) * (180.0 / _math.pi)


def deg2rad(input, *, out=None):
    if out is not None:
        raise TypeError("deg2rad(): jitgrad does not support out=")
    return _float(_t(input, "deg2rad")) * (_math.pi / 180.0)


def exp2(input, *, out=None):
    """2 ** input (integer input in float32)."""
    if out is not None:
        raise TypeError("exp2(): jitgrad does not support out=")
    return _C.pow(2.0, _float(_t(input, "exp2")))


def rsub(input, other, *, alpha=1):
    """other - alpha * input."""
    _t(input, "rsub")
    if isinstance(other, Tensor):
        return other - (input * alpha if alpha != 1 else input)
    return (input * alpha if alpha != 1 else input) * -1 + other


def positive(input):
    """input itself (bool refused, as PyTorch's unary +)."""
    _t(input, "positive")
    if input.dtype == _C.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# ---------------------------------------------------------------- scans

def _scan(x, dim, combine):
    """The inclusive scan of combine along dim (Hillis-Steele: log2(n)
    steps, each a differentiable combine of x with itself shifted)."""
    n = x.shape[dim]
    s = 1
    while s < n:
        head = x.narrow(dim, 0, s)
        tail = combine(x.narrow(dim, 0, n - s), x.narrow(dim, s, n - s))
        x = _cat([head, tail], dim)
        s *= 2
    return x


def _scan_dtype(input, dtype):
    if dtype is not None:
        return input.to(dtype)
    if input.dtype in (_C.bool, _C.int32):
        return input.to(_C.int64)
    return input


def cumprod(input, dim, *, dtype=None, out=None):
    """The running product along dim: log2(n) rounds of products of shifted
    slices, so the gradient (through products only) is exact at zeros too.
    bool and int32 accumulate in int64, as PyTorch's."""
    if out is not None:
        raise TypeError("cumprod(): jitgrad does not support out=")
    _t(input, "cumprod")
    x = _scan_dtype(input, dtype)
    if x.dim() == 0:
        _wrap(dim, 0)
        return x.clone()
    return _scan(x, _wrap(dim, x.dim()), lambda a, b: a * b)


_RETURN_TYPES = {}


def _return_type(name, fields):
    """PyTorch's torch.return_types.<name>: a named tuple."""
    if name not in _RETURN_TYPES:
        t = _collections.namedtuple(name, fields)
        t.__module__ = "jitgrad.return_types"
        _RETURN_TYPES[name] = t
    return _RETURN_TYPES[name]


def _cumext(input, dim, fn, later_wins):
    _t(input, fn)
    n = input.dim()
    d = _wrap(dim, n)
    if n == 0:
        return _return_type(fn, ["values", "indices"])(input.clone(), _C.zeros((), dtype=_C.int64))
    with _no_grad():
        v = input.detach()
        shape = [1] * n
        shape[d] = v.shape[d]
        idx = _C.arange(v.shape[d]).reshape(*shape).expand(*v.shape).contiguous()
        if v.numel() > 0:
            fl = v.is_floating_point()

            def comb(a, b):
                (va, ia), (vb, ib) = a, b
                take = later_wins(va, vb)
                if fl:
                    take = vb.isnan() | (va.isnan().logical_not() & take)
                return _C.where(take, vb, va), _C.where(take, ib, ia)

            L = v.shape[d]
            s = 1
            while s < L:
                hv, hi = v.narrow(d, 0, s), idx.narrow(d, 0, s)
                tv, ti = comb((v.narrow(d, 0, L - s), idx.narrow(d, 0, L - s)),
                              (v.narrow(d, s, L - s), idx.narrow(d, s, L - s)))
                v, idx = _cat([hv, tv], d), _cat([hi, ti], d)
                s *= 2
    values = input.gather(d, idx) if input.numel() else input.clone()
    return _return_type(fn, ["values", "indices"])(values, idx)


def cummax(input, dim, *, out=None):
    """(values, indices) of the running maximum along dim: ties and NaNs
    take the later index, as PyTorch's; values gather input (gradient to the
    chosen elements)."""
    if out is not None:
        raise TypeError("cummax(): jitgrad does not support out=")
    return _cumext(input, dim, "cummax", lambda a, b: b >= a)


def cummin(input, dim, *, out=None):
    """(values, indices) of the running minimum along dim."""
    if out is not None:
        raise TypeError("cummin(): jitgrad does not support out=")
    return _cumext(input, dim, "cummin", lambda a, b: b <= a)


def logcumsumexp(input, dim, *, out=None):
    """log(cumsum(exp(input))) along dim, each step a stable logaddexp.
    Gradients at infinite inputs are the composite's (e.g. 1 for a leading
    -inf) where PyTorch's formula gives NaN."""
    if out is not None:
        raise TypeError("logcumsumexp(): jitgrad does not support out=")
    x = _float(_t(input, "logcumsumexp"))
    if x.dim() == 0:
        _wrap(dim, 0)
        return x.clone()
    return _scan(x, _wrap(dim, x.dim()), lambda a, b: logaddexp(a, b))


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over all elements or along dim (amin and amax, so it has
    their gradients where PyTorch 1.13 has none)."""
    _t(input, "aminmax")
    T = _return_type("aminmax", ["min", "max"])
    if input.numel() == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the "
                           "operation has no identity.")
    if dim is None:
        if keepdim:
            dims = tuple(range(input.dim()))
            return T(input.amin(dim=dims, keepdim=True), input.amax(dim=dims, keepdim=True))
        return T(input.min(), input.max())
    d = _wrap(dim, input.dim())
    if input.dim() == 0:
        return T(input.clone(), input.clone())
    return T(input.amin(dim=d, keepdim=keepdim), input.amax(dim=d, keepdim=keepdim))


# ---------------------------------------------------------------- shapes

def take_along_dim(input, indices, dim=None, *, out=None):
    """input's elements at indices along dim (input and indices broadcast in
    the other dims); dim None: of the flattened input."""
    if out is not None:
        raise TypeError("take_along_dim(): jitgrad does not support out=")
    _t(input, "take_along_dim")
    _t(indices, "take_along_dim", "indices", 2)
    if indices.dtype != _C.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got " +
                           _type_name(indices.dtype))
    if dim is None:
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.dim() != indices.dim():
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.dim()} dimensions for input, "
                           f"and {indices.dim()} dimensions for indices")
    d = _wrap(dim, input.dim())
    si, sx = list(input.shape), list(indices.shape)
    si[d] = sx[d] = 1
    b = list(_np.broadcast_shapes(tuple(si), tuple(sx)))
    bi, bx = list(b), list(b)
    bi[d], bx[d] = input.shape[d], indices.shape[d]
    return input.expand(*bi).gather(d, indices.expand(*bx))


def select(input, dim, index):
    """The slice at index along dim, that dim removed (a view)."""
    _t(input, "select")
    if input.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap(dim, input.dim())
    n = input.shape[d]
    if index < -n or index >= n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {d}")
    return input.narrow(d, index % n, 1).squeeze(d)


def _narrows(x, dim, bounds):
    return tuple(x.narrow(dim, s, e - s) for s, e in bounds)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input split along dim: into n near-equal parts (the first
    size % n one longer) or at the given indices."""
    _t(input, "tensor_split")
    if input.dim() == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    d = _wrap(dim, input.dim())
    L = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype != _C.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {_type_name(ios.dtype)}")
        if ios.dim() > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               f"zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {ios.dim()} dims")
        ios = ios.item() if ios.dim() == 0 else ios.tolist()
    if isinstance(ios, _numbers.Integral):
        n = int(ios)
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(L, n)
        bounds, s = [], 0
        for i in range(n):
            e = s + q + (1 if i < r else 0)
            bounds.append((s, e))
            s = e
        return _narrows(input, d, bounds)
    pts = [int(i) for i in ios]
    bounds, s = [], 0
    for p in pts + [L]:
        p = _b.min(_b.max(p + L if p < 0 else p, 0), L)
        bounds.append((s, _b.max(p, s)))  # as slicing: [3:1] is empty, the next starts at 1
        s = p
    return _narrows(input, d, bounds)


def _split_family(input, ios, dim, name, need):
    _t(input, name)
    if input.dim() < need:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {need} dimension, "
                           f"but got a tensor with {input.dim()} dimensions!")
    if isinstance(ios, _numbers.Integral):
        L = input.shape[dim]
        if ios == 0 or L % ios:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but "
                               f"the size of the dimension {L} is not divisible by the "
                               f"split_size {ios}!")
    return tensor_split(input, ios, dim)


def hsplit(input, indices_or_sections):
    dim = 0 if isinstance(input, Tensor) and input.dim() == 1 else 1
    return _split_family(input, indices_or_sections, dim, "hsplit", 1)


def vsplit(input, indices_or_sections):
    return _split_family(input, indices_or_sections, 0, "vsplit", 2)


def dsplit(input, indices_or_sections):
    return _split_family(input, indices_or_sections, 2, "dsplit", 3)


def split_with_sizes(input, split_sizes, dim=0):
    """Views of the given sizes along dim (they must add up to its size)."""
    _t(input, "split_with_sizes")
    d = _wrap(dim, input.dim())
    L = input.shape[d]
    sizes = [int(s) for s in split_sizes]
    if _b.sum(sizes) != L or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {L} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    bounds, s = [], 0
    for n in sizes:
        bounds.append((s, s + n))
        s += n
    return _narrows(input, d, bounds)


def rot90(input, k=1, dims=(0, 1)):
    """input rotated by k quarter turns in the plane of dims (from the first
    towards the second), as flips and a transpose."""
    _t(input, "rot90")
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = _wrap(dims[0], input.dim()), _wrap(dims[1], input.dim())
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and "
                           f"dim1 = {d1}")
    k = k % 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def _diag_positions(n, k, cols):
    return [(i + _b.max(-k, 0)) * cols + i + _b.max(k, 0) for i in range(n)]


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose (dim1, dim2) planes hold input's last dim on their
    offset diagonal, zeros elsewhere."""
    _t(input, "diag_embed")
    nd = input.dim() + 1
    d1, d2 = _wrap(dim1, nd), _wrap(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1] if input.dim() else 1
    x = input if input.dim() else input.reshape(1)
    m = n + abs(offset)
    z = _C.zeros(*x.shape[:-1], m * m, dtype=x.dtype)
    pos = _long(_diag_positions(n, offset, m))
    full = z.index_copy(z.dim() - 1, pos, x).reshape(*x.shape[:-1], m, m)
    # the two new dims from the end to d1 and d2
    rest = [i for i in range(nd) if i not in (d1, d2)]
    order = [0] * nd
    for src, dst in zip(range(nd - 2), rest):
        order[dst] = src
    order[d1], order[d2] = nd - 2, nd - 1
    return full.permute(*order)


def diagflat(input, offset=0):
    """The flattened input as the offset diagonal of a square matrix."""
    _t(input, "diagflat")
    return diag_embed(input.reshape(-1), offset, 0, 1)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The offset diagonal of the (dim1, dim2) planes, as a new last dim:
    a view of input when its strides let the two dims merge (contiguous
    input, for one), else a copy."""
    _t(input, "diagonal")
    n = input.dim()
    d1, d2 = _wrap(dim1, n), _wrap(dim2, n)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    order = [i for i in range(n) if i not in (d1, d2)] + [d1, d2]
    y = input.permute(*order)
    r, c = y.shape[-2], y.shape[-1]
    k = _b.max(0, _b.min(r + _b.min(offset, 0), c - _b.max(offset, 0)))
    start = _b.max(-offset, 0) * c + _b.max(offset, 0)
    try:
        flat = y.view(*y.shape[:-2], r * c)
    except RuntimeError:
        flat = y.reshape(*y.shape[:-2], r * c)
    if k == 0:
        return flat.narrow(-1, 0, 0)
    return flat.narrow(flat.dim() - 1, start, (k - 1) * (c + 1) + 1)[..., ::c + 1]


def block_diag(*tensors):
    """The tensors (0-, 1- or 2-D) along the diagonal of one matrix, zeros
    elsewhere; one promoted dtype."""
    mats = []
    for i, t in enumerate(tensors):
        _t(t, "block_diag", "tensors", i + 1)
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {t.dim()} dimensions")
        mats.append(t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1
                    else t)
    if not mats:
        return _C.zeros(1, 0)
    dt = mats[0].dtype
    for m in mats[1:]:
        dt = _promote(_C.zeros(1, dtype=dt), m)[0].dtype
    mats = [m.to(dt) for m in mats]
    cols = _b.sum(m.shape[1] for m in mats)
    rows, c0 = [], 0
    for m in mats:
        r, c = m.shape
        parts = [p for p in (_C.zeros(r, c0, dtype=dt), m,
                             _C.zeros(r, cols - c0 - c, dtype=dt)) if p.shape[1] or p is m]
        rows.append(_cat(parts, 1) if len(parts) > 1 else m)
        c0 += c
    return _cat(rows, 0)


def meshgrid(*tensors, indexing=None):
    """Grids expanded from 1-D (or 0-D) tensors: indexing 'ij' (the default)
    or 'xy' (the first two dims swapped); views."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("torch.meshgrid: Expected at least one tensor")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for i, t in enumerate(tensors):
        _t(t, "meshgrid", "tensors", i + 1)
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
    for t in tensors[1:]:
        if t.dtype != tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = [t.numel() for t in ts]
    n = len(ts)
    out = []
    for i, t in enumerate(ts):
        shape = [1] * n
        shape[i] = sizes[i]
        out.append(t.reshape(*shape).expand(*sizes))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def cartesian_prod(*tensors):
    """Every combination of the 1-D tensors' elements, one row each (one
    tensor: itself)."""
    for i, t in enumerate(tensors):
        _t(t, "cartesian_prod", "tensors", i + 1)
        if t.dim() != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return _stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-r combinations of a 1-D tensor's elements, one row each
    (itertools' order), by index_select."""
    _t(input, "combinations")
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _C.zeros(0, dtype=input.dtype)
    n = input.shape[0]
    gen = (_itertools.combinations_with_replacement if with_replacement
           else _itertools.combinations)
    combos = list(gen(range(n), r))
    if not combos:
        return _C.zeros(0, r, dtype=input.dtype)
    return _stack([input.index_select(0, _long(c[j] for c in combos)) for j in range(r)], 1)


def _tri_indices(row, col, offset, dtype, lower, name):
    if dtype is None:
        dtype = _C.int64
    if dtype not in (_C.int64, _C.int32):
        raise RuntimeError(f"\"{name}\" not implemented for '{_type_name(dtype)}'")
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    r, c = _np.tril_indices(row, offset, col) if lower else _np.triu_indices(row, offset, col)
    return _C.tensor(_np.stack([r, c]).astype(_np.int64).reshape(2, -1).tolist(),
                     dtype=dtype).reshape(2, len(r))


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The [2, N] row and column indices of the lower triangle of a row x col
    matrix (row-major order)."""
    return _tri_indices(row, col, offset, dtype, True, "tril_indices")


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The [2, N] row and column indices of the upper triangle."""
    return _tri_indices(row, col, offset, dtype, False, "triu_indices")


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D x: columns x**(N-1) .. x**0 (or
    increasing), as PyTorch's a cumprod of [1, x, x, ...] (int inputs in
    int64)."""
    _t(x, "vander", "x", 1)
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    if N is None:
        N = x.shape[0]
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    xx = x if x.is_floating_point() else x.to(_C.int64)
    n = x.shape[0]
    if N == 0:
        return _C.zeros(n, 0, dtype=xx.dtype)
    cols = _cat([_C.ones(n, 1, dtype=xx.dtype), xx.unsqueeze(1).expand(n, N - 1)], 1)
    r = cumprod(cols, 1)
    return r if increasing else r.flip(1)


def _unfold(self, dimension, size, step):
    """Windows of size elements every step elements along dimension, as a
    new last dim (an index_select: a copy, not a view)."""
    n = self.dim()
    d = _wrap(dimension, n)
    L = self.shape[d] if n else 1
    if size > L:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {L} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if n == 0:
        return self.reshape(1)
    cnt = (L - size) // step + 1
    idx = _long(i * step + j for i in range(cnt) for j in range(size))
    w = self.index_select(d, idx)
    shape = list(self.shape)
    shape[d:d + 1] = [cnt, size]
    return w.reshape(*shape).movedim(d + 1, -1)


def _sum_to_size(self, *size):
    """self summed down to size (which self's shape must expand from)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)) or (
            len(size) == 1 and type(size[0]).__name__ == "Size"):
        size = tuple(size[0])
    size = tuple(int(s) for s in size)
    shape = _shape(self)
    ok = len(size) <= len(shape) and all(
        s == t or s == 1 for s, t in zip(size[::-1], shape[::-1]))
    if not ok:
        raise RuntimeError(f"size {{{list(size)}}} is not expandable to size "
                           f"{{{list(shape)}}}.")
    lead = len(shape) - len(size)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(size) if s == 1 and
                                shape[lead + i] != 1]
    r = self.sum(dim=tuple(dims), keepdim=True) if dims else self
    return r.reshape(*size) if lead else r


# ---------------------------------------------------------------- search, statistics

def _sorted_pick(x, dim, k, keepdim, name):
    """values and indices of the k-th smallest (0-based k, a tensor of per
    slice positions or an int) along dim, NaN sorting last."""
    s = x.detach().sort(dim=dim)
    idx = s.indices.gather(dim, k) if isinstance(k, Tensor) else s.indices.narrow(dim, k, 1)
    vals = x.gather(dim, idx)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return _return_type(name, ["values", "indices"])(vals, idx)


def _median(input, dim, keepdim, ignore_nan, name):
    _t(input, name)
    if dim is None:
        x = input.reshape(-1)
        if x.numel() == 0:
            return _C.full((), _math.nan, dtype=input.dtype) if input.is_floating_point() \
                else _C.zeros((), dtype=input.dtype)
        r = _median(x, 0, False, ignore_nan, name)
        return r.values
    if input.dim() == 0:
        _wrap(dim, 0)
        return _return_type(name, ["values", "indices"])(input.clone(),
                                                         _C.zeros((), dtype=_C.int64))
    d = _wrap(dim, input.dim())
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if input.is_floating_point():
        nan = input.detach().isnan()
        valid = nan.logical_not().to(_C.int64).sum(dim=d, keepdim=True)
        if ignore_nan:
            k = ((valid - 1).clamp_min(0)) // 2
        else:
            # a slice with a NaN: its (first) NaN, which sorts last
            k = _C.where(valid == n, _C.full(valid.shape, (n - 1) // 2, dtype=_C.int64), valid)
        return _sorted_pick(input, d, k, keepdim, name)
    return _sorted_pick(input, d, (n - 1) // 2, keepdim, name)


def median(input, dim=None, keepdim=False):
    """The lower median of all elements (a 0-d tensor) or (values, indices)
    along dim; NaN if the slice holds one.  Which of equal elements the index
    names may differ from PyTorch's; the gradient goes to that element."""
    return _median(input, dim, keepdim, False, "median")


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaNs (NaN only where all are)."""
    return _median(input, dim, keepdim, True, "nanmedian")


def kthvalue(input, k, dim=-1, keepdim=False):
    """(values, indices) of the k-th smallest element (1-based) along dim."""
    _t(input, "kthvalue")
    if input.dim() == 0:
        _wrap(dim, 0)
        if k != 1:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension 0")
        return _return_type("kthvalue", ["values", "indices"])(input.clone(),
                                                               _C.zeros((), dtype=_C.int64))
    d = _wrap(dim, input.dim())
    if k < 1 or k > input.shape[d]:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    return _sorted_pick(input, d, k - 1, keepdim, "kthvalue")


def mode(input, dim=-1, keepdim=False):
    """(values, indices) of the most frequent value along dim (the smallest
    of equally frequent ones, its last index, as PyTorch's CPU kernel); the
    choice is made on the host (numpy), the values gathered from input."""
    _t(input, "mode")
    if input.dim() == 0:
        _wrap(dim, 0)
        return _return_type("mode", ["values", "indices"])(input.clone(),
                                                           _C.zeros((), dtype=_C.int64))
    d = _wrap(dim, input.dim())
    a = _np.moveaxis(input.detach().numpy(), d, -1)
    flat = a.reshape(-1, a.shape[-1])
    idx = _np.zeros(flat.shape[0], dtype=_np.int64)
    for r, row in enumerate(flat):
        vals, counts = _np.unique(row, return_counts=True)
        best = vals[_np.argmax(counts)]  # the smallest of the most frequent
        idx[r] = _np.nonzero(row == best)[0][-1] if row.size else 0
    shape = list(a.shape[:-1])
    it = _C.tensor(idx.tolist(), dtype=_C.int64).reshape(*shape, 1).movedim(-1, d)
    vals = input.gather(d, it)
    if not keepdim:
        vals, it = vals.squeeze(d), it.squeeze(d)
    return _return_type("mode", ["values", "indices"])(vals, it)


def msort(input, *, out=None):
    """input sorted along dim 0."""
    if out is not None:
        raise TypeError("msort(): jitgrad does not support out=")
    _t(input, "msort")
    return input.sort(dim=0).values


def _np_of(x):
    return x.detach().numpy()


def _from_np(a, dtype):
    a = _np.ascontiguousarray(a)
    return _C.from_numpy(a.copy()).to(dtype) if a.size else _C.zeros(*a.shape, dtype=dtype)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements (or slices along dim), in ascending order,
    with the inverse indices and counts if asked: computed on the host
    (numpy; a graph break under compile), not differentiable.  sorted=False
    sorts too (PyTorch's CPU order for it is its hash set's)."""
    _t(input, "unique")
    a = _np_of(input)
    if dim is None:
        u, inv, cnt = _np.unique(a.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(a.shape)
    else:
        d = _wrap(dim, input.dim())
        u, inv, cnt = _np.unique(a, return_inverse=True, return_counts=True, axis=d)
        inv = inv.reshape(-1)
    res = [_from_np(u, input.dtype)]
    if return_inverse:
        res.append(_from_np(inv.astype(_np.int64), _C.int64))
    if return_counts:
        res.append(_from_np(cnt.astype(_np.int64), _C.int64))
    return res[0] if len(res) == 1 else tuple(res)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive elements (or slices along dim) as one,
    with inverse indices and run lengths if asked: on the host (numpy)."""
    _t(input, "unique_consecutive")
    a = _np_of(input)
    if dim is None:
        flat = a.reshape(-1)
        if flat.size:
            start = _np.concatenate([[True], flat[1:] != flat[:-1]])
        else:
            start = _np.zeros(0, dtype=bool)
        u = flat[start]
        inv_shape = a.shape
    else:
        d = _wrap(dim, input.dim())
        m = _np.moveaxis(a, d, 0)
        rows = m.reshape(m.shape[0], -1)
        if rows.shape[0]:
            start = _np.concatenate([[True], (rows[1:] != rows[:-1]).any(axis=1)])
        else:
            start = _np.zeros(0, dtype=bool)
        u = _np.moveaxis(m[start], 0, d)
        inv_shape = (m.shape[0],)
    inv = (_np.cumsum(start) - 1).reshape(inv_shape)
    pos = _np.nonzero(start)[0]
    cnt = _np.diff(_np.concatenate([pos, [start.size]]))
    res = [_from_np(u, input.dtype)]
    if return_inverse:
        res.append(_from_np(inv.astype(_np.int64), _C.int64))
    if return_counts:
        res.append(_from_np(cnt.astype(_np.int64), _C.int64))
    return res[0] if len(res) == 1 else tuple(res)


def bincount(input, weights=None, minlength=0):
    """How often each value of a 1-D non-negative integer tensor occurs
    (summing weights instead when given): on the host (numpy)."""
    _t(input, "bincount")
    if input.is_floating_point() or input.dtype == _C.bool:
        raise RuntimeError(f"\"bincount_cpu\" not implemented for '{_type_name(input.dtype)}'")
    if input.dim() != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    a = _np_of(input)
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        _t(weights, "bincount", "weights", 2)
        if weights.dim() != 1 or weights.shape[0] != input.shape[0]:
            raise RuntimeError("weights should be 1-d and have the same length as input")
        w = _np_of(weights).astype(_np.float64)
        r = _np.bincount(a, weights=w, minlength=minlength)
        dt = weights.dtype if weights.dtype == _C.float32 else _C.float64
        return _from_np(r, dt)
    return _from_np(_np.bincount(a, minlength=minlength).astype(_np.int64), _C.int64)


def histc(input, bins=100, min=0, max=0, *, out=None):
    """The histogram of input in bins equal bins over [min, max] (both 0:
    the data's range), elements outside ignored: on the host (numpy)."""
    if out is not None:
        raise TypeError("histc(): jitgrad does not support out=")
    _t(input, "histc")
    if not input.is_floating_point():
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{_type_name(input.dtype)}'")
    if bins <= 0:
        raise RuntimeError("torch.histogram(): bins must be > 0, but got " + str(bins) +
                           " for dimension 0")
    a = _np_of(input).reshape(-1)
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if not (_math.isfinite(lo) and _math.isfinite(hi)):
        raise RuntimeError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
    ft = a.dtype.type
    a = a[(a >= lo) & (a <= hi)]
    # PyTorch's histc: the position (elt - min) / (max - min) * bins in the
    # input's dtype, truncated (no correction against the bin edges), the
    # last bin closed
    pos = ((a - ft(lo)) / (ft(hi) - ft(lo)) * ft(bins)).astype(_np.int64)
    pos = _np.minimum(pos, bins - 1)
    r = _np.bincount(pos, minlength=bins).astype(_np.float64)
    return _from_np(r, input.dtype)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None, out=None):
    """For each value, how many elements of the innermost sorted rows are
    below it (right / side='right': not above it): one broadcast comparison
    and a sum, so it compiles (memory grows as rows x values)."""
    if out is not None:
        raise TypeError("searchsorted(): jitgrad does not support out=")
    _t(sorted_sequence, "searchsorted", "sorted_sequence", 1)
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = seq.gather(seq.dim() - 1, sorter)
    scalar = not isinstance(input, Tensor)
    vals = _C.tensor(input, dtype=seq.dtype) if scalar else input
    if seq.dim() != 1:
        if vals.dim() != seq.dim() or list(vals.shape[:-1]) != list(seq.shape[:-1]):
            raise RuntimeError(
                "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                "dimensions of boundaries tensor and input value tensor must match, but we got "
                f"boundaries tensor {list(seq.shape)} and input value tensor "
                f"{list(vals.shape)}")
    s, v = _promote(seq.detach(), vals.detach())
    cmp = (s.unsqueeze(-2) <= v.unsqueeze(-1)) if right else (s.unsqueeze(-2) < v.unsqueeze(-1))
    if seq.dim() == 1:
        cmp = s.reshape(*([1] * v.dim()), -1)
        cmp = (cmp <= v.unsqueeze(-1)) if right else (cmp < v.unsqueeze(-1))
    r = cmp.to(_C.int64).sum(dim=-1)
    return r.to(_C.int32) if out_int32 else r


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """The bucket of each element among the 1-D sorted boundaries (as
    searchsorted)."""
    if out is not None:
        raise TypeError("bucketize(): jitgrad does not support out=")
    _t(boundaries, "bucketize", "boundaries", 2)
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.dim()})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element occurs in test_elements (either may be a
    number): one broadcast comparison."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() received an invalid combination of arguments")
    e = elements if isinstance(elements, Tensor) else _C.tensor(elements)
    t = test_elements if isinstance(test_elements, Tensor) else _C.tensor(test_elements)
    e2, t2 = _promote(e.detach(), t.detach())
    r = (e2.unsqueeze(-1) == t2.reshape(*([1] * e2.dim()), -1)).any(dim=-1) \
        if t2.numel() else _C.zeros(*e2.shape, dtype=_C.bool)
    return r.logical_not() if invert else r


def isneginf(input, *, out=None):
    _t(input, "isneginf")
    return input.isinf() & (input < 0)


def isposinf(input, *, out=None):
    _t(input, "isposinf")
    return input.isinf() & (input > 0)


def isreal(input):
    """True everywhere: jitgrad has no complex dtypes."""
    _t(input, "isreal")
    return _C.ones(*input.shape, dtype=_C.bool)


def argwhere(input):
    """The [count, ndim] indices of the nonzero elements (nonzero)."""
    _t(input, "argwhere")
    return input._nonzero()


def _trap_dx(x, dim, n, y):
    if x.dim() == 1:
        dx = diff(x)
        if dx.shape[0] != n - 1:
            raise RuntimeError("trapezoid: There must be one `x` value for each sample point")
        shape = [1] * y.dim()
        shape[dim] = n - 1
        return dx.reshape(*shape)
    return diff(x, dim=dim)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along dim: spacing dx (default 1) or sample points
    x (PyTorch's formulas)."""
    _t(y, "trapezoid", "y", 1)
    if x is not None and dx is not None:
        raise TypeError("trapezoid() received an invalid combination of arguments")
    if y.dim() == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         f"{dim})")
    d = _wrap(dim, y.dim())
    n = y.shape[d]
    if isinstance(x, Tensor):
        if n == 0:
            return _float(y).sum(dim=d) * 0
        step = _trap_dx(x, d, n, y)
        return (step * (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1))).sum(dim=d) / 2.0
    h = 1 if dx is None else dx
    if n == 0:
        return y.sum(dim=d) * 0
    yy = y if y.is_floating_point() else y.to(_C.float32) if not isinstance(h, int) else y
    return (yy.sum(dim=d) - (yy.select(d, 0) + yy.select(d, -1)) * 0.5) * h


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along dim (one element fewer)."""
    _t(y, "cumulative_trapezoid", "y", 1)
    d = _wrap(dim, y.dim())
    n = y.shape[d]
    if n == 0:
        return y.narrow(d, 0, 0)
    left, right = y.narrow(d, 0, n - 1), y.narrow(d, 1, n - 1)
    if isinstance(x, Tensor):
        step = _trap_dx(x, d, n, y)
        return (step * (left + right)).cumsum(d) / 2.0
    h = 1 if dx is None else dx
    return ((left + right) * (h / 2.0)).cumsum(d)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in input's rows (1-D: one
    variable), observations weighted by fweights / aweights as PyTorch's."""
    _t(input, "cov")
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {input.dim()} dimensions")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    x = _float(x)
    n = x.shape[1]
    w = None
    if fweights is not None:
        _t(fweights, "cov", "fweights", 2)
        if fweights.dim() > 1:
            raise RuntimeError(f"cov(): expected fweights to have one or fewer dimensions but "
                               f"got fweights with {fweights.dim()} dimensions")
        if fweights.is_floating_point():
            raise RuntimeError(f"cov(): expected fweights to have integral dtype but got "
                               f"fweights with {_type_name(fweights.dtype)} dtype")
        if fweights.numel() != n:
            raise RuntimeError(f"cov(): expected fweights to have the same numel as there are "
                               f"observations in the input but got {fweights.numel()} != {n}")
        w = fweights.to(x.dtype)
    if aweights is not None:
        _t(aweights, "cov", "aweights", 3)
        if aweights.dim() > 1:
            raise RuntimeError(f"cov(): expected aweights to have one or fewer dimensions but "
                               f"got aweights with {aweights.dim()} dimensions")
        if not aweights.is_floating_point():
            raise RuntimeError(f"cov(): expected aweights to have floating point dtype but got "
                               f"aweights with {_type_name(aweights.dtype)} dtype")
        if aweights.numel() != n:
            raise RuntimeError(f"cov(): expected aweights to have the same numel as there are "
                               f"observations in the input but got {aweights.numel()} != {n}")
        aw = aweights.to(x.dtype)
        w = aw if w is None else w * aw
    if w is None:
        w_sum = _C.tensor(float(n), dtype=x.dtype)
        avg = x.mean(dim=1)
    else:
        w = w.reshape(-1)
        w_sum = w.sum()
        avg = (x * w).sum(dim=1) / w_sum
    if w is None:
        norm = w_sum - correction
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        aw = aweights.to(x.dtype).reshape(-1)
        norm = w_sum - correction * (w * aw).sum() / w_sum
    norm = norm.clamp_min(0.0)
    xm = x - avg.unsqueeze(1)
    xw = xm if w is None else xm * w
    c = xw.matmul(xm.t()) / norm
    return c.squeeze() if input.dim() < 2 else c


def corrcoef(input):
    """Pearson's correlation coefficients of input's rows, clipped to
    [-1, 1]."""
    _t(input, "corrcoef")
    if input.dim() > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got "
                           f"an input with {input.dim()} dimensions")
    c = cov(input)
    if c.dim() == 0:
        return c / c
    d = diagonal(c)
    sd = d.sqrt()
    c = c / sd.unsqueeze(1)
    c = c / sd.unsqueeze(0)
    return c.clamp(-1.0, 1.0)


def renorm(input, p, dim, maxnorm, *, out=None):
    """Each slice along dim scaled down to p-norm maxnorm where its norm is
    larger (factor maxnorm / (norm + 1e-7), PyTorch's)."""
    if out is not None:
        raise TypeError("renorm(): jitgrad does not support out=")
    _t(input, "renorm")
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm:g}")
    if input.dim() <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.dim()} "
                           "dimensions")
    d = _wrap(dim, input.dim())
    dims = tuple(i for i in range(input.dim()) if i != d)
    x = input
    if p == _math.inf:
        norm = x.abs().amax(dim=dims, keepdim=True)
    else:
        norm = _safe_abs_pow(x, float(p)).sum(dim=dims, keepdim=True)
        norm = norm if p == 1 else _safe_root(norm, float(p))
    factor = _C.where(norm > maxnorm, maxnorm / (norm + 1e-7), _C.ones_like(norm))
    return x * factor


# ---------------------------------------------------------------- install

FUNCTIONS = (
    einsum, tensordot, inner, kron, vdot, chain_matmul, addmv, addr, addbmm,
    cdist, dist, diff, cross, logaddexp, logaddexp2, hypot, float_power, copysign, fmax, fmin,
    heaviside, sinc, rad2deg, deg2rad, exp2, rsub, positive,
    cumprod, cummax, cummin, logcumsumexp, aminmax,
    take_along_dim, select, tensor_split, hsplit, vsplit, dsplit, split_with_sizes, rot90,
    diag_embed, diagflat, diagonal, block_diag, cartesian_prod, combinations, meshgrid,
    tril_indices, triu_indices, vander,
    median, nanmedian, kthvalue, mode, msort, unique, unique_consecutive, bincount, histc,
    searchsorted, bucketize, isin, isneginf, isposinf, isreal, argwhere, trapz, trapezoid,
    cumulative_trapezoid, cov, corrcoef, renorm,
)

# Tensor methods: the function with self as its first argument
METHODS = (
    inner, kron, vdot, addmv, addr, addbmm, dist, diff, cross, logaddexp, logaddexp2, hypot,
    float_power, copysign, fmax, fmin, heaviside, sinc, rad2deg, deg2rad, exp2, positive,
    cumprod, cummax, cummin, logcumsumexp, aminmax, take_along_dim, select, tensor_split,
    hsplit, vsplit, dsplit, split_with_sizes, rot90, diag_embed, diagflat, diagonal, median,
    nanmedian, kthvalue, mode, msort, unique, unique_consecutive, bincount, histc, isneginf,
    isposinf, isreal, argwhere, cov, corrcoef, renorm,
)

# in place: the out-of-place result copied into self
INPLACE = (addmv, addr, addbmm, copysign, float_power, heaviside, hypot, sinc, rad2deg,
           deg2rad, exp2, cumprod, renorm)


def _as_method(f):
    def m(self, *args, **kwargs):
        return f(self, *args, **kwargs)

    m.__name__ = m.__qualname__ = f.__name__
    m.__doc__ = f.__doc__
    return m


def _as_inplace(f):
    def m(self, *args, **kwargs):
        r = f(self, *args, **kwargs)
        if r.dtype != self.dtype and f is not cumprod:
            if not (self.is_floating_point() or not r.is_floating_point()):
                raise RuntimeError(f"result type {_type_name(r.dtype)} can't be cast to the "
                                   f"desired output type {_type_name(self.dtype)}")
        return self.copy_(r)

    m.__name__ = m.__qualname__ = f.__name__ + "_"
    m.__doc__ = f"{f.__name__}_(...): {f.__name__} in place."
    return m


def install(T, namespace):
    """The torch.* functions and the Tensor methods."""
    for f in FUNCTIONS:
        namespace[f.__name__] = f
    for f in METHODS:
        setattr(T, f.__name__, _as_method(f))
    for f in INPLACE:
        setattr(T, f.__name__ + "_", _as_inplace(f))
    T.unfold = _unfold
    T.sum_to_size = _sum_to_size
    T.logcumsumexp = _as_method(logcumsumexp)
