"""PyTorch's constants, dtype queries, creation functions, RNG state,
inference_mode and small Tensor utilities (docs/python.md).

Everything here is built from existing jitgrad functions and Tensor methods
(so autograd and the compiler see the ops they are made of); numpy computes
only index patterns.  jitgrad's dtypes are float32, float64, int64, int32 and
bool; the default dtype of Python floats is float32 and stays so.
"""
import builtins as _b
import functools as _functools
import math as _math
import numbers as _numbers
import os as _os

import numpy as _np

from . import _C
from ._C import Tensor

pi = _math.pi
e = _math.e
inf = _math.inf
nan = _math.nan

_F32, _F64, _I64, _I32, _BOOL = _C.float32, _C.float64, _C.int64, _C.int32, _C.bool
# promotion order of jitgrad's dtypes: the larger wins (PyTorch's table
# restricted to these five)
_RANK = {_BOOL: 0, _I32: 1, _I64: 2, _F32: 3, _F64: 4}
_NAMES = {_F32: "float32", _F64: "float64", _I64: "int64", _I32: "int32", _BOOL: "bool"}


def _dtype_arg(d, fn, arg, pos):
    if not isinstance(d, _C.dtype):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be torch.dtype, not "
                        f"{type(d).__name__}")
    return d


# ---------------------------------------------------------------- dtype info


class finfo:
    """Machine limits of a floating dtype: bits, eps, max, min, tiny
    (= smallest_normal), resolution, dtype (its name)."""

    def __init__(self, type=None):
        if type is None:
            type = _F32  # the default dtype
        _dtype_arg(type, "finfo", "type", 1)
        if not type.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        np_info = _np.finfo(_np.float32 if type is _F32 else _np.float64)
        self.bits = int(np_info.bits)
        self.eps = float(np_info.eps)
        self.max = float(np_info.max)
        self.min = float(np_info.min)
        self.tiny = self.smallest_normal = float(np_info.tiny)
        self.resolution = 10.0 ** -int(np_info.precision)
        self.dtype = _NAMES[type]

    def __eq__(self, other):
        return isinstance(other, finfo) and self.dtype == other.dtype

    __hash__ = None

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype: bits, max, min, dtype (its name)."""

    def __init__(self, type):
        _dtype_arg(type, "iinfo", "type", 1)
        if type is _BOOL:
            raise TypeError("torch.bool is not supported by torch.iinfo")
        if type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        np_info = _np.iinfo(_np.int32 if type is _I32 else _np.int64)
        self.bits = int(np_info.bits)
        self.max = int(np_info.max)
        self.min = int(np_info.min)
        self.dtype = _NAMES[type]

    def __eq__(self, other):
        return isinstance(other, iinfo) and self.dtype == other.dtype

    __hash__ = None

    def __repr__(self):
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"


def promote_types(type1, type2):
    """The smallest dtype both type1 and type2 convert to without losing
    their kind (bool < int32 < int64 < float32 < float64)."""
    _dtype_arg(type1, "promote_types", "type1", 1)
    _dtype_arg(type2, "promote_types", "type2", 2)
    return type1 if _RANK[type1] >= _RANK[type2] else type2


def _category(d):
    return 2 if d.is_floating_point else (0 if d is _BOOL else 1)


def _combine(higher, lower):
    """PyTorch's combine_categories: an operand of a lower priority class
    (0-dim tensor, Python number) counts only when its kind is higher."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_floating_point:
        return higher
    if higher is _BOOL or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def _result_type(operands, fn):
    dim = zero = wrapped = None
    for x in operands:
        if isinstance(x, Tensor):
            if x.dim() > 0:
                dim = x.dtype if dim is None else promote_types(dim, x.dtype)
            else:
                zero = x.dtype if zero is None else promote_types(zero, x.dtype)
        elif isinstance(x, (_numbers.Number, _np.number, _np.bool_)):
            if isinstance(x, (bool, _np.bool_)):
                d = _BOOL
            elif isinstance(x, _numbers.Integral):
                d = _I64
            elif isinstance(x, _numbers.Real):
                d = _F32  # the default dtype
            else:
                raise TypeError(f"{fn}: complex numbers are not supported by jitgrad")
            wrapped = d if wrapped is None else promote_types(wrapped, d)
        else:
            return None
    return _combine(dim, _combine(zero, wrapped))


def result_type(tensor, other):
    """The dtype an arithmetic op of tensor and other gives (PyTorch's
    rules: dimensioned tensors first, then 0-dim tensors, then Python
    numbers, a lower class counting only when its kind is higher)."""
    r = _result_type((tensor, other), "result_type")
    if r is None:
        names = ", ".join(type(a).__name__ if not isinstance(a, Tensor) else "Tensor"
                          for a in (tensor, other))
        raise TypeError(f"result_type() received an invalid combination of arguments - got "
                        f"({names}), but expected one of:\n * (Tensor tensor, Tensor other)\n"
                        " * (Number scalar, Tensor tensor)\n * (Tensor tensor, Number other)\n"
                        " * (Number scalar1, Number scalar2)")
    return r


def can_cast(from_, to):
    """Whether PyTorch's casting rules allow from_ -> to in an op with out=
    or in place: not floating to integral or bool, not non-bool to bool."""
    _dtype_arg(from_, "can_cast", "from", 1)
    _dtype_arg(to, "can_cast", "to", 2)
    if from_.is_floating_point and not to.is_floating_point:
        return False
    if from_ is not _BOOL and to is _BOOL:
        return False
    return True


_TENSOR_TYPES = {_F32: "torch.FloatTensor", _F64: "torch.DoubleTensor",
                 _I64: "torch.LongTensor", _I32: "torch.IntTensor", _BOOL: "torch.BoolTensor"}


def typename(o):
    """A tensor's legacy type name (torch.FloatTensor ...; PyTorch's
    spelling), else the object's qualified class name."""
    if isinstance(o, Tensor):
        return _TENSOR_TYPES[o.dtype]
    module = ""
    class_name = ""
    if hasattr(o, "__module__") and o.__module__ not in ("builtins", "__builtin__", None):
        module = o.__module__ + "."
    if hasattr(o, "__qualname__"):
        class_name = o.__qualname__
    elif hasattr(o, "__name__"):
        class_name = o.__name__
    else:
        class_name = o.__class__.__name__
    return module + class_name


def set_default_dtype(d):
    """Only float32 (the default, a no-op) is accepted: jitgrad's factories
    make float32 tensors from Python floats and cannot switch to float64."""
    if not isinstance(d, _C.dtype) or not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if d is not _F32:
        raise RuntimeError("jitgrad: the default dtype is float32 and cannot be changed "
                           "(pass dtype=jitgrad.float64 to the factories instead)")


# ------------------------------------------------------------------ creation


def _size_args(size, fn):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, _numbers.Integral) or isinstance(s, bool):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, but found element "
                            f"of type {type(s).__name__}")
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
    return tuple(int(s) for s in size)


def _finish(t, requires_grad):
    return t.requires_grad_() if requires_grad else t


def empty(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, memory_format=None, **kw):
    """A tensor of the given size (jitgrad fills it with zeros; PyTorch
    leaves it uninitialized)."""
    if out is not None:
        raise TypeError("empty(): jitgrad does not support out=")
    if "size" in kw and not size:
        size = (kw.pop("size"),)
    if kw:
        raise TypeError(f"empty() got an unexpected keyword argument '{next(iter(kw))}'")
    if not size:
        raise TypeError("empty() received an invalid combination of arguments - got (), but "
                        "expected one of:\n * (tuple of ints size, *, tuple of names names, "
                        "torch.memory_format memory_format, torch.dtype dtype, torch.layout "
                        "layout, torch.device device, bool pin_memory, bool requires_grad)")
    shape = _size_args(size, "empty")
    return _finish(_C.zeros(shape, dtype=dtype or _F32, device=device), requires_grad)


def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    """A tensor with input's size (and dtype unless given), zero filled."""
    _tensor_arg(input, "empty_like")
    return _finish(_C.zeros(tuple(input.shape), dtype=dtype or input.dtype, device=device),
                   requires_grad)


def _tensor_arg(x, fn, arg="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _strided(size, stride, dtype, fn):
    """A zero-filled tensor with the given size and strides: a view over a
    fresh storage just big enough for them."""
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality "
                           f"of strides ({len(stride)})")
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: "
                               f"{list(size)}")
    for s in stride:
        if s < 0:
            raise RuntimeError(f"{fn}: negative strides are not supported")
    n = 0 if 0 in size else 1 + sum((a - 1) * b for a, b in zip(size, stride))
    return _C.zeros(n, dtype=dtype)._storage_view(size, stride, 0)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A zero-filled tensor of the given size whose stride() is stride."""
    if device is not None:
        _C.zeros(0, device=device)
    return _finish(_strided(size, stride, dtype or _F32, "empty_strided"), requires_grad)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    """A tensor with input's size (and dtype unless given) filled with
    fill_value."""
    _tensor_arg(input, "full_like")
    return _finish(_C.full(tuple(input.shape), fill_value, dtype=dtype or input.dtype,
                           device=device), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """data as a tensor, sharing memory where it can: a tensor of the same
    dtype is returned itself, a numpy array of a jitgrad dtype is shared;
    anything else is copied (a tensor of another dtype: a differentiable
    conversion)."""
    if device is not None:
        _C.zeros(0, device=device)
    if isinstance(data, Tensor):
        return data if dtype is None or dtype is data.dtype else data.to(dtype)
    if isinstance(data, _np.ndarray):
        try:
            t = _C.from_numpy(data)
        except (TypeError, RuntimeError, ValueError):
            t = None
        if t is not None:
            return t if dtype is None or dtype is t.dtype else t.to(dtype)
    return _C.tensor(data, dtype=dtype) if dtype is not None else _C.tensor(data)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor: shared memory when allowed (copy=None / False) and
    possible, a copy when copy=True; requires_grad makes the result a leaf
    that requires grad."""
    if isinstance(obj, Tensor) or isinstance(obj, _np.ndarray):
        t = as_tensor(obj, dtype=dtype, device=device)
        shared = t is obj or (isinstance(obj, _np.ndarray) and dtype in (None, t.dtype)
                              and _shares(t, obj))
        if copy is False and not shared:
            raise ValueError("can't alias tensor from a different dtype or device without "
                             "copying it")
        if isinstance(obj, Tensor) and t is not obj:
            t = t.detach()  # a converted tensor has no history (PyTorch's neither)
        if copy:  # a copy without history (PyTorch's too)
            t = (t.detach().clone() if t is obj or shared else t.detach())
    else:
        if copy is False:
            raise ValueError("can't alias a Python sequence or number without copying it")
        t = _C.tensor(obj, dtype=dtype) if dtype is not None else _C.tensor(obj)
    if requires_grad:
        if not t.is_floating_point():
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        if not t.requires_grad:
            t.requires_grad_()
    return t


def _shares(t, arr):
    try:
        return t.data_ptr() == arr.__array_interface__["data"][0]
    except (AttributeError, KeyError, TypeError):
        return False


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """A 0-dim tensor holding the number s (float32 unless dtype says)."""
    if isinstance(s, Tensor):
        if s.numel() != 1:
            raise RuntimeError(f"a Tensor with {s.numel()} elements cannot be converted to "
                               "Scalar")
        s = s.item()
    if not isinstance(s, (_numbers.Number, _np.number, _np.bool_)):
        raise TypeError(f"scalar_tensor(): argument 's' (position 1) must be Number, not "
                        f"{type(s).__name__}")
    return _finish(_C.full((), s, dtype=dtype or _F32, device=device), requires_grad)


def _new(self, *args, **kwargs):
    """Tensor.new: PyTorch's legacy constructor with self's dtype: new(*sizes)
    (zero filled), new(data) (a sequence; a tensor is returned as an alias
    when its dtype is self's), new() (empty)."""
    bad = [k for k in kwargs if k != "device"]
    if bad:
        raise TypeError(f"new() received an invalid combination of arguments - got an "
                        f"unexpected keyword argument '{bad[0]}'")
    if kwargs.get("device") is not None:
        _C.zeros(0, device=kwargs["device"])
    if not args:
        return _C.zeros(0, dtype=self.dtype)
    if all(isinstance(a, _numbers.Integral) and not isinstance(a, bool) for a in args):
        return _C.zeros(*args, dtype=self.dtype)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, Tensor):
            if a.dtype is not self.dtype:
                raise TypeError(f"expected {_options(self.dtype)} (got {_options(a.dtype)})")
            return a.detach()
        if isinstance(a, (_numbers.Number, _np.number)):
            raise TypeError(f"new(): data must be a sequence (got {type(a).__name__})")
        return _C.tensor(a, dtype=self.dtype)
    raise TypeError("new() received an invalid combination of arguments - got "
                    f"({', '.join(type(a).__name__ for a in args)})")


_CPP_NAMES = {_F32: "float", _F64: "double", _I64: "long int", _I32: "int", _BOOL: "bool"}


def _options(dtype):
    """PyTorch's spelling of a tensor's options in Tensor.new's error."""
    return (f"TensorOptions(dtype={_CPP_NAMES[dtype]}, device=cpu, layout=Strided, "
            "requires_grad=false (default), pinned_memory=false (default), "
            "memory_format=(nullopt))")


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                       requires_grad=False, pin_memory=False):
    """A zero-filled tensor of size and stride, with self's dtype unless
    given."""
    if device is not None:
        _C.zeros(0, device=device)
    return _finish(_strided(size, stride, dtype or self.dtype, "new_empty_strided"),
                   requires_grad)


# ----------------------------------------------------------------------- RNG

_MASK = (1 << 64) - 1


def get_rng_state():
    """The global generator's state as an int64 tensor [initial seed,
    position] (bit patterns; PyTorch's is a uint8 tensor of its Mersenne
    Twister): set_rng_state(get_rng_state()) replays the same numbers."""
    signed = [v - (1 << 64) if v >> 63 else v for v in _C._rng_get()]
    return _C.tensor(signed, dtype=_I64)


def set_rng_state(new_state):
    """Restores a state get_rng_state returned."""
    if not isinstance(new_state, Tensor):
        raise TypeError(f"expected a torch.ByteTensor, but got {type(new_state).__name__}")
    if new_state.dtype is not _I64 or tuple(new_state.shape) != (2,):
        raise TypeError("RNG state must be the int64 tensor of 2 elements that get_rng_state "
                        "returns")
    init, state = (v & _MASK for v in new_state.tolist())
    _C._rng_set(init, state)


def initial_seed():
    """The seed the global generator was last seeded with (manual_seed /
    seed), or its fixed default."""
    return _C._rng_get()[0]


def seed():
    """Seeds the global generator from the operating system's randomness;
    returns the seed."""
    s = int.from_bytes(_os.urandom(8), "little") & ((1 << 63) - 1)
    _C.manual_seed(s)
    return s


def _global_generator():
    """jitgrad.default_generator: a Generator whose state is the global
    one (manual_seed, get_rng_state ... act on the same numbers)."""
    from ._generator import Generator

    class _DefaultGenerator(Generator):
        def __init__(self):
            self._cap = None  # draws with generator=default_generator: the global one

        def manual_seed(self, seed):
            if not isinstance(seed, int) or isinstance(seed, bool):
                try:
                    seed = int(seed)
                except (TypeError, ValueError):
                    raise TypeError(f"manual_seed expected a long, but got "
                                    f"{type(seed).__name__}") from None
            _C.manual_seed(seed & _MASK)
            return self

        def seed(self):
            return seed()

        def initial_seed(self):
            return initial_seed()

        def get_state(self):
            return get_rng_state()

        def set_state(self, new_state):
            set_rng_state(new_state)
            return self

        def __reduce__(self):
            raise TypeError("cannot pickle the default generator")

    _DefaultGenerator.__name__ = _DefaultGenerator.__qualname__ = "Generator"
    _DefaultGenerator.__module__ = "jitgrad"
    return _DefaultGenerator()


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, generator=None):
    """Integers uniform in [low, high) with input's size (and dtype unless
    given); randint_like(input, high) as PyTorch's."""
    _tensor_arg(input, "randint_like")
    if high is None:
        low, high = 0, low
    if device is not None:
        _C.zeros(0, device=device)
    return _finish(random_(_C.zeros(tuple(input.shape), dtype=dtype or input.dtype), low, high,
                           generator=generator), requires_grad)


def normal(mean, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None,
           device=None, pin_memory=False, requires_grad=False):
    """Normal(mean, std) samples: tensor mean and/or std broadcast together
    (the result's size), or two numbers and size.  As in PyTorch 1.13 the
    result of tensor arguments carries their history with zero gradients."""
    from ._generator import _drawing

    if out is not None:
        raise TypeError("normal(): jitgrad does not support out=")
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got "
                            f"({type(mean).__name__}, {type(std).__name__}), but expected "
                            "(Tensor mean, Tensor std), (Tensor mean, float std), "
                            "(float mean, Tensor std) or (float mean, float std, tuple of ints "
                            "size)")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        if device is not None:
            _C.zeros(0, device=device)
        with _drawing(generator, "normal"):
            z = _C.randn(tuple(size), dtype=dtype or _F32)
        return _finish(z * std + mean, requires_grad)
    if st:
        if (std.detach() < 0).any().item():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    md = mean.detach() if mt else mean
    sd = std.detach() if st else std
    ref = (md * 0 if mt else 0) + (sd * 0 if st else 0)
    shape = tuple(ref.shape)
    with _drawing(generator, "normal"):
        z = _C.randn(shape, dtype=ref.dtype)
    sample = z * sd + md
    tracked = [t for t in (mean, std) if isinstance(t, Tensor) and t.requires_grad]
    for t in tracked:  # the history, with zero gradients (PyTorch's NormalBackward)
        sample = sample + t * 0
    return sample


def logspace(start, end, steps, base=10.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False):
    """steps values base ** x for x evenly spaced from start to end."""
    if out is not None:
        raise TypeError("logspace(): jitgrad does not support out=")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    d = dtype or _F32
    x = _np.linspace(float(start), float(end), int(steps))
    v = _np.power(float(base), x)
    return _finish(_C.from_numpy(_np.ascontiguousarray(v)).to(d), requires_grad)


def range_(start, end, step=1, *, out=None, dtype=None, layout=None, device=None,
          requires_grad=False):
    """Deprecated: values from start to end inclusive, step apart (float32
    unless dtype says); arange is the half-open form."""
    import warnings

    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if out is not None:
        raise TypeError("range(): jitgrad does not support out=")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = int(_math.floor((end - start) / step)) + 1
    v = start + _np.arange(n, dtype=_np.float64) * step
    return _finish(_C.from_numpy(v).to(dtype or _F32), requires_grad)


range_.__name__ = "range"


def _tri_indices(row, col, offset, dtype, fn, lower):
    if row < 0:
        raise RuntimeError(f"row must be non-negative, got{row}")
    if col < 0:
        raise RuntimeError(f"col must be non-negative, got{col}")
    r, c = _np.indices((row, col))
    keep = (c - r <= offset) if lower else (c - r >= offset)
    idx = _np.stack([r[keep], c[keep]]).astype(_np.int64).reshape(2, -1)
    return _C.from_numpy(_np.ascontiguousarray(idx)).to(dtype or _I64)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The 2 x N (row, column) indices of the lower triangle of a row x col
    matrix (diagonal offset), row by row."""
    return _tri_indices(row, col, offset, dtype, "tril_indices", True)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The 2 x N (row, column) indices of the upper triangle of a row x col
    matrix (diagonal offset), row by row."""
    return _tri_indices(row, col, offset, dtype, "triu_indices", False)


# ------------------------------------------------------------ global flags
# jitgrad's kernels are deterministic and its float32 matmuls always run in
# full float32: these record PyTorch's switches so that scripts setting and
# reading them behave as with PyTorch.

_flags = {"deterministic": False, "warn_only": False, "matmul": "highest", "warn_always": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Records the switch (every jitgrad kernel is deterministic already)."""
    if not isinstance(mode, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {type(mode).__name__}")
    _flags["deterministic"] = mode
    _flags["warn_only"] = _b.bool(warn_only) and mode


def are_deterministic_algorithms_enabled():
    return _flags["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _flags["warn_only"]


def set_deterministic_debug_mode(debug_mode):
    """0 / 'default', 1 / 'warn', 2 / 'error': use_deterministic_algorithms
    off, on with warn_only, on."""
    if isinstance(debug_mode, str):
        names = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in names:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, "
                               f"`error`, but got {debug_mode}")
        debug_mode = names[debug_mode]
    if not isinstance(debug_mode, int) or isinstance(debug_mode, bool):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not _flags["deterministic"]:
        return 0
    return 1 if _flags["warn_only"] else 2


def set_float32_matmul_precision(precision):
    """Records 'highest', 'high' or 'medium' (jitgrad always computes float32
    matmuls in float32); another string warns and changes nothing."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got "
                           f"{type(precision).__name__}")
    if precision not in ("highest", "high", "medium"):
        import warnings

        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _flags["matmul"] = precision


def get_float32_matmul_precision():
    return _flags["matmul"]


def set_warn_always(b):
    _flags["warn_always"] = _b.bool(b)


def is_warn_always_enabled():
    return _flags["warn_always"]


def is_storage(obj):
    """False: jitgrad exposes no storage objects."""
    return False


# ------------------------------------------------------------ inference mode

_inference = [False]


class inference_mode:
    """inference_mode(mode=True): a context manager and decorator like
    no_grad (jitgrad has no separate inference tensors: ops inside record no
    history, and is_inference() stays False)."""

    def __init__(self, mode=True):
        self.mode = _b.bool(mode)

    def __enter__(self):
        self._prev = (_inference[0], _C._set_grad_enabled(not self.mode))
        _inference[0] = self.mode
        return self

    def __exit__(self, *exc):
        _inference[0], grad = self._prev
        _C._set_grad_enabled(grad)
        return False

    def __call__(self, fn):
        mode = self.mode

        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled():
    return _inference[0]


def is_inference(input):
    """False: jitgrad makes no inference tensors (see inference_mode)."""
    _tensor_arg(input, "is_inference")
    return False


# ----------------------------------------------------------- Tensor methods

_LEAF_MSG = "a leaf Variable that requires grad is being used in an in-place operation."


def _set_view(self, view):
    """self becomes view (a view of its storage) in place: PyTorch's
    in-place view ops change a tensor's metadata, not its values."""
    # a tensor changing identity cannot be traced: inside a compiled
    # function the call runs eagerly (nothing happens outside a trace)
    _C._graph_break("an in-place view op (squeeze_, unsqueeze_, t_, transpose_) runs eagerly")
    if self.requires_grad and self.is_leaf and _C.is_grad_enabled():
        raise RuntimeError(_LEAF_MSG)
    if self.is_leaf:
        self.data = view  # keeps requires_grad and (when it fits) .grad
    else:
        _C._rebind_view(self, view)
    return self


def squeeze_(self, dim=None):
    """squeeze in place: self's size-1 dims (or dim) removed."""
    return _set_view(self, self.squeeze() if dim is None else self.squeeze(dim))


def unsqueeze_(self, dim):
    """unsqueeze in place: a size-1 dim inserted at dim."""
    return _set_view(self, self.unsqueeze(dim))


def t_(self):
    """t in place: a matrix transposed (0-D and 1-D unchanged)."""
    if self.dim() > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is "
                           f"{self.dim()}D")
    return _set_view(self, self.t())


def transpose_(self, dim0, dim1):
    """transpose in place: dims dim0 and dim1 swapped."""
    return _set_view(self, self.transpose(dim0, dim1))


def fill_diagonal_(self, fill_value, wrap=False):
    """Writes fill_value on the main diagonal (all dims of equal length
    beyond 2-D; a tall matrix restarts the diagonal every columns + 1 rows
    with wrap=True)."""
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and any(s != shape[0] for s in shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    numel = int(_np.prod(shape))
    if len(shape) == 2:
        h, w = shape
        step = w + 1
        end = numel if wrap and h > w + 1 else _b.min(h, w) * w
        flat = _np.arange(0, end, step) if _b.min(h, w) > 0 else _np.arange(0)
    else:
        step = int(sum(int(_np.prod(shape[k + 1:])) for k in range(len(shape))))
        flat = _np.arange(shape[0]) * step
    mask = _np.zeros(numel, dtype=bool)
    mask[flat] = True
    try:
        return self.masked_fill_(_C.from_numpy(mask.reshape(shape)), fill_value)
    except RuntimeError as e:
        if str(e) == _LEAF_MSG:  # PyTorch writes through a view of self
            raise RuntimeError("a view of " + _LEAF_MSG) from None
        raise


_TYPE_NAMES = {_F32: "Float", _F64: "Double", _I64: "Long", _I32: "Int", _BOOL: "Bool"}


def _floating_only(self, kernel):
    if not self.is_floating_point():
        raise RuntimeError(f'"{kernel}_cpu" not implemented for \'{_TYPE_NAMES[self.dtype]}\'')


def _uniform(self, generator, fn):
    """Uniform [0, 1) float64 samples of self's shape (from generator)."""
    from ._generator import _drawing

    with _drawing(generator, fn):
        return _C.rand(tuple(self.shape), dtype=_F64)


def _fill_samples(self, values):
    return self.copy_(values.to(self.dtype))


_UNSET = object()


def random_(self, from_=_UNSET, to=_UNSET, *, generator=None, **kw):
    """Integers uniform in [from, to) (to=None: up to the dtype's largest
    exactly representable integer, 2^24 for float32, 2^53 for float64),
    cast to self's dtype, in place."""
    if "from" in kw:
        from_ = kw.pop("from")
    if kw:
        raise TypeError(f"random_() got an unexpected keyword argument '{next(iter(kw))}'")
    if to is _UNSET and from_ is not _UNSET:
        from_, to = 0, from_  # random_(to)
    if from_ is _UNSET:
        from_ = 0
    if to is _UNSET or to is None:
        to = {_F32: (1 << 24) + 1, _F64: (1 << 53) + 1, _I64: (1 << 63) - 1, _I32: (1 << 31) - 1,
              _BOOL: 2}[self.dtype]
    if from_ >= to:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={from_} "
                           f">= to={to}")
    from ._generator import _drawing

    with _drawing(generator, "random_"):
        r = _C._randint(int(from_), int(to), tuple(self.shape), _I64)
    return _fill_samples(self, r)


def exponential_(self, lambd=1.0, *, generator=None):
    """Exponential(lambd) samples, in place: -log(1 - U) / lambd."""
    _floating_only(self, "exponential")
    if lambd < 0:
        raise RuntimeError(f"exponential_ expects lambda >= 0.0, but found lambda={lambd}")
    u = _uniform(self, generator, "exponential_")
    with _np.errstate(divide="ignore"):
        return _fill_samples(self, -(1 - u).log() / lambd if lambd else
                             _C.full(tuple(self.shape), inf, dtype=_F64))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Cauchy(median, sigma) samples, in place: median + sigma tan(pi (U - 1/2))
    (sigma is not checked, as in PyTorch)."""
    _floating_only(self, "cauchy")
    u = _uniform(self, generator, "cauchy_")
    return _fill_samples(self, (pi * (u - 0.5)).tan() * sigma + median)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """exp(Normal(mean, std)) samples, in place."""
    _floating_only(self, "log_normal")
    if std <= 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    from ._generator import _drawing

    with _drawing(generator, "log_normal_"):
        z = _C.randn(tuple(self.shape), dtype=_F64)
    return _fill_samples(self, (z * std + mean).exp())


def geometric_(self, p, *, generator=None):
    """Geometric(p) samples (trials up to the first success, >= 1), in
    place: ceil(log(1 - U) / log(1 - p))."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform(self, generator, "geometric_")
    k = ((1 - u).log() / _math.log1p(-p)).ceil().clamp(min=1)
    return _fill_samples(self, k)


def resize_(self, *sizes, memory_format=None):
    """Changes self's size in place: the same elements in storage order
    from self's first one (contiguous strides), new ones zero (PyTorch
    leaves them uninitialized); the size unchanged keeps the strides.
    Tensors that require grad are refused, as PyTorch does."""
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    _C._graph_break("resize_ runs eagerly")
    shape = _size_args(sizes, "resize_")
    if shape == tuple(self.shape):
        return self
    n = int(_np.prod(shape))
    strides = tuple(int(_np.prod(shape[k + 1:])) for k in range(len(shape)))
    avail = self._storage_nbytes() // self.dtype.itemsize - self.storage_offset()
    if n <= avail:
        view = self._storage_view(shape, strides, self.storage_offset())
    else:
        base = _C.zeros(n, dtype=self.dtype)
        if avail > 0:
            base[:avail] = self._storage_view((avail,), (1,), self.storage_offset())
        view = base.view(shape)
    self.data = view
    return self


def resize_as_(self, the_template, memory_format=None):
    """resize_ to the_template's size."""
    _tensor_arg(the_template, "resize_as_", "the_template")
    return resize_(self, tuple(the_template.shape))


def is_signed(self):
    return self.dtype is not _BOOL


def is_same_size(self, other):
    return tuple(self.shape) == tuple(other.shape)


def is_nonzero(input):
    """The truth of a one-element tensor (errors as PyTorch's otherwise)."""
    _tensor_arg(input, "is_nonzero")
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return input.item() != 0


def get_device(input):
    """-1: the CPU."""
    _tensor_arg(input, "get_device")
    return -1


def _mT(self):
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return self.transpose(-2, -1)


def _mH(self):
    if self.dim() < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self.dim()}-D tensor.")
    return self.transpose(-2, -1)  # real tensors: the conjugate is the tensor


def _H(self):
    if self.dim() == 0:
        return self
    if self.dim() != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.dim()}-D tensor."
                           + (" For batches of matrices, consider using tensor.mH"
                              if self.dim() > 2 else ""))
    return self.transpose(0, 1)


def adjoint(input):
    """The conjugate transpose of the last two dims (real tensors: mT)."""
    _tensor_arg(input, "adjoint")
    if input.dim() < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of "
                           f"matrices. Got {input.dim()}-D tensor.")
    return input.transpose(-2, -1)


def _return_self(self, *args, **kwargs):
    return self


def is_complex(input):
    """False: jitgrad has no complex dtypes."""
    _tensor_arg(input, "is_complex")
    return False


def is_conj(input):
    """False: real tensors are never conjugated views."""
    _tensor_arg(input, "is_conj")
    return False


def is_neg(input):
    """False: jitgrad makes no lazily negated views."""
    _tensor_arg(input, "is_neg")
    return False


def resolve_conj(input):
    """input itself (a real tensor has no conjugate bit to resolve)."""
    _tensor_arg(input, "resolve_conj")
    return input


def resolve_neg(input):
    """input itself (no negative bit to resolve)."""
    _tensor_arg(input, "resolve_neg")
    return input


def install(T, namespace):
    """The Tensor methods and the torch.* functions of this module."""
    for name in ("squeeze_", "unsqueeze_", "t_", "transpose_", "fill_diagonal_", "random_",
                 "exponential_", "cauchy_", "log_normal_", "geometric_", "resize_",
                 "resize_as_", "is_signed", "is_same_size", "is_nonzero", "get_device",
                 "adjoint", "is_inference", "is_complex", "is_conj", "is_neg", "resolve_conj",
                 "resolve_neg"):
        setattr(T, name, globals()[name])
    T.swapdims_ = T.swapaxes_ = transpose_
    T.new = _new
    T.new_empty_strided = _new_empty_strided
    T.is_cpu = property(lambda self: True)
    T.mT = property(_mT)
    T.mH = property(_mH)
    T.H = property(_H)
    T.pin_memory = _return_self
    T.share_memory_ = _return_self
    T.is_pinned = lambda self, device=None: False
    for name in ("pi", "e", "inf", "nan", "finfo", "iinfo", "promote_types", "result_type",
                 "can_cast", "typename", "set_default_dtype", "empty", "empty_like",
                 "empty_strided", "full_like", "as_tensor", "asarray", "scalar_tensor",
                 "get_rng_state", "set_rng_state", "initial_seed", "seed", "inference_mode",
                 "is_inference_mode_enabled", "is_inference", "is_nonzero", "get_device",
                 "adjoint", "is_same_size", "is_signed", "randint_like", "is_complex", "is_conj",
                 "is_neg", "resolve_conj", "resolve_neg", "normal", "logspace", "tril_indices",
                 "triu_indices", "use_deterministic_algorithms",
                 "are_deterministic_algorithms_enabled",
                 "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
                 "get_deterministic_debug_mode", "set_float32_matmul_precision",
                 "get_float32_matmul_precision", "set_warn_always", "is_warn_always_enabled",
                 "is_storage"):
        namespace[name] = globals()[name]
    # jitgrad.range through the module's __getattr__: a global named range
    # would shadow the builtin in jitgrad/__init__.py's own code
    prev_getattr = namespace.get("__getattr__")

    def __getattr__(name):
        if name == "range":
            return range_
        if prev_getattr is not None:
            return prev_getattr(name)
        raise AttributeError(f"module 'jitgrad' has no attribute '{name}'")

    namespace["__getattr__"] = __getattr__
    for name in ("is_sparse", "is_quantized", "is_meta", "is_mkldnn", "is_nested",
                 "is_sparse_csr", "is_vulkan", "is_xpu", "is_ipu", "is_mps", "is_ort"):
        setattr(T, name, property(lambda self: False))  # a dense CPU tensor
    T.is_shared = lambda self: False
    global default_generator
    default_generator = namespace["default_generator"] = _global_generator()
    from . import random

    namespace["random"] = random
