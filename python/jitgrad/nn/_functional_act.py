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
    """PyTorch's elu kernel: (exp(x * input_scale) - 1) * alpha * scale
    for x <= 0 (exp - 1 as PyTorch 1.13 computes it, not expm1: the same
    values, and exp's gradient keeps its relative precision far below 0),
    else x * scale; at 0 the gradient is the negative branch's, NaN takes
    the other.  The clamp keeps exp finite where the branch is unused."""
    _check_float(x, kernel)
    neg = x.clamp_max(0)
    if input_scale != 1.0:
        neg = neg * input_scale
    pos = x * scale if scale != 1.0 else x
    return _C.where(x <= 0, (neg.exp() - 1) * (alpha * scale), pos)


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


# ---- padding: reflect, replicate, circular (F.pad's other modes)

def _pad_index(size, before, after, mode):
    """The source position of each output position along one dim."""
    if mode == "reflect":
        idx = []
        for j in range(-before, size + after):
            j = -j if j < 0 else j
            idx.append(2 * (size - 1) - j if j >= size else j)
        return idx
    if mode == "replicate":
        return [min(max(j, 0), size - 1) for j in range(-before, size + after)]
    # circular: the input cropped by the negative amounts, then wrapped
    start, stop = max(-before, 0), size - max(-after, 0)
    n = stop - start
    return [start + (j % n) for j in range(-max(before, 0), n + max(after, 0))]


_NONCONST_DIMS = {2: (2, 3), 4: (3, 4), 6: (4, 5)}


def _pad_mode(input, pad, mode, value):
    """F.pad for mode 'reflect', 'replicate' or 'circular': PyTorch 1.13's
    checks in its order, then one index_select per padded dim (its
    gradient sums into the source positions)."""
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError("Padding length too large")
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    ndim, k = input.dim(), len(pad) // 2
    if input.dim() not in _NONCONST_DIMS.get(len(pad), ()):
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are "
                                  "supported for now")
    shape = list(input.shape)
    if mode == "circular":
        if len(pad) != 2 * (ndim - 2):
            raise RuntimeError(f"Invalid padding size, expected {2 * (ndim - 2)} but got "
                               f"{len(pad)}")
        for i in range(k):
            size, (lo, hi) = shape[ndim - k + i], pad[2 * (k - 1 - i):2 * (k - i)]
            if not (lo <= size and hi <= size):
                raise RuntimeError("Padding value causes wrapping around more than once.")
            if size + lo + hi < 0:
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
    else:
        _check_pad_shape(input, pad, mode, k)
    from .. import tensor
    out = input
    for i in range(k):
        d = ndim - 1 - i
        idx = _pad_index(shape[d], pad[2 * i], pad[2 * i + 1], mode)
        out = out.index_select(d, tensor(idx, dtype=_C.int64))
    return out


def _check_pad_shape(input, pad, mode, k):
    """reflect / replicate: the input's sizes and the amounts (PyTorch's
    checks and messages, which differ between its 1-D, 2-D and 3-D
    kernels)."""
    shape, ndim = list(input.shape), input.dim()
    batched = ndim == k + 2
    spatial = shape[1:] if batched else shape
    if any(s == 0 for s in spatial):
        if mode == "reflect" and k < 3:
            sizes = ",".join(str(s) for s in shape)
            typ = {_C.float32: "Float", _C.float64: "Double"}.get(input.dtype, "")
            raise RuntimeError(f"{k + 1}D or {k + 2}D (batch mode) tensor expected for input, "
                               f"but got: [ torch.{typ}Tensor{{{sizes}}} ]")
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 "
                           "batch size and other non-zero dimensions for input, but got: "
                           f"{shape}")
    kernel = ("reflection_pad%dd" if mode == "reflect" else "replication_pad%dd_cpu") % k
    if mode == "reflect" and k == 3:
        kernel += "_cpu"
    if mode == "reflect":
        for i in range(k):  # width first
            d = ndim - 1 - i
            lo, hi = pad[2 * i], pad[2 * i + 1]
            if not (lo < shape[d] and hi < shape[d]):
                where = ndim if k == 2 else shape
                raise RuntimeError(f"Argument #{4 + 2 * i}: Padding size should be less than the "
                                   "corresponding input dimension, but got: padding "
                                   f"({lo}, {hi}) at dimension {d} of input {where}")
    for i, name in enumerate("WHD"[:k]):
        d = ndim - 1 - i
        o = shape[d] + pad[2 * i] + pad[2 * i + 1]
        if o < 1:
            raise RuntimeError(f"input ({name}: {shape[d]}) is too small. Calculated output "
                               f"{name}: {o}")
    _check_float(input, kernel)


# ---- shuffles
__all__ += ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle"]

def pixel_shuffle(input, upscale_factor):
    """[*, C * r * r, H, W] -> [*, C, H * r, W * r]."""
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError("pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """[*, C, H * r, W * r] -> [*, C * r * r, H, W]."""
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError("pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {input.dim()} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r:
        raise RuntimeError("pixel_unshuffle expects height to be divisible by downscale_factor, "
                           f"but input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError("pixel_unshuffle expects width to be divisible by downscale_factor, "
                           f"but input.size(-1)={w} is not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """[N, g * k, *] -> channels reordered as [N, k, g, *] flattened."""
    groups = int(groups)
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(input.shape)}")
    if groups <= 0:
        raise RuntimeError("Number of groups to divide channels in must be positive. Value of "
                           f"groups:{groups}")
    shape = list(input.shape)
    c = shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    x = input.reshape(shape[0], groups, c // groups, *shape[2:]).transpose(1, 2)
    return x.reshape(*shape)


native_channel_shuffle = channel_shuffle


# ---- dropout variants
__all__ += ["dropout1d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_impl(input, p, training, inplace, feature, alpha):
    """PyTorch's _dropout_impl: a Bernoulli(1 - p) mask (one value per
    channel when feature), then input * mask / (1 - p), or for alpha
    dropout input * a * mask + b that keeps zero mean and unit variance
    under SELU (a dropped value becomes -alpha * a * (1 - p))."""
    if p == 0 or not training or input.numel() == 0:
        return input
    from .. import zeros
    if p == 1:
        z = zeros((), dtype=input.dtype)
        return input.mul_(z) if inplace else input * z
    shape = tuple(input.shape)
    if feature:
        if len(shape) < 2:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        shape = shape[:2] + (1,) * (len(shape) - 2)
    from .. import bernoulli, full
    mask = bernoulli(full(shape, 1.0 - p, dtype=input.dtype))
    if not alpha:
        mask = mask / (1.0 - p)
        return input.mul_(mask) if inplace else input * mask
    a_ = 1.7580993408473766
    a = 1.0 / math.sqrt((a_ * a_ * p + 1) * (1 - p))
    b = (mask - 1) * (a_ * a) + a_ * a * p
    mask = mask * a
    return input.mul_(mask).add_(b) if inplace else input * mask + b


def _feature_dropout_nd(input, p, training, inplace, batched):
    x = input if batched else input.unsqueeze(0)
    out = _dropout_impl(x, p, training, False, True, False)
    out = out if batched else out.squeeze(0)
    return input.copy_(out) if inplace and out is not input else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of [N, C, L] (or [C, L]) input, scaling the
    rest by 1 / (1 - p)."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    return _feature_dropout_nd(input, p, training, inplace, input.dim() == 3)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of [N, C, D, H, W] (or [C, D, H, W]) input,
    scaling the rest by 1 / (1 - p)."""
    _check_p(p)
    d = input.dim()
    if d not in (4, 5):
        warnings.warn(f"dropout3d: Received a {d}-D input to dropout3d, which is deprecated and "
                      "will result in an error in a future release. To retain the behavior and "
                      "silence this warning, please use dropout instead. Note that dropout3d "
                      "exists to provide channel-wise dropout on inputs with 3 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D "
                      "or 5D inputs).")
    return _feature_dropout_nd(input, p, training, inplace, d == 5)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    _check_p(p)
    return _dropout_impl(input, p, training, inplace, True, True)


# ---- adaptive max pooling
__all__ += ["adaptive_max_pool1d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d",
            "adaptive_max_pool2d_with_indices"]

def _adaptive_windows(n_in, n_out):
    """(start, end) of each output position's window (PyTorch's
    start_index / end_index)."""
    return [((i * n_in) // n_out, -((-(i + 1) * n_in) // n_out)) for i in range(n_out)]


def _adaptive_max_table(h, w, oh, ow):
    """For each output cell, the flat (h * W + w) input positions of its
    window in PyTorch's scan order, padded to one length by repeating the
    window's first position (a repeat never wins a tie: the scan keeps the
    first maximum)."""
    rows, cols = _adaptive_windows(h, oh), _adaptive_windows(w, ow)
    k = max([e - s for s, e in rows] + [1]) * max([e - s for s, e in cols] + [1])
    table = []
    for hs, he in rows:
        for ws, we in cols:
            cell = [ih * w + iw for ih in range(hs, he) for iw in range(ws, we)]
            table.extend(cell + [cell[0]] * (k - len(cell)))
    return table, k


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """The maximum of each adaptive window (rows floor(i * H / oh) to
    ceil((i + 1) * H / oh), columns alike) and its flat position h * W + w;
    the gradient goes to that position."""
    sizes = list(input.shape)
    if isinstance(output_size, int):
        out = [output_size, output_size]
    else:
        out = list(output_size)
        if len(out) > len(sizes) - 1:
            raise ValueError(f"Input dimension should be at least {len(out) + 1}")
        out = [v if v is not None else sizes[len(sizes) - len(out) + i]
               for i, v in enumerate(out)]
        if len(out) != 2:
            raise RuntimeError("adaptive_max_pool2d(): internal error: output_size.size() must "
                               "be 2")
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {sizes}")
    for d in range(1, input.dim()):
        if sizes[d] == 0:
            raise RuntimeError("adaptive_max_pool2d(): Expected input to have non-zero size for "
                               f"non-batch dimensions, but input has sizes {sizes} with "
                               f"dimension {d} being empty")
    oh, ow = int(out[0]), int(out[1])
    if oh < 0 or ow < 0:
        neg = oh if oh < 0 else ow
        raise RuntimeError(f"Trying to create tensor with negative dimension {neg}: "
                           f"{sizes[:-2] + [oh, ow]}")
    _check_float(input, "adaptive_max_pool2d")
    from .. import tensor
    lead, (h, w) = sizes[:-2], sizes[-2:]
    table, k = _adaptive_max_table(h, w, oh, ow)
    windows = input.reshape(*lead, h * w).index_select(-1, tensor(table, dtype=_C.int64))
    windows = windows.reshape(*lead, oh, ow, k)
    from .. import no_grad
    with no_grad():
        # the first maximum, or where a window holds NaN its last NaN (the
        # scan's val > max || isnan(val))
        win = windows.detach()
        pos = win.max(-1)[1]
        isnan = win.isnan()
        last_nan = (k - 1) - isnan.flip(-1).to(_C.int64).argmax(-1)
        pos = _C.where(isnan.any(-1), last_nan, pos)
    values = windows.gather(-1, pos.unsqueeze(-1)).squeeze(-1)
    if not return_indices:
        return values, None
    flat = tensor(table, dtype=_C.int64).reshape(oh, ow, k).expand(*lead, oh, ow, k)
    return values, flat.gather(-1, pos.unsqueeze(-1)).squeeze(-1)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    values, indices = adaptive_max_pool2d_with_indices(input, output_size, return_indices)
    return (values, indices) if return_indices else values


def _adaptive_max_pool1d_input(input, output_size):
    if input.dim() not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional tensor "
                           "for argument #1 'self' (while checking arguments for "
                           "adaptive_max_pool1d)")
    if not isinstance(output_size, int):
        v = list(output_size)
        if len(v) != 1:
            raise RuntimeError("adaptive_max_pool1d() argument 'output_size' should contain one "
                               f"int (got {len(v)})")
        output_size = v[0]
    return input.unsqueeze(-2), int(output_size)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """adaptive_max_pool2d over a unit height: indices are positions along L."""
    x, n = _adaptive_max_pool1d_input(input, output_size)
    values, indices = adaptive_max_pool2d_with_indices(x, (1, n), True)
    return values.squeeze(-2), indices.squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    if return_indices:
        return adaptive_max_pool1d_with_indices(input, output_size)
    x, n = _adaptive_max_pool1d_input(input, output_size)
    return adaptive_max_pool2d(x, (1, n)).squeeze(-2)


# ---- local response normalization
__all__ += ["local_response_norm"]

def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of x^2 over `size` neighbouring channels,
    zero-padded)^beta, as PyTorch computes it (an average pool over the
    padded squares)."""
    from .functional import avg_pool2d, pad
    dim = input.dim()
    if dim < 3:
        raise ValueError("Expected 3D or higher dimensionality" + " " * 26 +
                         f"input (got {dim} dimensions)")
    if input.numel() == 0:
        return input
    sizes = list(input.shape)
    div = (input * input).reshape(sizes[0], 1, sizes[1], -1)
    div = pad(div, (0, 0, size // 2, (size - 1) // 2))
    div = avg_pool2d(div, (size, 1), stride=1).reshape(*sizes)
    div = (div * alpha + k).pow(beta)
    return input / div


# ---- unfold / fold (im2col / col2im)
__all__ += ["unfold", "fold"]


def _pair2(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(v)}")
    return tuple(int(e) for e in v)


def _check_block_args(k, d, p, s, fold):
    checks = [(k, "kernel size should be greater than zero, but got kernel_height: {} "
                  "kernel_width: {}", lambda v: v > 0),
              (d, "dilation should be greater than zero, but got dilation_height: {} "
                  "dilation_width: {}", lambda v: v > 0),
              (p, "padding should be non-negative, but got pad_height: {} pad_width: {}",
               lambda v: v >= 0),
              (s, "stride should be greater than zero, but got stride_height: {} "
                  "stride_width: {}", lambda v: v > 0)]
    if fold:  # col2im checks the stride second
        checks = [checks[0], checks[3], checks[1], checks[2]]
    for v, msg, ok in checks:
        if not (ok(v[0]) and ok(v[1])):
            raise RuntimeError(msg.format(*v))


def _blocks(size, k, d, p, s):
    """The number of block positions along a dim (floor division, as
    PyTorch's div_rtn)."""
    return (size + 2 * p - (d * (k - 1) + 1)) // s + 1


def _block_index(hp, wp, oh, ow, k, d, s):
    """Flat positions in the padded [hp, wp] plane of each kernel offset's
    (rows) block positions (columns), in im2col's order."""
    return [(i * s[0] + ki * d[0]) * wp + (j * s[1] + kj * d[1])
            for ki in range(k[0]) for kj in range(k[1]) for i in range(oh) for j in range(ow)]


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: [N, C, H, W] (or [C, H, W]) -> [N, C * kh * kw, L], each
    column one block of the zero-padded input, as one index_select (whose
    gradient is col2im)."""
    k, d = _pair2(kernel_size, "kernel_size"), _pair2(dilation, "dilation")
    p, s = _pair2(padding, "padding"), _pair2(stride, "stride")
    _check_block_args(k, d, p, s, False)
    ndim, sizes = input.dim(), list(input.shape)
    if ndim < 3:
        bad = 1 if ndim == 1 else 2
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {bad})")
    if ndim not in (3, 4) or 0 in sizes[1:] or (ndim == 3 and sizes[0] == 0):
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and "
                           f"other non-zero dimensions for input, but got: {sizes}")
    h, w = sizes[-2:]
    oh, ow = _blocks(h, k[0], d[0], p[0], s[0]), _blocks(w, k[1], d[1], p[1], s[1])
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input with spatial size ({h}, {h}), kernel_size=({k[0]}, "
                           f"{k[1]}), dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), "
                           f"calculated shape of the array of sliding blocks as ({oh}, {ow}), "
                           "but its components must be at least one.")
    _check_float(input, "im2col_out_cpu")
    from .. import tensor
    from .functional import pad
    x = input if ndim == 4 else input.unsqueeze(0)
    if p != (0, 0):
        x = pad(x, (p[1], p[1], p[0], p[0]))
    n, c, hp, wp = x.shape
    idx = tensor(_block_index(hp, wp, oh, ow, k, d, s), dtype=_C.int64)
    out = x.reshape(n, c, hp * wp).index_select(2, idx).reshape(n, c * k[0] * k[1], oh * ow)
    return out if ndim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: [N, C * kh * kw, L] (or [C * kh * kw, L]) -> [N, C, H, W],
    overlapping blocks summed (index_add in im2col's order, then the
    padding cropped); the gradient is im2col."""
    o = _pair2(output_size, "output_size")
    k, d = _pair2(kernel_size, "kernel_size"), _pair2(dilation, "dilation")
    p, s = _pair2(padding, "padding"), _pair2(stride, "stride")
    _check_block_args(k, d, p, s, True)
    ndim, sizes = input.dim(), list(input.shape)
    if not ((ndim == 2 and 0 not in sizes) or (ndim == 3 and 0 not in sizes[1:])):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch "
                           f"size and non-zero dimensions for input, but got: {sizes}")
    planes, length = sizes[-2:]
    if planes % (k[0] * k[1]):
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={planes} and "
                           f"kernel_size=({k[0]}, {k[1]}).")
    bh, bw = _blocks(o[0], k[0], d[0], p[0], s[0]), _blocks(o[1], k[1], d[1], p[1], s[1])
    desc = (f"Given output_size=({o[0]}, {o[1]}), kernel_size=({k[0]}, {k[1]}), "
            f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), ")
    if length != bh * bw:
        raise RuntimeError(desc + "expected size of input's dimension 2 to match the calculated "
                           f"number of sliding blocks {bh} * {bw} = {bh * bw}, but got "
                           f"input.size(2)={length}.")
    if bh < 1 or bw < 1:
        raise RuntimeError(desc + f"calculated shape of the array of sliding blocks as ({bh}, "
                           f"{bw}), which is too small (non-positive)")
    _check_float(input, "col2im_out_cpu")
    from .. import tensor, zeros
    x = input if ndim == 3 else input.unsqueeze(0)
    n = x.size(0)
    c = planes // (k[0] * k[1])
    hp, wp = o[0] + 2 * p[0], o[1] + 2 * p[1]
    idx = tensor(_block_index(hp, wp, bh, bw, k, d, s), dtype=_C.int64)
    out = zeros(n, c, hp * wp, dtype=input.dtype).index_add(2, idx, x.reshape(n, c, -1))
    out = out.reshape(n, c, hp, wp)
    if p != (0, 0):
        out = out[:, :, p[0]:p[0] + o[0], p[1]:p[1] + o[1]]
    return out if ndim == 3 else out.squeeze(0)
