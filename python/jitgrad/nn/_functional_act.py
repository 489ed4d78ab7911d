"""More of torch.nn.functional, composed of library ops so that autograd and
the compiler need nothing new: the remaining activations and their in-place
forms, F.pad's reflect / replicate / circular modes (index_select with
index lists computed here), pixel and channel shuffles, the dropout
variants, adaptive max pooling and local response normalization.  Values,
gradients, argument checks and messages follow PyTorch 1.13."""
import math
import warnings

from .. import _C

__all__ = []

_FLOATS = (_C.float32, _C.float64)


def _dtype_name(dtype):
    return {_C.float32: "Float", _C.float64: "Double", _C.int64: "Long", _C.int32: "Int",
            _C.bool: "Bool"}.get(dtype, str(dtype))


def _check_float(input, kernel):
    if input.dtype not in _FLOATS:
        raise RuntimeError(f"\"{kernel}\" not implemented for '{_dtype_name(input.dtype)}'")


def _write(input, inplace, fn):
    """fn(input), or for inplace=True its value written into input: computed
    from a clone, so the saved operands are not the overwritten ones (see
    _inplace.py)."""
    if inplace:
        return input.copy_(fn(input.clone()))
    return fn(input)


def _cfmt(v):
    """A double as C++'s ostream prints it (PyTorch's messages)."""
    return format(float(v), "g")


# ---- activations
__all__ += ["threshold", "threshold_", "relu_", "leaky_relu_", "elu_", "hardtanh_", "selu", "selu_",
            "celu", "celu_", "rrelu", "rrelu_", "glu", "softshrink", "hardshrink", "tanhshrink"]

def _threshold(input, th, value, inplace):
    """value where input <= th, else input (NaN is kept, and passes its
    gradient, as PyTorch's x <= threshold ? value : x)."""
    return _write(input, inplace, lambda x: _C.where(x <= th, value, x))


def threshold(input, threshold, value, inplace=False):
    return _threshold(input, threshold, value, inplace)


def threshold_(input, threshold, value):
    return _threshold(input, threshold, value, True)


def relu_(input):
    return input.relu_()


def leaky_relu_(input, negative_slope=0.01):
    from .functional import leaky_relu
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input, alpha=1.0):
    from .functional import elu
    return elu(input, alpha, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    from .functional import hardtanh
    return hardtanh(input, min_val, max_val, inplace=True)


def _elu(x, alpha, scale, input_scale, kernel="elu_cpu"):
    """PyTorch's elu kernel: expm1(x * input_scale) * alpha * scale for
    x <= 0, else x * scale (at 0 the gradient is that of the negative
    branch, alpha * scale * input_scale; NaN takes the other)."""
    _check_float(x, kernel)
    neg = x.clamp_max(0)
    if input_scale != 1.0:
        neg = neg * input_scale
    pos = x * scale if scale != 1.0 else x
    return _C.where(x <= 0, neg.expm1() * (alpha * scale), pos)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    return _write(input, inplace, lambda x: _elu(x, _SELU_ALPHA, _SELU_SCALE, 1.0))


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _write(input, inplace, lambda x: _elu(x, alpha, 1.0, 1.0 / alpha))


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky ReLU.  Training: each x <= 0 is multiplied by its
    own slope drawn uniformly from [lower, upper) (the gradient is that
    slope), x > 0 passes; otherwise leaky_relu with slope
    (lower + upper) / 2."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    _check_float(input, "rrelu_with_noise_out_cpu")
    if not training:
        from .functional import leaky_relu
        return leaky_relu(input, (lower + upper) / 2, inplace)

    def fn(x):
        from .. import no_grad
        with no_grad():
            r = x.detach().new_zeros(tuple(x.shape)).uniform_(lower, upper)
            noise = _C.where(x.detach() <= 0, r, 1.0)
        return x * noise

    return _write(input, inplace, fn)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)


def _wrap_dim(dim, n):
    lo, hi = -max(n, 1), max(n, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but "
                         f"got {dim})")
    return dim + n if dim < 0 else dim


def glu(input, dim=-1):
    """a * sigmoid(b), a and b the halves of input along dim."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, input.dim())
    n = input.size(d)
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    _check_float(input, "glu_cpu")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, else 0 (where the
    gradient is 0): NaN gives 0 as PyTorch's kernel (whose gradient there
    is 1, this one's 0)."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be "
                           f"{_cfmt(lambd)}.")
    _check_float(input, "softshrink_cpu")
    outside = (input > lambd).logical_or(input < -lambd)
    # x - sign(x) * lambd is x - lambd and x + lambd exactly
    return _C.where(outside, input - input.detach().sign() * lambd, 0.0)


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0 (and there the gradient is 0)."""
    _check_float(input, "hardshrink_cpu")
    inside = (input >= -lambd).logical_and(input <= lambd)
    return _C.where(inside, 0.0, input)


def tanhshrink(input):
    return input - input.tanh()

