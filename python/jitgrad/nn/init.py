"""nn.init: PyTorch's initialisers with PyTorch's defaults.  The numbers come
from jitgrad's generator (manual_seed), not PyTorch's."""
import math
import warnings

from .. import _C
from ._util import no_grad


def calculate_gain(nonlinearity, param=None):
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    dimensions = tensor.dim()
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    num_input_fmaps = tensor.size(1)
    num_output_fmaps = tensor.size(0)
    receptive_field_size = 1
    for s in tuple(tensor.shape)[2:]:
        receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill_from(tensor, values):
    with no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0):
    """Fills tensor in place with U(a, b)."""
    return _fill_from(tensor, _C.rand_like(tensor) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    """Fills tensor in place with N(mean, std^2)."""
    return _fill_from(tensor, _C.randn_like(tensor) * std + mean)


def constant_(tensor, val):
    return _fill_from(tensor, _C.full(tuple(tensor.shape), float(val), dtype=tensor.dtype))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return normal_(tensor, 0.0, gain / math.sqrt(fan))


def _erfinv(y):
    """erf^-1 of a float64 numpy array: Giles' single-precision
    approximation refined by two Newton steps on jitgrad's erf."""
    import numpy as np

    w = -np.log((1.0 - y) * (1.0 + y))
    lo = w - 2.5
    p_lo = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p_lo = c + p_lo * lo
    hi = np.sqrt(np.maximum(w, 0.0)) - 3.0
    p_hi = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p_hi = c + p_hi * hi
    x = np.where(w < 5.0, p_lo, p_hi) * y
    finite = np.isfinite(x)
    for _ in range(2):
        xs = np.where(finite, x, 0.0)
        err = np.array(_C.from_numpy(np.ascontiguousarray(xs)).erf().tolist()).reshape(xs.shape) - y
        x = np.where(finite, xs - err / (2.0 / math.sqrt(math.pi) * np.exp(-xs * xs)), x)
    return x


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Fills tensor in place with N(mean, std^2) samples truncated to
    [a, b] (PyTorch's inverse-CDF method: uniform in [cdf(a), cdf(b)],
    mapped back through erfinv, then clamped)."""
    import numpy as np

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    lo = norm_cdf((a - mean) / std)
    hi = norm_cdf((b - mean) / std)
    u = np.array(_C.rand(tuple(tensor.shape), dtype=_C.float64).tolist(), dtype=np.float64)
    u = u.reshape(tuple(tensor.shape)) * (2 * hi - 2 * lo) + (2 * lo - 1)
    v = _erfinv(u) * (std * math.sqrt(2.0)) + mean
    v = np.clip(v, a, b)
    return _fill_from(tensor, _C.from_numpy(np.ascontiguousarray(v)).to(tensor.dtype))


def eye_(tensor):
    """Fills a 2-D tensor with the identity matrix (ones on the main
    diagonal of a rectangular one)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from .. import eye

    return _fill_from(tensor, eye(*tuple(tensor.shape), dtype=tensor.dtype))


def dirac_(tensor, groups=1):
    """Fills a 3-, 4- or 5-D convolution weight with the Dirac delta: each
    group's output channel d passes input channel d at the kernel's
    centre."""
    import numpy as np

    dimensions = tensor.dim()
    if dimensions not in [3, 4, 5]:
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = sizes[0] // groups
    min_dim = min(out_chans_per_grp, sizes[1])
    w = np.zeros(sizes)
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            w[(g * out_chans_per_grp + d, d) + centre] = 1
    return _fill_from(tensor, _C.from_numpy(w).to(tensor.dtype))


def orthogonal_(tensor, gain=1):
    """Fills tensor (trailing dims flattened) with a (semi-)orthogonal
    matrix: the Q of a QR factorisation of a normal matrix (numpy's QR of
    jitgrad's normals), signs fixed by diag(R) as PyTorch does, times
    gain."""
    import numpy as np

    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    flattened = np.array(_C.randn((rows, cols), dtype=_C.float64).tolist(), dtype=np.float64)
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    q = np.ascontiguousarray(q * gain).reshape(tuple(tensor.shape))
    return _fill_from(tensor, _C.from_numpy(q).to(tensor.dtype))


def sparse_(tensor, sparsity, std=0.01):
    """Fills a 2-D tensor with N(0, std^2) samples, then zeroes
    ceil(sparsity * rows) randomly chosen elements of each column."""
    import numpy as np

    from .. import randperm

    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tuple(tensor.shape)
    num_zeros = int(math.ceil(sparsity * rows))
    values = _C.randn((rows, cols), dtype=tensor.dtype) * std
    keep = np.ones((rows, cols), dtype=bool)
    for col_idx in range(cols):
        keep[randperm(rows).tolist()[:num_zeros], col_idx] = False
    return _fill_from(tensor, values.masked_fill(_C.from_numpy(~keep), 0.0))


def _make_deprecate(meth):
    """The old spelling without the trailing underscore: warns, then
    calls meth (PyTorch keeps these for backward compatibility)."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"nn.init.{old_name} is now deprecated in favor of nn.init.{new_name}.",
                      stacklevel=2)
        return meth(*args, **kwargs)

    deprecated_init.__doc__ = f"{old_name}(...): deprecated, see {new_name}."
    deprecated_init.__name__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
