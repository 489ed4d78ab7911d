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


def install(T, namespace):
    """The Tensor methods and the jitgrad.* functions of this module."""
    T.__array__ = _array
    T.__array_priority__ = 1000
    T.__contains__ = _contains
    T.mT = property(_mT)
    _install_bitwise(T, namespace)
    for f in (quantile, nanquantile):
        namespace[f.__name__] = f
    T.quantile = lambda self, q, dim=None, keepdim=False, *, interpolation="linear": quantile(
        self, q, dim, keepdim, interpolation=interpolation)
    T.nanquantile = lambda self, q, dim=None, keepdim=False, *, interpolation="linear": (
        nanquantile(self, q, dim, keepdim, interpolation=interpolation))
