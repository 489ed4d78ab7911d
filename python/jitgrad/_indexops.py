"""gather, scatter, scatter_add, index_add / index_copy / index_fill,
masked_select, flip, roll, repeat, repeat_interleave, isnan / isinf /
isfinite / nan_to_num, logsumexp, remainder / fmod / floor_divide (and the %
and // operators), argsort, outer, dot, mv, addmm, trace.

PyTorch's signatures over one library primitive each (csrc/ops_index.c):
keywords, defaults, Python numbers as operands, and the in-place forms
(x.scatter_(...) is copy_ of the out-of-place result, as jitgrad/_inplace.py
does for every in-place method).
"""

import builtins as _b
import numbers as _numbers

from . import _C
from ._C import Tensor


def _no_out(fn, out):
    if out is not None:
        raise TypeError(f"{fn}(): jitgrad does not support out=")


def _tensor_arg(x, fn, arg, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _dims(dims, fn):
    if isinstance(dims, _numbers.Integral):
        return (int(dims),)
    if isinstance(dims, (tuple, list)) or type(dims).__name__ == "Size":
        return tuple(int(d) for d in dims)
    raise TypeError(f"{fn}(): argument 'dims' must be tuple of ints, not {type(dims).__name__}")


def _number(v, fn, arg):
    if isinstance(v, Tensor):
        if v.dim() != 0:
            raise RuntimeError(f"{fn}(): {arg} has to be a 0-dim tensor, but got a tensor with "
                               f"{v.dim()} dims")
        return float(v.item())
    if isinstance(v, (_numbers.Real, bool)):
        return float(v)
    raise TypeError(f"{fn}(): argument '{arg}' must be Number, not {type(v).__name__}")


# ---- gather / scatter ----

def _runtime(f):
    """PyTorch raises RuntimeError for gather's and scatter's index out of
    range (IndexError for index_add / index_copy / index_fill)."""
    def g(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except IndexError as e:
            if "out of bounds" not in str(e):
                raise
            raise RuntimeError(str(e)) from None
    g.__name__ = g.__qualname__ = f.__name__.lstrip("_")
    g.__doc__ = f.__doc__
    return g


def gather(input, dim, index, *, sparse_grad=False, out=None):
    _no_out("gather", out)
    _tensor_arg(input, "gather", "input", 1)
    return input.gather(dim, index)


@_runtime
def _gather(self, dim, index, *, sparse_grad=False):
    _tensor_arg(index, "gather", "index", 3)
    return self._gather(dim, index)


@_runtime
def _scatter(self, dim, index, src=None, value=None, *, reduce=None):
    if reduce is not None:
        raise RuntimeError("jitgrad: scatter(reduce=...) is not supported")
    _tensor_arg(index, "scatter", "index", 2)
    if src is None and value is None:
        raise TypeError("scatter() missing 1 required positional argument: 'src' or 'value'")
    if isinstance(src, Tensor):
        return self._scatter(dim, index, src)
    return self._scatter_value(dim, index, _number(src if value is None else value, "scatter",
                                                   "value"))


@_runtime
def _scatter_add(self, dim, index, src):
    _tensor_arg(index, "scatter_add", "index", 2)
    _tensor_arg(src, "scatter_add", "src", 3)
    return self._scatter_add(dim, index, src)


def scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
    _no_out("scatter", out)
    return _scatter(_tensor_arg(input, "scatter", "input", 1), dim, index, src, value,
                    reduce=reduce)


def scatter_add(input, dim, index, src, *, out=None):
    _no_out("scatter_add", out)
    return _scatter_add(_tensor_arg(input, "scatter_add", "input", 1), dim, index, src)


# ---- index_add / index_copy / index_fill ----

def _index_add(self, dim, index, source, *, alpha=1):
    _tensor_arg(index, "index_add", "index", 2)
    _tensor_arg(source, "index_add", "source", 3)
    return self._index_add(dim, index, source, float(alpha))


def _index_copy(self, dim, index, source):
    _tensor_arg(index, "index_copy", "index", 2)
    _tensor_arg(source, "index_copy", "source", 3)
    return self._index_copy(dim, index, source)


def _index_fill(self, dim, index, value):
    _tensor_arg(index, "index_fill", "index", 2)
    return self._index_fill(dim, index, _number(value, "index_fill", "value"))


def index_add(input, dim, index, source, *, alpha=1, out=None):
    _no_out("index_add", out)
    return _index_add(_tensor_arg(input, "index_add", "input", 1), dim, index, source,
                      alpha=alpha)


def index_copy(input, dim, index, source, *, out=None):
    _no_out("index_copy", out)
    return _index_copy(_tensor_arg(input, "index_copy", "input", 1), dim, index, source)


def index_fill(input, dim, index, value):
    return _index_fill(_tensor_arg(input, "index_fill", "input", 1), dim, index, value)


def masked_select(input, mask, *, out=None):
    _no_out("masked_select", out)
    _tensor_arg(input, "masked_select", "input", 1)
    return input._masked_select(_tensor_arg(mask, "masked_select", "mask", 2))


# ---- flip / roll / repeat ----

def flip(input, dims):
    return _tensor_arg(input, "flip", "input", 1)._flip(_dims(dims, "flip"))


def _flip(self, *dims):
    if len(dims) == 1 and not isinstance(dims[0], _numbers.Integral):
        dims = dims[0]
    return self._flip(_dims(dims, "flip"))


def fliplr(input):
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return input._flip((1,))


def flipud(input):
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return input._flip((0,))


def roll(input, shifts, dims=None):
    _tensor_arg(input, "roll", "input", 1)
    return input._roll(_dims(shifts, "roll"), () if dims is None else _dims(dims, "roll"))


def _repeat(self, *sizes):
    if len(sizes) == 1 and not isinstance(sizes[0], _numbers.Integral):
        sizes = sizes[0]
    return self._repeat(_dims(sizes, "repeat"))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # torch.repeat_interleave(repeats): indices repeated
        counts = input
        return _C.Tensor._repeat_interleave(_arange(counts.numel()), counts, None)
    if not isinstance(repeats, Tensor):
        repeats = int(repeats)
    return input._repeat_interleave(repeats, None if dim is None else int(dim))


def _arange(n):
    from . import arange
    return arange(n)


def _repeat_interleave_method(self, repeats, dim=None, *, output_size=None):
    return repeat_interleave(self, repeats, dim, output_size=output_size)


# ---- isnan / isinf / isfinite / nan_to_num / logsumexp ----

def isnan(input):
    return _tensor_arg(input, "isnan", "input", 1)._isnan()


def isinf(input):
    return _tensor_arg(input, "isinf", "input", 1)._isinf()


def isfinite(input):
    return _tensor_arg(input, "isfinite", "input", 1)._isfinite()


def nan_to_num(input, nan=0.0, posinf=None, neginf=None, *, out=None):
    _no_out("nan_to_num", out)
    _tensor_arg(input, "nan_to_num", "input", 1)
    return input._nan_to_num(float(nan), posinf, neginf)


def logsumexp(input, dim, keepdim=False, *, out=None):
    _no_out("logsumexp", out)
    _tensor_arg(input, "logsumexp", "input", 1)
    return input._logsumexp(_dims(dim, "logsumexp"), _b.bool(keepdim))


# ---- remainder / fmod / floor_divide ----

def _operands(a, b, fn):
    """(a, b) as tensors: a Python number becomes a 0-d tensor of the dtype
    PyTorch computes in (a float with an integer tensor: float32; an int
    with a bool tensor: int64)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        return a, b
    t, s = (a, b) if isinstance(a, Tensor) else (b, a)
    if not isinstance(t, Tensor) or isinstance(s, Tensor) or \
            not isinstance(s, (_numbers.Real, bool)):
        raise TypeError(f"{fn}(): argument 'other' must be Tensor or Number, not "
                        f"{type(b).__name__}")
    d = t.dtype
    if isinstance(s, float) and not d.is_floating_point:
        d = _C.float32
    elif not isinstance(s, bool) and d == _C.bool:
        d = _C.int64
    t = t if d == t.dtype else t.to(d)
    c = _C.tensor(s, dtype=d)
    return (t, c) if isinstance(a, Tensor) else (c, t)


def remainder(input, other, *, out=None):
    _no_out("remainder", out)
    a, b = _operands(input, other, "remainder")
    return a._remainder(b)


def fmod(input, other, *, out=None):
    _no_out("fmod", out)
    a, b = _operands(input, other, "fmod")
    return a._fmod(b)


def floor_divide(input, other, *, out=None):
    _no_out("floor_divide", out)
    a, b = _operands(input, other, "floor_divide")
    return a._floor_divide(b)


_DIV_MODES = (None, "trunc", "floor")


def _div_rounded(a, b, mode):
    """div(a, b, rounding_mode=mode) for 'trunc' / 'floor', as PyTorch's
    div_trunc / div_floor kernels: integers stay integers (a zero divisor
    is ZeroDivisionError), floats give trunc(a / b) or floor_divide's value,
    one node with PyTorch's DivBackward2 (zero gradients, no history)."""
    if mode not in _DIV_MODES:
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{mode}'")
    a, b = _operands(a, b, "div")
    return a._div_trunc(b) if mode == "trunc" else a._div_floor(b)


def install_div(T):
    """Tensor.div / divide / true_divide and div_ with rounding_mode."""
    c_div, c_div_ = T.div, T.div_

    def div(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return c_div(self, other)
        return _div_rounded(self, other, rounding_mode)

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is None:
            return c_div_(self, other)
        r = _div_rounded(self, other, rounding_mode)
        if r.is_floating_point() and not self.is_floating_point():
            names = {_C.float32: "Float", _C.float64: "Double"}
            raise RuntimeError(f"result type {names.get(r.dtype, r.dtype)} can't be cast to the "
                               "desired output type "
                               f"{'Long' if self.dtype == _C.int64 else 'Int'}")
        return self.copy_(r)

    div.__doc__ = "div(other, *, rounding_mode=None): self / other; 'trunc' or 'floor' rounds."
    div_.__doc__ = "div_(other, *, rounding_mode=None): div in place."
    T.div = T.divide = T.true_divide = div
    T.div_ = T.divide_ = div_


def _binop(f):
    def op(self, other):
        if not isinstance(other, (Tensor, _numbers.Real, bool)):
            return NotImplemented
        return f(self, other)
    return op


def _rbinop(f):
    def op(self, other):
        if not isinstance(other, (_numbers.Real, bool)):
            return NotImplemented
        return f(other, self)
    return op


# ---- argsort / outer / dot / mv / addmm / trace ----

def argsort(input, dim=-1, descending=False, stable=False):
    return _tensor_arg(input, "argsort", "input", 1)._argsort(int(dim), _b.bool(descending))


def outer(input, vec2, *, out=None):
    _no_out("outer", out)
    return _tensor_arg(input, "outer", "input", 1)._outer(_tensor_arg(vec2, "outer", "vec2", 2))


def dot(input, other, *, out=None):
    _no_out("dot", out)
    return _tensor_arg(input, "dot", "input", 1)._dot(_tensor_arg(other, "dot", "tensor", 2))


def mv(input, vec, *, out=None):
    _no_out("mv", out)
    return _tensor_arg(input, "mv", "input", 1)._mv(_tensor_arg(vec, "mv", "vec", 2))


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    _no_out("addmm", out)
    _tensor_arg(input, "addmm", "input", 1)
    return input._addmm(_tensor_arg(mat1, "addmm", "mat1", 2),
                        _tensor_arg(mat2, "addmm", "mat2", 3), float(beta), float(alpha))


def trace(input):
    return _tensor_arg(input, "trace", "input", 1)._trace()


def diag(input, diagonal=0, *, out=None):
    """A 1-D input as the k-th diagonal of a square matrix (zeros elsewhere),
    or the k-th diagonal of a 2-D input as a new 1-D tensor: index_copy /
    index_select on the flattened matrix, so values are copies and the
    gradient exact."""
    _no_out("diag", out)
    _tensor_arg(input, "diag", "input", 1)
    k = int(diagonal)
    if input.dim() == 1:
        n = input.shape[0]
        m = n + abs(k)
        pos = [(i + max(-k, 0)) * m + i + max(k, 0) for i in range(n)]
        z = _C.zeros(m * m, dtype=input.dtype)
        return z.index_copy(0, _C.tensor(pos, dtype=_C.int64), input).reshape(m, m)
    if input.dim() == 2:
        r, c = input.shape
        n = _b.max(0, _b.min(r + _b.min(k, 0), c - _b.max(k, 0)))
        pos = [(i + max(-k, 0)) * c + i + max(k, 0) for i in range(n)]
        return input.reshape(-1).index_select(0, _C.tensor(pos, dtype=_C.int64))
    raise RuntimeError("matrix or a vector expected")


# names the package exports
__all__ = ["gather", "scatter", "scatter_add", "index_add", "index_copy", "index_fill",
           "masked_select", "flip", "fliplr", "flipud", "roll", "repeat_interleave", "isnan",
           "isinf", "isfinite", "nan_to_num", "logsumexp", "remainder", "fmod", "floor_divide",
           "argsort", "outer", "ger", "dot", "mv", "addmm", "trace", "diag"]
ger = outer


def install(T):
    """The Tensor methods, their in-place forms and the % and // operators."""
    from . import _inplace
    T.gather = _gather
    T.scatter = _scatter
    T.scatter_add = _scatter_add
    T.index_add = _index_add
    T.index_copy = _index_copy
    T.index_fill = _index_fill
    T.masked_select = lambda self, mask: masked_select(self, mask)
    T.flip = _flip
    T.fliplr = fliplr
    T.flipud = flipud
    T.roll = lambda self, shifts, dims=None: roll(self, shifts, dims)
    T.repeat = _repeat
    T.repeat_interleave = _repeat_interleave_method
    T.isnan = isnan
    T.isinf = isinf
    T.isfinite = isfinite
    T.nan_to_num = nan_to_num
    T.logsumexp = logsumexp
    T.remainder = remainder
    T.fmod = fmod
    T.floor_divide = floor_divide
    T.argsort = argsort
    T.outer = outer
    T.ger = outer
    T.dot = dot
    T.mv = mv
    T.addmm = lambda self, mat1, mat2, *, beta=1, alpha=1: addmm(self, mat1, mat2, beta=beta,
                                                                 alpha=alpha)
    T.trace = trace
    T.diag = diag
    T.__mod__ = _binop(remainder)
    T.__rmod__ = _rbinop(remainder)
    T.__floordiv__ = _binop(floor_divide)
    T.__rfloordiv__ = _rbinop(floor_divide)
    for name in ("scatter", "scatter_add", "index_add", "index_copy", "index_fill", "remainder",
                 "fmod", "floor_divide", "nan_to_num"):
        setattr(T, name + "_", _inplace._inplace(name))
    T.__imod__ = T.remainder_
    T.__ifloordiv__ = T.floor_divide_
