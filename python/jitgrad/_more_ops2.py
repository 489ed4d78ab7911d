"""NumPy interop and protocol methods (__array__, __contains__, mT), the
bitwise and shift ops, quantile / nanquantile, and the jitgrad.special
namespace's compositions.

Differentiable functions are compositions of existing Tensor methods, so
autograd and the compiler see the ops they are made of; this module adds
PyTorch 1.13's argument handling and error messages.
"""
import builtins as _b
import numbers as _numbers

import numpy as _np

from . import _C
from ._C import Tensor


# ---- NumPy interop and protocol methods ----

def _array(self, dtype=None):
    """np.asarray(t) / np.array(t, dtype=...): the tensor's numpy() (which
    refuses a tensor that requires grad), cast to dtype if one is given."""
    if self.requires_grad:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                           "tensor.detach().numpy() instead.")
    a = self.numpy()
    return a if dtype is None else a.astype(dtype, copy=False)


def _contains(self, element):
    """`element in t`: whether any element of t equals element (a number or
    a tensor broadcast against t)."""
    if isinstance(element, (Tensor, _numbers.Number)):
        return _b.bool((self == element).any().item())
    raise RuntimeError("Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                       f"{type(element)}.")


def _mT(self):
    """The last two dims transposed (matrices or batches of them; a 0-d
    tensor is returned as a view of itself, as PyTorch does)."""
    if self.dim() == 0:
        return self.view(())
    if self.dim() < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. Got "
                           f"{self.dim()}-D tensor.")
    return self.transpose(-2, -1)


# ---- bitwise and shift ops ----

_FLOATS = ("float32", "float64")
_CATEGORY = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2}
_RANK = {"bool": 0, "int32": 1, "int64": 2, "float32": 3, "float64": 4}


def _dname(dtype):
    return str(dtype).replace("jitgrad.", "")


def _promote(names):
    return _b.max(names, key=_RANK.__getitem__) if names else None


def _result_dtype(*operands):
    """PyTorch's result_type of tensors and Python numbers: tensors with
    dims decide, 0-d tensors and then numbers only where they are of a higher
    category (bool < integer < float), numbers as int64 / float32."""
    groups = [[], [], []]
    for x in operands:
        if isinstance(x, Tensor):
            groups[0 if x.dim() > 0 else 1].append(_dname(x.dtype))
        elif isinstance(x, _b.bool):
            groups[2].append("bool")
        elif isinstance(x, _numbers.Integral):
            groups[2].append("int64")
        else:
            groups[2].append("float32")
    result = None
    for g in groups:
        d = _promote(g)
        if d is not None and (result is None or _CATEGORY[d] > _CATEGORY[result]):
            result = d
    return result


def _operand(x, fn, pos):
    if isinstance(x, Tensor) or (isinstance(x, _numbers.Number) and not isinstance(x, complex)):
        return x
    raise TypeError(f"{fn}(): argument '{'input' if pos == 1 else 'other'}' (position {pos}) "
                    f"must be Tensor, not {type(x).__name__}")


def _as(x, dtype):
    if isinstance(x, Tensor):
        return x if _dname(x.dtype) == dtype else x.to(getattr(_C, dtype))
    return _C.tensor(int(x) if dtype != "bool" else _b.bool(x), dtype=getattr(_C, dtype))


def _binary(kernel, method, fn):
    def f(input, other, *, out=None):
        if out is not None:
            raise TypeError(f"{fn}(): jitgrad does not support out=")
        _operand(input, fn, 1)
        _operand(other, fn, 2)
        if not isinstance(input, Tensor) and not isinstance(other, Tensor):
            raise TypeError(f"{fn}(): at least one of the arguments must be a Tensor")
        d = _result_dtype(input, other)
        if d in _FLOATS:
            raise RuntimeError(f"\"{kernel}\" not implemented for "
                               f"'{'Float' if d == 'float32' else 'Double'}'")
        return getattr(_as(input, d), method)(_as(other, d))

    f.__name__ = fn
    return f


bitwise_and = _binary("bitwise_and_cpu", "_bitwise_and", "bitwise_and")
bitwise_or = _binary("bitwise_or_cpu", "_bitwise_or", "bitwise_or")
bitwise_xor = _binary("bitwise_xor_cpu", "_bitwise_xor", "bitwise_xor")
bitwise_left_shift = _binary("lshift_cpu", "_bitwise_left_shift", "bitwise_left_shift")
bitwise_right_shift = _binary("rshift_cpu", "_bitwise_right_shift", "bitwise_right_shift")
bitwise_and.__doc__ = "Elementwise bitwise and of integer or bool tensors (logical and on bool)."
bitwise_or.__doc__ = "Elementwise bitwise or of integer or bool tensors (logical or on bool)."
bitwise_xor.__doc__ = "Elementwise bitwise xor of integer or bool tensors (logical xor on bool)."
bitwise_left_shift.__doc__ = ("input shifted left by other bits (integer tensors); the count "
                              "is taken modulo the width, as PyTorch's CPU kernels do.")
bitwise_right_shift.__doc__ = ("input shifted right (arithmetic shift) by other bits (integer "
                               "tensors).")


def bitwise_not(input, *, out=None):
    """Elementwise bitwise not of an integer or bool tensor (logical not on
    bool)."""
    if out is not None:
        raise TypeError("bitwise_not(): jitgrad does not support out=")
    if not isinstance(input, Tensor):
        raise TypeError("bitwise_not(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    return input._bitwise_not()


_BITWISE = (bitwise_and, bitwise_or, bitwise_xor, bitwise_left_shift, bitwise_right_shift)


def _inplace(f):
    """x.op_(other): the out-of-place result written into x, which must be
    able to hold its dtype (PyTorch's "result type ... can't be cast")."""
    def m(self, other):
        d = _result_dtype(self, other)
        if d is not None and _CATEGORY[d] > _CATEGORY[_dname(self.dtype)]:
            from ._inplace import _type_name

            raise RuntimeError(f"result type {_type_name(getattr(_C, d))} can't be cast to the "
                               f"desired output type {_type_name(self.dtype)}")
        r = f(self, other)
        return self.copy_(r if r.dtype == self.dtype else r.to(self.dtype))

    m.__name__ = f.__name__ + "_"
    return m


def _operator(f, reflected=False):
    def op(self, other):
        if not isinstance(other, (Tensor, _numbers.Number)) or isinstance(other, complex):
            return NotImplemented
        return f(other, self) if reflected else f(self, other)

    return op


def _invert(self):
    if _dname(self.dtype) in _FLOATS:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return self._bitwise_not()


def _bitwise_not_(self):
    return self.copy_(bitwise_not(self))


def _install_bitwise(T, namespace):
    for f in _BITWISE:
        namespace[f.__name__] = f
        setattr(T, f.__name__, lambda self, other, f=f: f(self, other))
        setattr(T, f.__name__ + "_", _inplace(f))
    namespace["bitwise_not"] = bitwise_not
    T.bitwise_not = lambda self: bitwise_not(self)
    T.bitwise_not_ = _bitwise_not_
    for sym, f in (("and", bitwise_and), ("or", bitwise_or), ("xor", bitwise_xor),
                   ("lshift", bitwise_left_shift), ("rshift", bitwise_right_shift)):
        setattr(T, f"__{sym}__", _operator(f))
        setattr(T, f"__r{sym}__", _operator(f, reflected=True))
        setattr(T, f"__i{sym}__", _operator(_inplace(f)))
    T.__invert__ = _invert


# ---- quantile / nanquantile ----

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, fn):
    """PyTorch 1.13's quantile_compute: sort (NaN last), ranks q * (n - 1)
    (of the non-NaN count for nanquantile; the last index where a row has a
    NaN for quantile), adjusted by the interpolation, gathered and lerped."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q and (not isinstance(q, _numbers.Real) or isinstance(q, _b.bool)):
        raise TypeError(f"{fn}(): argument 'q' (position 2) must be Tensor or float, not "
                        f"{type(q).__name__}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if _dname(input.dtype) not in _FLOATS:
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if scalar_q:
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        qt = _C.tensor([float(q)], dtype=input.dtype)
    else:
        if q.dim() > 1:
            raise RuntimeError("quantile() q must be a scalar or 1D tensor")
        if q.dtype != input.dtype:
            raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
        qn = q.detach().numpy()
        if not ((qn >= 0) & (qn <= 1)).all():
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        scalar_q = q.dim() == 0
        qt = q.detach().reshape(-1)
    nd = input.dim()
    if dim is None:
        x = input.reshape(-1)
    else:
        dim = int(dim)
        n = _b.max(nd, 1)
        if not -n <= dim < n:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, "
                             f"{n - 1}], but got {dim})")
        dim = dim % n
        x = input.reshape(1) if nd == 0 else input.movedim(dim, -1)
    srt = x.sort(-1)[0]
    rows = tuple(srt.shape[:-1])
    last = srt.shape[-1] - 1
    nan = srt.isnan()
    if ignore_nan:
        count = nan.logical_not().sum(-1, keepdim=True)
        ranks = qt * (count - 1).to(input.dtype)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        ranks = (qt * last).expand(rows + (qt.shape[0],))
        ranks = ranks.masked_fill(nan.any(-1, keepdim=True).expand_as(ranks), last)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to(_C.int64)
    out = srt.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        w = ranks.new_full(ranks.shape, 0.5) if interpolation == "midpoint" else ranks - below
        out = out.lerp(srt.gather(-1, ranks.ceil().to(_C.int64)), w)
    out = out.movedim(-1, 0)  # [q, rows...]
    if keepdim:
        if dim is None:
            out = out.reshape((out.shape[0],) + (1,) * nd)
        elif nd > 0:
            out = out.unsqueeze(dim + 1)
    return out.squeeze(0) if scalar_q else out


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles of input (flattened, or along dim), interpolating
    between the two nearest sorted values as interpolation says; NaN where a
    reduced row holds a NaN."""
    if out is not None:
        raise TypeError("quantile(): jitgrad does not support out=")
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile ignoring NaN values (NaN where a row is all NaN)."""
    if out is not None:
        raise TypeError("nanquantile(): jitgrad does not support out=")
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ---- index_put, put, masked_scatter, scatter_reduce, scatter(reduce=) ----

def _tensor(x, fn, arg, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _flat_index(self, indices, fn):
    """The index tensors of self[indices] (bool masks as their nonzero
    positions) as one int64 index into self's first k dims flattened, and
    the shape that indexing gives (the broadcast index shape, then the
    remaining dims)."""
    idx = []
    for t in indices:
        if t is None:
            raise RuntimeError(f"{fn}(): None indices are not supported by jitgrad")
        _tensor(t, fn, "indices", 2)
        if _dname(t.dtype) == "bool":
            idx.extend(t.nonzero().unbind(1))
        elif _dname(t.dtype) == "int64":
            idx.append(t)
        else:
            raise IndexError("tensors used as indices must be long, byte or bool tensors")
    k = len(idx)
    if k > _b.max(self.dim(), 1) or (self.dim() == 0 and k):
        raise IndexError(f"too many indices for tensor of dimension {self.dim()} (got {k})")
    if k > 1:
        from ._aliases import broadcast_tensors

        idx = list(broadcast_tensors(*idx))
    shape = tuple(self.shape)
    lin = None
    for j, t in enumerate(idx):
        n = shape[j]
        bad = ((t >= n) | (t < -n)).nonzero()
        if bad.numel():
            v = t[tuple(bad[0].tolist())].item()
            raise IndexError(f"index {v} is out of bounds for dimension {j} with size {n}")
        t = t + (t < 0).to(_C.int64) * n
        lin = t if lin is None else lin * n + t
    ishape = tuple(idx[0].shape) if k else ()
    return lin.reshape(-1), ishape + shape[k:], k


def index_put(input, indices, values, accumulate=False):
    """input with input[indices] = values (accumulate=True: += values, the
    repeated positions summed), out of place."""
    _tensor(input, "index_put", "input", 1)
    if not isinstance(indices, (tuple, list)):
        raise TypeError("index_put(): argument 'indices' (position 2) must be tuple of Tensors, "
                        f"not {type(indices).__name__}")
    _tensor(values, "index_put", "values", 3)
    if values.dtype != input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_type_name(input.dtype)} for the destination and "
                           f"{_type_name(values.dtype)} for the source.")
    if not indices:  # input[()] = values: the whole tensor
        if accumulate:
            return input + values
        return _C.where(input.new_ones(input.shape).to(_C.bool), values, input)
    lin, shape, k = _flat_index(input, indices, "index_put")
    rest = tuple(input.shape[k:])
    flat = input.reshape((-1,) + rest)
    src = values.expand(shape).reshape((-1,) + rest)
    out = flat.index_add(0, lin, src) if accumulate else flat.index_copy(0, lin, src)
    return out.reshape(tuple(input.shape))


def _type_name(dtype):
    from ._inplace import _type_name as name

    return name(dtype)


def put(input, index, source, accumulate=False):
    """input with the elements at index (into input as if flattened) set to
    source's (accumulate=True: added), out of place."""
    _tensor(input, "put", "input", 1)
    _tensor(index, "put", "index", 2)
    _tensor(source, "put", "source", 3)
    if index.numel() != source.numel():
        raise IndexError("put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.numel()}, "
                         f"index.numel() = {index.numel()}")
    if _dname(index.dtype) != "int64":
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{_type_name(index.dtype)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_type_name(input.dtype)} and source.dtype = "
                           f"{_type_name(source.dtype)}")
    n = input.numel()
    idx = index.reshape(-1)
    bad = ((idx >= n) | (idx < -n)).nonzero()
    if bad.numel():
        raise IndexError(f"out of range: tried to access index {idx[bad[0, 0]].item()} on a "
                         f"tensor of {n} elements.")
    idx = idx + (idx < 0).to(_C.int64) * n
    flat, src = input.reshape(-1), source.reshape(-1)
    out = flat.index_add(0, idx, src) if accumulate else flat.index_copy(0, idx, src)
    return out.reshape(tuple(input.shape))


def masked_scatter(input, mask, source):
    """input with the positions where mask (broadcast to input) is set
    taking source's elements in order, out of place: where(mask, the source
    element numbered by the mask's running count, input)."""
    _tensor(input, "masked_scatter", "input", 1)
    _tensor(mask, "masked_scatter", "mask", 2)
    _tensor(source, "masked_scatter", "source", 3)
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got {_type_name(input.dtype)} and {_type_name(source.dtype)}")
    m = mask.to(_C.bool).expand_as(input).reshape(-1)
    pos = m.to(_C.int64).cumsum(0) - 1
    if input.numel() and pos[-1].item() + 1 > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    pos = pos.clamp(min=0)
    src = source.reshape(-1)
    if src.numel() == 0:
        return input.clone()
    taken = src.gather(0, pos.clamp(max=src.numel() - 1))
    return _C.where(m, taken, input.reshape(-1)).reshape(tuple(input.shape))


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """input with src's elements reduced into the positions index names
    along dim ('sum', 'prod', 'mean', 'amax', 'amin'; include_self=False:
    input's own value at those positions left out), as PyTorch 1.13 computes
    it, with its gradients."""
    if out is not None:
        raise TypeError("scatter_reduce(): jitgrad does not support out=")
    _tensor(input, "scatter_reduce", "input", 1)
    _tensor(index, "scatter_reduce", "index", 3)
    _tensor(src, "scatter_reduce", "src", 4)
    if reduce not in _REDUCES:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    if reduce in ("sum", "mean"):
        base = input if include_self else input.scatter(dim, index, 0)
        total = base.scatter_add(dim, index, src)
        if reduce == "sum":
            return total
        count = (input.new_ones(input.shape) if include_self else input.new_zeros(input.shape))
        count = count.scatter_add(dim, index, input.new_ones(tuple(index.shape)))
        count = count.masked_fill(count == 0, 1)
        if _dname(input.dtype) in _FLOATS:
            return total / count
        return total.div(count, rounding_mode="floor")
    return _ScatterExtreme.apply(input, dim, index, src, reduce, include_self)


def _np_reduce(input, dim, index, src, reduce, include_self):
    """The value of scatter_reduce prod / amax / amin (numpy's ufunc.at in
    index order)."""
    a = input.detach().numpy().copy()
    idx = index.numpy()
    sv = src.detach().numpy()[tuple(slice(0, n) for n in idx.shape)]
    d = dim % _b.max(a.ndim, 1)
    grid = list(_np.indices(idx.shape, sparse=True))
    grid[d] = idx
    pos = tuple(_np.broadcast_to(g, idx.shape) for g in grid)
    ufunc = {"prod": _np.multiply, "amax": _np.fmax, "amin": _np.fmin}[reduce]
    if reduce != "prod":
        # PyTorch's scatter max/min propagate NaN
        ufunc = _np.maximum if reduce == "amax" else _np.minimum
    if not include_self:
        ident = {"prod": 1, "amax": -_np.inf, "amin": _np.inf}[reduce]
        if a.dtype.kind != "f" and reduce != "prod":
            info = _np.iinfo(a.dtype)
            ident = info.min if reduce == "amax" else info.max
        a[pos] = ident
    ufunc.at(a, pos, sv)
    return a


def _lead(t, shape):
    """The leading block of t with the given shape (src beyond index's
    extent takes no part)."""
    return t if tuple(t.shape) == tuple(shape) else t[tuple(slice(0, n) for n in shape)]


def _pad_to(t, shape):
    """t (a leading block of shape) zero-padded to shape."""
    for d, (a, b) in enumerate(zip(tuple(t.shape), tuple(shape))):
        if a != b:
            pad = list(t.shape)
            pad[d] = b - a
            from ._opsshape import cat

            t = cat([t, t.new_zeros(pad)], d)
    return t


def _extreme_function():
    from .autograd import Function

    def reduced(input, dim, index, src, reduce, include_self):
        return _C.tensor(_np_reduce(input, dim, index, src, reduce, include_self),
                         dtype=input.dtype)

    class ScatterReduceBackward(Function):
        """scatter_reduce prod / amax / amin: the value by numpy's ufunc.at,
        the gradients PyTorch 1.13's scatter_reduce_backward computes."""

        @staticmethod
        def forward(ctx, input, dim, index, src, reduce, include_self):
            r = reduced(input, dim, index, src, reduce, include_self)
            ctx.save_for_backward(input, index, src, r)
            ctx.args = (dim, reduce, include_self)
            return r

        @staticmethod
        def backward(ctx, grad):
            input, index, src, result = ctx.saved_tensors
            dim, reduce, include_self = ctx.args
            srcv = _lead(src, index.shape)
            if reduce == "prod":
                # exclusive products where self or a single src element is 0
                masked_self = input.masked_fill(input == 0, 1)
                grad_self = grad * reduced(masked_self, dim, index, src, "prod",
                                           include_self) / masked_self
                src_zero = srcv == 0
                nzero = input.new_zeros(input.shape).scatter_add(
                    dim, index, src_zero.to(input.dtype)).gather(dim, index)
                single = src_zero & (nzero == 1)
                masked_src = reduced(input, dim, index, srcv.masked_fill(single, 1), "prod",
                                     include_self)
                grad_src = _C.where(single, (grad * masked_src).gather(dim, index),
                                    (grad * result).gather(dim, index)
                                    / srcv.masked_fill(src_zero, 1))
            else:
                # shared evenly among the elements equal to the result
                value = result.gather(dim, index)
                self_is = (input == result).to(input.dtype)
                src_is = (srcv == value).to(input.dtype)
                dist = grad / self_is.scatter_add(dim, index, src_is)
                grad_self = (input == result) * dist
                grad_src = (srcv == value) * dist.gather(dim, index)
            if not include_self:
                grad_self = grad_self.scatter(dim, index, 0)
            return grad_self, None, None, _pad_to(grad_src, src.shape), None, None

    return ScatterReduceBackward


class _ScatterExtreme:
    _fn = None

    @classmethod
    def apply(cls, *args):
        if cls._fn is None:
            cls._fn = _extreme_function()
        return cls._fn.apply(*args)


def _scatter_method(old):
    def scatter(self, dim, index, src=None, value=None, *, reduce=None):
        """scatter, and scatter(..., reduce='add' / 'multiply'): the values
        reduced into self's (no gradient, as in PyTorch)."""
        if reduce is None:
            return old(self, dim, index, src, value)
        if reduce not in ("add", "multiply"):
            raise RuntimeError("reduce argument must be either add or multiply.")
        if not isinstance(src, Tensor):
            v = src if value is None else value
            src = self.new_full(tuple(index.shape), float(v))
        from . import no_grad

        with no_grad():
            r = scatter_reduce(self, dim, index, src, "sum" if reduce == "add" else "prod")
        return r

    return scatter


# ---- lgamma, digamma, polygamma, mvlgamma ----

def _unary(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def lgamma(input, *, out=None):
    """log |Gamma(x)| (libm's lgamma, as PyTorch); gradient digamma(x)."""
    if out is not None:
        raise TypeError("lgamma(): jitgrad does not support out=")
    return _unary(input, "lgamma")._lgamma()


def digamma(input, *, out=None):
    """The logarithmic derivative of Gamma (PyTorch's calc_digamma: -inf /
    +inf at -0 / +0, NaN at the negative integers); gradient polygamma(1, x)."""
    if out is not None:
        raise TypeError("digamma(): jitgrad does not support out=")
    return _unary(input, "digamma")._digamma()


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma; jitgrad has n = 0 (digamma) and n = 1
    (trigamma, whose own gradient jitgrad does not have)."""
    if out is not None:
        raise TypeError("polygamma(): jitgrad does not support out=")
    if not isinstance(n, _numbers.Integral) or isinstance(n, _b.bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__}")
    _unary(input, "polygamma")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return input._digamma()
    if n == 1:
        return input._trigamma()
    raise RuntimeError(f"jitgrad: polygamma(n, x) is implemented for n = 0 and 1, not {n}")


def mvlgamma(input, p):
    """The multivariate log-gamma function of dimension p:
    sum over i < p of lgamma(x - i / 2), plus p (p - 1) / 4 log(pi)."""
    _unary(input, "mvlgamma")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if _dname(input.dtype) not in _FLOATS:
        input = input.to(_C.float32)
    import math

    args = input.unsqueeze(-1) + _C.tensor([-i / 2 for i in range(p)], dtype=input.dtype)
    return args._lgamma().sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def install(T, namespace):
    """The Tensor methods and the jitgrad.* functions of this module."""
    T.__array__ = _array
    T.__array_priority__ = 1000
    T.__contains__ = _contains
    T.mT = property(_mT)
    _install_bitwise(T, namespace)
    for f in (quantile, nanquantile, index_put, put, masked_scatter, scatter_reduce):
        namespace[f.__name__] = f
    from . import _inplace

    T.index_put = lambda self, indices, values, accumulate=False: index_put(
        self, indices, values, accumulate)
    T.put = lambda self, index, source, accumulate=False: put(self, index, source, accumulate)
    T.masked_scatter = lambda self, mask, source: masked_scatter(self, mask, source)
    T.scatter_reduce = lambda self, dim, index, src, reduce, *, include_self=True: (
        scatter_reduce(self, dim, index, src, reduce, include_self=include_self))
    T.scatter = _scatter_method(T.scatter)
    old_fn = namespace["scatter"]

    def scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
        if reduce is None:
            return old_fn(input, dim, index, src, value, out=out)
        if out is not None:
            raise TypeError("scatter(): jitgrad does not support out=")
        return T.scatter(input, dim, index, src, value, reduce=reduce)

    scatter.__doc__ = old_fn.__doc__
    namespace["scatter"] = scatter
    for name in ("index_put", "put", "masked_scatter", "scatter_reduce", "scatter"):
        setattr(T, name + "_", _inplace._inplace(name))
    for f in (lgamma, digamma, polygamma, mvlgamma):
        namespace[f.__name__] = f
    T.lgamma = lambda self: lgamma(self)
    T.digamma = lambda self: digamma(self)
    T.polygamma = lambda self, n: polygamma(n, self)
    T.mvlgamma = lambda self, p: mvlgamma(self, p)
    for name in ("lgamma", "digamma", "mvlgamma"):
        setattr(T, name + "_", _inplace._inplace(name))
    T.polygamma_ = lambda self, n: self.copy_(polygamma(n, self))
    from . import special

    namespace["special"] = special
    namespace["index_put_"] = lambda input, indices, values, accumulate=False: (
        input.index_put_(indices, values, accumulate))
    T.quantile = lambda self, q, dim=None, keepdim=False, *, interpolation="linear": quantile(
        self, q, dim, keepdim, interpolation=interpolation)
    T.nanquantile = lambda self, q, dim=None, keepdim=False, *, interpolation="linear": (
        nanquantile(self, q, dim, keepdim, interpolation=interpolation))
