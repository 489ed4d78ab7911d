"""PyTorch's alias spellings and small compositions: greater / less /
not_equal / multiply / subtract / negative / absolute, swapaxes / swapdims,
movedim / moveaxis, ravel, broadcast_to / broadcast_tensors /
broadcast_shapes, isclose / allclose / equal, tile, unflatten, atleast_Nd,
count_nonzero, signbit, xlogy, logit, nansum, nanmean.

Each is built from existing Tensor methods, so autograd and the compiler see
the ops they are made of; this module adds PyTorch's argument handling and
error messages.
"""
import builtins as _b
import numbers as _numbers

import numpy as _np

from . import _C
from ._C import Tensor

# out-of-place alias -> the method it names
_ALIASES = {"greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
            "not_equal": "ne", "multiply": "mul", "subtract": "sub", "negative": "neg",
            "absolute": "abs", "swapaxes": "transpose", "swapdims": "transpose"}


def _tensor_arg(x, fn, arg="input", pos=1):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _type_name(dtype):
    from ._inplace import _type_name as name

    return name(dtype)


def _wrap_dim(d, ndim):
    n = _b.max(ndim, 1)
    if d < -n or d >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d + n if d < 0 else d


def _dim_list(d):
    return [d] if isinstance(d, _numbers.Integral) else list(d)


def movedim(input, source, destination):
    """The dims in source moved to the positions in destination, the others
    keeping their order."""
    _tensor_arg(input, "movedim")
    src, dst = _dim_list(source), _dim_list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    n = input.dim()
    ns = [_wrap_dim(d, n) for d in src]
    nd = [_wrap_dim(d, n) for d in dst]
    for name, dims, given in (("source", ns, src), ("destination", nd, dst)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({given})")
    if n == 0:
        return input.view(())  # a scalar's dim 0 wraps to itself
    order = [-1] * n
    for s, d in zip(ns, nd):
        order[d] = s
    rest = iter(i for i in range(n) if i not in ns)
    order = [o if o != -1 else next(rest) for o in order]
    return input.permute(*order)


def ravel(input):
    _tensor_arg(input, "ravel")
    return input.reshape(-1)


def broadcast_to(input, size):
    _tensor_arg(input, "broadcast_to")
    return input.expand(*size)


def broadcast_shapes(*shapes):
    """The shape the shapes (int or sequences of ints) broadcast to."""
    out = []
    for shape in shapes:
        shape = (shape,) if isinstance(shape, _numbers.Integral) else tuple(shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for i, s in enumerate(shape):
            j = len(out) - len(shape) + i
            if s < 0:
                raise RuntimeError("Trying to create tensor with negative dimension "
                                   f"{s}: {list(shape)}")
            if out[j] == 1:
                out[j] = s
            elif s != 1 and s != out[j]:
                raise RuntimeError("Shape mismatch: objects cannot be broadcast to a single "
                                   "shape")
    return tuple(out)


def broadcast_tensors(*tensors):
    """Each tensor expanded (a view) to the common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    for t in tensors:
        _tensor_arg(t, "broadcast_tensors", "tensors", 1)
    out = []
    for t in tensors:
        shape = tuple(t.shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for k, s in enumerate(shape):
            j = len(out) - len(shape) + k
            if out[j] == 1:
                out[j] = s
            elif s != 1 and s != out[j]:
                raise RuntimeError(f"The size of tensor a ({out[j]}) must match the size of "
                                   f"tensor b ({s}) at non-singleton dimension {j}")
    return tuple(t.expand(*out) for t in tensors)


def _same_dtype(a, b):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{_type_name(a.dtype)} did not match {_type_name(b.dtype)}")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other| elementwise (equal values,
    infinities included, are close; NaNs only with equal_nan)."""
    _tensor_arg(input, "isclose")
    _tensor_arg(other, "isclose", "other", 2)
    _same_dtype(input, other)
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    with _no_grad():
        close = input == other
        if equal_nan and input.is_floating_point():
            close = close | (input.isnan() & other.isnan())
        if input.dtype == _C.bool or (rtol == 0 and atol == 0):
            return close
        a, b = input, other
        if not input.is_floating_point():
            a, b = input.to(_C.float32), other.to(_C.float32)
        diff = (a - b).abs()
        bound = atol + rtol * b.abs()
        # finite differences only: inf - inf is nan, inf vs finite never close
        finite = diff.isfinite()
        return close | (finite & (diff <= bound))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element is isclose."""
    return _b.bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other):
    """True when the two have the same shape and the same values."""
    _tensor_arg(input, "equal")
    _tensor_arg(other, "equal", "other", 2)
    if tuple(input.shape) != tuple(other.shape):
        return False
    with _no_grad():
        return _b.bool((input == other).all().item())


def tile(input, dims):
    """repeat with dims padded by leading 1s to input's dimensionality."""
    _tensor_arg(input, "tile")
    if not isinstance(dims, (tuple, list)):
        raise TypeError("tile(): argument 'dims' (position 2) must be tuple of ints, not "
                        f"{type(dims).__name__}")
    dims = tuple(dims)
    dims = (1,) * (input.dim() - len(dims)) + dims
    return input.repeat(*dims)


def _tile_method(self, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return tile(self, tuple(dims))


def unflatten(input, dim, sizes):
    """dim split into sizes (one of them may be -1)."""
    _tensor_arg(input, "unflatten")
    sizes = list(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    d = _wrap_dim(dim, input.dim())
    if input.dim() == 0:
        raise RuntimeError("unflatten: Dimension specified as 0 but tensor has no dimensions")
    if sizes.count(-1) > 1:
        raise RuntimeError("unflatten got an unexpected error:\nonly one dimension can be "
                           "inferred")
    n = input.shape[d]
    known = 1
    for s in sizes:
        if s != -1:
            known *= s
    if (-1 not in sizes and known != n) or (-1 in sizes and (known == 0 or n % known)):
        raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size "
                           f"of dim {dim} ({n}) in the input tensor")
    shape = list(input.shape)
    return input.reshape(*(shape[:d] + sizes + shape[d + 1:]))


def _atleast(fn, n, tensors):
    if len(tensors) == 1:
        tensors = tensors[0]
    if isinstance(tensors, (tuple, list)):
        return tuple(_atleast(fn, n, (t,)) for t in tensors)
    t = tensors
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}() received an invalid combination of arguments - got "
                        f"({type(t).__name__}), but expected one of:\n * (Tensor input)\n"
                        " * (tuple of Tensors tensors)")
    d = t.dim()
    if d >= n:
        return t
    if d == 0:
        return t.reshape(*([1] * n))
    if n == 2:
        return t.unsqueeze(0)
    # n == 3: a vector becomes (1, N, 1), a matrix (M, N, 1)
    return t.unsqueeze(0).unsqueeze(-1) if d == 1 else t.unsqueeze(-1)


def atleast_1d(*tensors):
    return _atleast("atleast_1d", 1, tensors)


def atleast_2d(*tensors):
    return _atleast("atleast_2d", 2, tensors)


def atleast_3d(*tensors):
    return _atleast("atleast_3d", 3, tensors)


def count_nonzero(input, dim=None):
    """The number of nonzero elements (int64), over dim (an int or a tuple)
    or all of them."""
    _tensor_arg(input, "count_nonzero")
    nz = (input != 0).to(_C.int64)
    return nz.sum() if dim is None else nz.sum(dim=dim)


def signbit(input):
    """True where the sign bit is set: negative numbers, -0.0, -inf and NaNs
    with the sign bit (read from the bits, which no comparison sees)."""
    _tensor_arg(input, "signbit")
    if not input.is_floating_point():
        return input < 0 if input.dtype != _C.bool else input != input
    return _C.from_numpy(_np.ascontiguousarray(_np.signbit(input.detach().numpy())))


def _operand(x, like, fn, arg, pos):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _numbers.Number) and not isinstance(x, _b.bool):
        dtype = like.dtype if like.is_floating_point() else _C.float32
        return _C.tensor(x, dtype=dtype)
    raise TypeError(f"{fn}(): argument '{arg}' (position {pos}) must be Tensor, not "
                    f"{type(x).__name__}")


def xlogy(input, other):
    """input * log(other), 0 where input is 0 and NaN where other is NaN;
    integer operands compute in float32."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("xlogy(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    like = input if isinstance(input, Tensor) else other
    x = _operand(input, like, "xlogy", "self", 1)
    y = _operand(other, like, "xlogy", "other", 2)
    if not x.is_floating_point() and not y.is_floating_point():
        x, y = x.to(_C.float32), y.to(_C.float32)
    prod = x * y.log()
    # x == 0 with a finite positive y is already 0, and keeps the gradients
    # PyTorch gives (log(y) for x, x / y for y); only 0 * log(0 or inf or y < 0)
    # (a NaN) is replaced
    degenerate = (x == 0) & ((y > 0) & y.isfinite()).logical_not()
    out = _C.where(degenerate, _C.zeros_like(prod), prod)
    return _C.where(y.isnan(), y.expand_as(prod).to(prod.dtype), out)


def logit(input, eps=None):
    """log(p / (1 - p)), p = input clamped to [eps, 1 - eps] when eps is given;
    integer input computes in float32."""
    _tensor_arg(input, "logit")
    z = input if input.is_floating_point() else input.to(_C.float32)
    if eps is not None:
        z = z.clamp(eps, 1 - eps)
    return (z / (1 - z)).log()


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """sum with NaNs counted as zero."""
    _tensor_arg(input, "nansum")
    x = input
    if x.is_floating_point():
        x = _C.where(x.isnan(), _C.zeros_like(x), x)
    kwargs = {} if dtype is None else {"dtype": dtype}
    if dim is None:
        if keepdim:
            return x.sum(dim=tuple(range(x.dim())), keepdim=True, **kwargs)
        return x.sum(**kwargs)
    return x.sum(dim=dim, keepdim=keepdim, **kwargs)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """mean over the elements that are not NaN (NaN where all are)."""
    _tensor_arg(input, "nanmean")
    if not input.is_floating_point():
        raise RuntimeError("nanmean(): expected input to have floating point dtype but got "
                           f"{_type_name(input.dtype)}")
    count = nansum(input.isnan().logical_not().to(input.dtype if dtype is None else dtype), dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def _no_grad():
    from . import no_grad

    return no_grad()


def _method(f):
    def m(self, *args, **kwargs):
        return f(self, *args, **kwargs)

    m.__name__ = f.__name__
    m.__doc__ = f.__doc__
    return m


FUNCTIONS = (movedim, ravel, broadcast_to, broadcast_shapes, broadcast_tensors, isclose,
             allclose, equal, tile, unflatten, atleast_1d, atleast_2d, atleast_3d,
             count_nonzero, signbit, xlogy, logit, nansum, nanmean)


def install(T, namespace):
    """The Tensor methods and the torch.* functions."""
    for alias, name in _ALIASES.items():
        setattr(T, alias, getattr(T, name))
        namespace[alias] = namespace.get(name) or _method_fn(name)
    namespace["moveaxis"] = movedim
    for f in FUNCTIONS:
        namespace[f.__name__] = f
    for f in (movedim, ravel, isclose, allclose, equal, count_nonzero, signbit, xlogy, logit,
              nansum, nanmean):
        setattr(T, f.__name__, _method(f))
    T.moveaxis = T.movedim
    T.broadcast_to = lambda self, size: broadcast_to(self, size)
    T.tile = _tile_method
    T.unflatten = lambda self, dim, sizes: unflatten(self, dim, sizes)


def _method_fn(name):
    def fn(input, *args, **kwargs):
        _tensor_arg(input, name)
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    return fn
