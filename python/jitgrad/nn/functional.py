"""jitgrad.nn.functional: each op is one call into the C library or a short
composition of library ops (docs/python.md lists which)."""

import functools
import math
import struct
from fractions import Fraction

from .. import _C


def relu(input, inplace=False):
    return input.relu_() if inplace else input.relu()


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("jitgrad: softmax() needs dim (PyTorch's implicit choice is deprecated)")
    if dtype is not None:
        input = input.to(dtype)
    return input.softmax(dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("jitgrad: log_softmax() needs dim (PyTorch's implicit choice is "
                        "deprecated)")
    if dtype is not None:
        input = input.to(dtype)
    return input.log_softmax(dim)


def linear(input, weight, bias=None):
    out = input.matmul(weight.t())
    if bias is not None:
        out = out + bias
    return out


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_same_size(input, target, name):
    if tuple(input.shape) != tuple(target.shape):
        import warnings
        warnings.warn(f"Using a target size ({tuple(target.shape)}) that is different to the "
                      f"input size ({tuple(input.shape)}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_same_size(input, target, "mse_loss")
    return _C._regression_loss(0, input, target, reduction, 0.0)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_same_size(input, target, "l1_loss")
    return _C._regression_loss(1, input, target, reduction, 0.0)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_same_size(input, target, "smooth_l1_loss")
    return _C._regression_loss(2, input, target, reduction, float(beta))


def _class_dim_last(input, target):
    """input [N, C, d1, ...] -> [N*d1*..., C]; target alike -> [N*d1*...]."""
    if input.dim() == 1:
        return input.unsqueeze(0), target.unsqueeze(0)
    if input.dim() > 2:
        c = input.size(1)
        perm = [0] + list(range(2, input.dim())) + [1]
        return input.permute(*perm).reshape(-1, c), target.reshape(-1)
    return input, target


def _loss_nd(input, target, weight, ignore_index, reduction, label_smoothing, from_logits):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if input.dim() >= 2 and target.dim() > 0 and input.size(0) != target.size(0):
        raise ValueError(f"Expected input batch_size ({input.size(0)}) to match target "
                         f"batch_size ({target.size(0)}).")
    out_shape = tuple(target.shape)
    x, t = _class_dim_last(input, target)
    loss = _C._nll_loss(x, t, weight, reduction, int(ignore_index), float(label_smoothing),
                        from_logits)
    return loss.reshape(*out_shape) if reduction == "none" else loss


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _loss_nd(input, target, weight, ignore_index, reduction, 0.0, False)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) == tuple(input.shape):  # class probabilities, as PyTorch decides
        return _C._cross_entropy_probs(input, target, weight, reduction, ignore_index,
                                       float(label_smoothing))
    return _loss_nd(input, target, weight, ignore_index, reduction, label_smoothing, True)


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def silu(input, inplace=False):
    if inplace:
        # silu saves its input: compute from a clone, then write (see _inplace.py)
        return input.copy_(_C._silu(input.clone()))
    return _C._silu(input)


def gelu(input, approximate="none"):
    return _C._gelu(input, approximate=approximate)


# ---- activations: compositions of library ops with PyTorch's values and
# gradients (the boundaries included: hardtanh and hardsigmoid pass no
# gradient at their corners, clamp would).  An inplace=True form computes
# from a clone and writes the result with copy_ (see _inplace.py).
def _write(input, inplace, fn):
    if inplace:
        return input.copy_(fn(input.clone()))
    return fn(input)


def _softplus(x, beta, threshold):
    # exp never sees a value above threshold, so its gradient stays finite
    # where the other branch is taken
    xb = x * beta if beta != 1 else x
    return _C.where(xb > threshold, x, xb.clamp_max(threshold).exp().log1p() / beta)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _write(input, inplace, lambda x: _C._leaky_relu(x, float(negative_slope)))


def elu(input, alpha=1.0, inplace=False):
    return _write(input, inplace,
                  lambda x: _C.where(x <= 0, (x.clamp_max(0).exp() - 1) * alpha, x))


def softplus(input, beta=1, threshold=20):
    return _softplus(input, beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _write(input, inplace, lambda x: _C._hardtanh(x, float(min_val), float(max_val)))


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def mish(input, inplace=False):
    return _write(input, inplace, lambda x: x * _softplus(x, 1, 20).tanh())


def hardswish(input, inplace=False):
    return _write(input, inplace, _C._hardswish)


def hardsigmoid(input, inplace=False):
    return _write(input, inplace, _C._hardsigmoid)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if inplace:
        return input.copy_(_C._dropout(input, float(p), True))
    return _C._dropout(input, float(p), True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    n = len(normalized_shape)
    if n == 0 or tuple(input.shape)[-n:] != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with "
                           f"shape [*, {', '.join(str(s) for s in normalized_shape)}], but got "
                           f"input of size{list(input.shape)}")
    return _C._layer_norm(input, n, weight, bias, float(eps))


def _verify_batch_size(size):
    n = size[0]
    for d in size[2:]:
        n *= d
    if n == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input size "
                         f"torch.Size({list(size)})")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Per-channel (dim 1) normalization; in training the running statistics
    (when given) are updated in place without history (jg_batch_norm)."""
    if training and input.dim() >= 2:
        _verify_batch_size(tuple(input.shape))
    if input.dim() < 2:
        raise IndexError("Dimension out of range (expected to be in range of "
                         f"[{-max(input.dim(), 1)}, {max(input.dim(), 1) - 1}], but got 1)")
    return _C._batch_norm(input, running_mean, running_var, weight, bias, bool(training),
                          float(momentum), float(eps))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("jitgrad: embedding supports padding_idx only (no max_norm, "
                                  "scale_grad_by_freq, sparse)")
    if input.dtype not in (_C.int64, _C.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           "following scalar types: Long, Int; but got "
                           f"{str(input.dtype).replace('jitgrad', 'torch')} instead (while "
                           "checking arguments for embedding)")
    num = weight.size(0)
    if padding_idx is not None:
        if padding_idx > 0:
            assert padding_idx < num, "Padding_idx must be within num_embeddings"
        elif padding_idx < 0:
            assert padding_idx >= -num, "Padding_idx must be within num_embeddings"
            padding_idx = num + padding_idx
    if _C._has_data(input) and input.numel() and \
            ((input < 0).any().item() or (input >= num).any().item()):
        raise IndexError("index out of range in self")
    return _C._embedding(weight, input, -1 if padding_idx is None else int(padding_idx))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False):
    return _C._sdpa(query, key, value, attn_mask, float(dropout_p), bool(is_causal))


def flatten(input, start_dim=0, end_dim=-1):
    return input.flatten(start_dim, end_dim)


def _not_implemented(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"jitgrad: {name} is not implemented yet")

    fn.__name__ = name
    return fn


def _pair_arg(v, name, fn):
    """PyTorch's int-or-pair arguments, as a pair of ints (its message when
    the length is wrong)."""
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) == 1:
        return (int(v[0]), int(v[0]))
    if len(v) != 2 or not all(isinstance(e, int) for e in v):
        if fn == "conv2d":
            raise RuntimeError(f"expected {name} to be a single integer value or a list of 2 "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={list(v)}")
        raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of two ints")
    return v


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (PyTorch 1.13's conv2d: padding may be 'valid' or
    'same'); one op-table row (src/ops/conv.c)."""
    same = False
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            same = True
            padding = 0
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    stride = _pair_arg(stride, "stride", "conv2d")
    if same and stride != (1, 1):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    return _C._conv2d(input, weight, bias, stride, _pair_arg(padding, "padding", "conv2d"),
                      _pair_arg(dilation, "dilation", "conv2d"), int(groups), same)


def _single_arg(v, name):
    """PyTorch's int-or-1-list conv1d arguments, as an int."""
    if isinstance(v, int):
        return v
    v = list(v)
    if len(v) != 1 or not isinstance(v[0], int):
        raise RuntimeError(f"expected {name} to be a single integer value or a list of 1 values "
                           f"to match the convolution dimensions, but got {name}={v}")
    return v[0]


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution: conv2d over a unit height (input [N, C, L] ->
    [N, C, 1, L], weight [O, C / g, k] -> [O, C / g, 1, k]); PyTorch's
    checks and messages in its order, with the 1-D shapes."""
    if input.dim() not in (2, 3):
        raise RuntimeError("Expected 2D (unbatched) or 3D (batched) input to conv1d, but got "
                           f"input of size: {list(input.shape)}")
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    same = isinstance(padding, str) and padding == "same"
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        pad = 0
    else:
        pad = _single_arg(padding, "padding")
    stride = _single_arg(stride, "stride")
    dilation = _single_arg(dilation, "dilation")
    if same and stride != 1:
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    if pad < 0:
        raise RuntimeError("negative padding is not supported")
    if stride <= 0:
        raise RuntimeError("non-positive stride is not supported")
    if dilation <= 0:
        raise RuntimeError("non-positive dilation is not supported")
    ws, xs = list(weight.shape), list(x.shape)
    if weight.dim() != 3:
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-"
                           f"dimensional weight {ws}, but got 3-dimensional input of size {xs} "
                           "instead")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if ws[0] % groups != 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{ws}] instead")
    if xs[1] != ws[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {ws}, expected input{xs} to "
                           f"have {ws[1] * groups} channels, but got {xs[1]} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.size(0) != ws[0]):
        raise RuntimeError(f"Given weight of size {ws}, expected bias to be 1-dimensional with "
                           f"{ws[0]} elements, but got bias of size {list(bias.shape)} instead")
    if not same and xs[2] + 2 * pad < dilation * (ws[2] - 1) + 1:
        raise RuntimeError(f"Calculated padded input size per channel: ({xs[2] + 2 * pad}). "
                           f"Kernel size: ({dilation * (ws[2] - 1) + 1}). Kernel size can't be "
                           "greater than actual input size")
    out = conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, stride),
                 "same" if same else (0, pad), (1, dilation), groups).squeeze(2)
    return out if batched else out.squeeze(0)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each group of num_groups channel groups per sample by its
    mean and biased variance (layer_norm over the group's values), then
    scales and shifts per channel."""
    if input.dim() < 2:
        raise IndexError("Dimension out of range (expected to be in range of "
                         f"[{-max(input.dim(), 1)}, {max(input.dim(), 1) - 1}], but got 1)")
    shape = list(input.shape)
    n, c = shape[0], shape[1]
    # PyTorch's _verify_batch_size over the groups, its message showing a list
    size = [n * c // num_groups, num_groups] + shape[2:]
    if math.prod(size[:1] + size[2:]) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{size}")
    if c % num_groups != 0:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {shape} and num_groups={num_groups}")
    for t, name in ((weight, "weight"), (bias, "bias")):
        if t is not None and (t.dim() != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {list(t.shape)} and "
                               f"input of shape {shape}")
    g = input.reshape(n, num_groups, -1)
    out = _C._layer_norm(g, 1, None, None, float(eps)).reshape(*shape)
    if weight is None and bias is None:
        return out
    per_channel = [c] + [1] * (len(shape) - 2)
    if weight is not None:
        out = out * weight.reshape(*per_channel)
    if bias is not None:
        out = out + bias.reshape(*per_channel)
    return out


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """max_pool2d (stride defaults to kernel_size); with return_indices the
    positions of the maxima in each flattened plane, as PyTorch's."""
    k = _pair_arg(kernel_size, "kernel_size", "max_pool2d")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _pair_arg(stride, "stride", "max_pool2d")
    return _C._max_pool2d(input, k, s, _pair_arg(padding, "padding", "max_pool2d"),
                          _pair_arg(dilation, "dilation", "max_pool2d"), bool(ceil_mode),
                          bool(return_indices))


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """avg_pool2d (stride defaults to kernel_size)."""
    k = _pair_arg(kernel_size, "kernel_size", "avg_pool2d")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _pair_arg(stride, "stride", "avg_pool2d")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return _C._avg_pool2d(input, k, s, _pair_arg(padding, "padding", "avg_pool2d"),
                          bool(ceil_mode), bool(count_include_pad),
                          int(divisor_override or 0))


def adaptive_avg_pool2d(input, output_size):
    """adaptive_avg_pool2d (output_size an int or a pair; None keeps the
    input's size)."""
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    output_size = tuple(output_size)
    if len(output_size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    shape = tuple(input.shape)
    if len(shape) >= 2:
        output_size = tuple(shape[len(shape) - 2 + i] if s is None else s
                            for i, s in enumerate(output_size))
    return _C._adaptive_avg_pool2d(input, tuple(int(s) for s in output_size))


def _one_int(v, fn, name):
    if isinstance(v, int):
        return v
    v = list(v)
    if len(v) != 1:
        if fn == "max_pool1d":
            raise RuntimeError(f"max_pool1d() {name} must be an int, list of ints or tuple of "
                               f"ints of size 1 but got size {len(v)}")
        raise RuntimeError(f"{fn}() argument '{name}' should contain one int (got {len(v)})")
    return int(v[0])


def _pool1d_input(input, fn):
    """[N, C, L] / [C, L] -> the 2-D pools' [N, C, 1, L] / [C, 1, L]."""
    if input.dim() not in (2, 3):
        if fn == "max_pool1d":
            raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                               f"dim batch size for input, but got:{list(input.shape)}")
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for {fn})")
    return input.unsqueeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """max_pool2d over a unit height; indices are positions along L."""
    x = _pool1d_input(input, "max_pool1d")
    k = _one_int(kernel_size, "max_pool1d", "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _one_int(stride, "max_pool1d", "stride")
    p = _one_int(padding, "max_pool1d", "padding")
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if p > k // 2:
        raise RuntimeError("max_pool1d() padding should be at most half of kernel size, but got "
                           f"padding={p} and kernel_size={k}")
    out = max_pool2d(x, (1, k), (1, s), (0, p), (1, _one_int(dilation, "max_pool1d", "dilation")),
                     ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    x = _pool1d_input(input, "avg_pool1d")
    k = _one_int(kernel_size, "avg_pool1d", "kernel_size")
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _one_int(stride, "avg_pool1d", "stride")
    p = _one_int(padding, "avg_pool1d", "padding")
    return avg_pool2d(x, (1, k), (1, s), (0, p), ceil_mode, count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    x = _pool1d_input(input, "adaptive_avg_pool1d")
    n = _one_int(output_size, "adaptive_avg_pool1d", "output_size")
    return adaptive_avg_pool2d(x, (1, n)).squeeze(-2)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels: input times a [N, C, 1, 1] (or [C, 1, 1]) mask
    from dropout's generator, scaled by 1 / (1 - p) (PyTorch's
    feature_dropout)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() not in (3, 4):
        raise RuntimeError(f"dropout2d: expected a 3-D or 4-D input, got {input.dim()}-D")
    if not training or p == 0.0:
        return input
    from .. import ones
    shape = tuple(input.shape)[:-2] + (1, 1)
    mask = _C._dropout(ones(shape, dtype=input.dtype), float(p), True)
    if inplace:
        return input.mul_(mask)
    return input * mask


def multi_head_attention_forward(*args, **kwargs):
    """PyTorch's F.multi_head_attention_forward (see nn/transformer.py)."""
    from .transformer import multi_head_attention_forward as mha
    return mha(*args, **kwargs)


# ---- more losses and helpers, composed of library ops.  Where PyTorch's
# derivative is an explicit formula, the composition is arranged so that its
# chain rule gives the same values at the kinks too (|x| written as a where
# that takes the x branch at 0, so d/dx logsigmoid(0) = 0.5 as PyTorch's).
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _size_str(t):
    return f"torch.Size({list(t.shape)})"


def _reduce(loss, reduction):
    reduction = _REDUCTIONS.get(reduction, reduction)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _check_reduction(reduction):
    reduction = _REDUCTIONS.get(reduction, reduction)
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _neg_logsigmoid(x):
    """log1p(exp(-|x|)) + max(-x, 0) = -logsigmoid(x), exp never overflowing."""
    nonneg = x >= 0
    a = _C.where(nonneg, x, -x)
    return a.neg().exp().log1p() + _C.where(nonneg, 0.0, -x)


def logsigmoid(input):
    return _neg_logsigmoid(input).neg()


def softsign(input):
    return input / (input.abs() + 1)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        raise TypeError("jitgrad: softmin() needs dim (PyTorch's implicit choice is deprecated)")
    if dtype is not None:
        input = input.to(dtype)
    return (-input).softmax(dim)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t * log(x) + (1 - t) * log(1 - x)), each log clamped at -100 as
    PyTorch's; at x exactly 0 or 1 the clamped log is the constant -100 (no
    gradient through it; PyTorch gives +-t / 1e-12 there)."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size_str(target)}) that is different to the "
                         f"input size ({_size_str(input)}) is deprecated. Please ensure they "
                         "have the same size.")
    if _C._has_data(input) and input.numel() and \
            ((input < 0).any().item() or (input > 1).any().item()):
        raise RuntimeError("all elements of input should be between 0 and 1")

    def clamped_log(v):
        pos = v > 0
        return _C.where(pos, _C.where(pos, v, v * 0 + 1).log().clamp_min(-100), v * 0 - 100)

    loss = (target - 1) * clamped_log(1 - input) - target * clamped_log(input)
    if weight is not None:
        # PyTorch expands weight to the target's shape: a larger one is refused
        loss = loss * weight.expand(*target.shape)
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """(1 - t) * x + (1 + (pw - 1) * t) * (log1p(exp(-|x|)) + max(-x, 0)),
    PyTorch's numerically stable form."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size_str(target)}) must be the same as input size "
                         f"({_size_str(input)})")
    sp = _neg_logsigmoid(input)
    if pos_weight is not None:
        sp = ((pos_weight - 1) * target + 1) * sp
    loss = (1 - target) * input + sp
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta)."""
    reduction = _check_reduction(reduction)
    _check_same_size(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = input - target
    a = d.abs()
    loss = _C.where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target * (log(target) - input) pointwise (0 where target is 0, as
    xlogy), or exp(target) * (target - input) with log_target; 'batchmean'
    divides the sum by the batch size."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        import warnings
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if reduction != "batchmean":
        _check_reduction(reduction)
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = _C.where(target == 0, target * 0 + 1, target)
        loss = target * safe.log() - target * input
    if reduction == "batchmean":
        out = loss.sum()
        return out / input.size(0) if input.dim() != 0 else out
    return _reduce(loss, reduction)


def one_hot(tensor, num_classes=-1):
    """int64 [*, num_classes]: 1 where the last index equals the class."""
    from .. import arange
    if tensor.dtype != _C.int64:
        raise RuntimeError("one_hot is only applicable to index tensor.")
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    if tensor.numel():
        if tensor.min().item() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if tensor.max().item() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (tensor.unsqueeze(-1) == arange(num_classes)).to(_C.int64)


def pad(input, pad, mode="constant", value=None):
    """pad lists (before, after) pairs from the last dim backwards; a
    negative amount crops.  Modes other than 'constant': _functional_act."""
    from .. import cat
    if mode != "constant":
        from ._functional_act import _pad_mode
        return _pad_mode(input, pad, mode, value)
    pad = list(pad)
    assert len(pad) % 2 == 0, "Padding length must be divisible by 2"
    assert len(pad) // 2 <= input.dim(), "Padding length too large"
    value = 0.0 if value is None else value
    out = input
    for i in range(len(pad) // 2):
        dim = input.dim() - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        size = out.size(dim)
        if size + min(before, 0) + min(after, 0) < 0:
            raise RuntimeError(f"The input size {size}, plus negative padding {before} and "
                               f"{after} resulted in a negative output size, which is invalid. "
                               f"Check dimension {dim} of your input.")
        if before < 0 or after < 0:
            start = max(-before, 0)
            out = out.narrow(dim, start, size - start - max(-after, 0))
        parts = []
        for n in (before, after):
            shape = list(out.shape)
            shape[dim] = max(n, 0)
            parts.append(out.new_full(shape, value) if n > 0 else None)
        pieces = [p for p in (parts[0], out, parts[1]) if p is not None]
        out = cat(pieces, dim) if len(pieces) > 1 else out
    return out


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    if out is not None:
        raise NotImplementedError("jitgrad: normalize(out=) is not implemented")
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)


def _clamped_norm(x, dim, eps):
    """max(|x|, eps) over dim with PyTorch 1.13's gradient: it clamps the
    norm in place without history, so where clamped the gradient is still
    the norm's, x / eps.  Here (s - s.detach()) / (2 eps), s = sum(x * x),
    adds exactly 0 to the value and x / eps to the gradient."""
    n = x.norm(2, dim, keepdim=True)
    s = (x * x).sum(dim, keepdim=True)
    return _C.where(n >= eps, n, (s - s.detach()) / (2 * eps) + eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(|x1|, eps) * x2 / max(|x2|, eps)) over dim, as PyTorch
    1.13 computes it."""
    return ((x1 / _clamped_norm(x1, dim, eps)) * (x2 / _clamped_norm(x2, dim, eps))).sum(dim)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight one value or one per channel
    (dim 1); where(x > 0, x, weight * x) gives PyTorch's gradients."""
    if weight.dim() > 1:
        raise RuntimeError("prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = "
                           f"{weight.dim()}")
    n = weight.numel()
    if n != 1:
        if input.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = input.size(1) if input.dim() >= 2 else 1
        if n != channels:
            raise RuntimeError("Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {channels}.")
    if weight.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {_dtype_name(weight.dtype)} but expected "
                           f"{_dtype_name(input.dtype)}")
    w = weight.reshape([n] + [1] * (input.dim() - 2)) if n != 1 else weight.reshape([])
    return _C.where(input > 0, input, w * input)


def _dtype_name(dtype):
    return {_C.float32: "Float", _C.float64: "Double", _C.int64: "Long", _C.int32: "Int",
            _C.bool: "Bool"}.get(dtype, str(dtype))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Each (sample, channel) plane normalized by its own statistics: as
    PyTorch's ATen, batch_norm over the input viewed as [1, N * C, ...] with
    weight, bias and running statistics repeated N times; the running
    statistics then become the mean over the batch of the updated copies."""
    shape = list(input.shape)
    if use_input_stats:
        if math.prod(shape[2:]) == 1:
            raise ValueError("Expected more than 1 spatial element when training, got input size "
                             f"torch.Size({shape})")
    elif running_mean is None or running_var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    b, c = shape[0], shape[1]

    def rep(t):
        return None if t is None else t.repeat(b)

    from .. import no_grad
    rm, rv = rep(running_mean), rep(running_var)
    out = batch_norm(input.contiguous().view(1, b * c, *shape[2:]), rm, rv, rep(weight),
                     rep(bias), bool(use_input_stats), momentum, eps)
    with no_grad():
        if running_mean is not None:
            running_mean.copy_(rm.view(b, c).mean(0))
        if running_var is not None:
            running_var.copy_(rv.view(b, c).mean(0))
    return out.view(*shape)


# ---- interpolate: PyTorch 1.13's CPU index arithmetic (aten/src/ATen/native/UpSample.h and
# UpSampleKernel.cpp), checked bit for bit against its outputs: the scale in the input's
# precision (float for float32; always float for nearest), a linear mode's source position in
# double (one rounding), its lambda and 1 - lambda in the input's precision

def _f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def _scale(in_size, out_size, align_corners, scale, rnd):
    """area_pixel_compute_scale / compute_scales_value"""
    if align_corners:
        return rnd(float(in_size - 1) / (out_size - 1)) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return rnd(1.0 / scale)
    return rnd(rnd(float(in_size)) / out_size)


@functools.lru_cache(maxsize=256)
def _nearest_index(in_size, out_size, scale):
    if out_size == in_size:
        return tuple(range(out_size))
    if out_size == 2 * in_size:
        return tuple(i >> 1 for i in range(out_size))
    s = _scale(in_size, out_size, False, scale, _f32)
    return tuple(min(int(math.floor(_f32(i * s))), in_size - 1) for i in range(out_size))


@functools.lru_cache(maxsize=256)  # (tuples: callers must not modify them)
def _linear_index(in_size, out_size, align_corners, scale, rnd):
    """(index0, index1, weight0, weight1) per output position: the source
    position (clamped at 0 without align_corners), its floor and the next
    index (the same at the end), lambda clamped to [0, 1]; equal sizes copy"""
    if in_size == out_size:
        r = tuple(range(out_size))
        return r, r, (1.0,) * out_size, (0.0,) * out_size
    s = _scale(in_size, out_size, align_corners, scale, rnd)
    i0, i1, w0, w1 = [], [], [], []
    for i in range(out_size):
        # s * (i + 0.5) - 0.5 rounded once (PyTorch's kernel fuses it)
        real = s * i if align_corners else \
            max(float(Fraction(s) * Fraction(2 * i + 1, 2) - Fraction(1, 2)), 0.0)
        idx = min(int(math.floor(real)), in_size - 1)
        lam = min(max(rnd(real - idx), 0.0), 1.0)
        i0.append(idx)
        i1.append(idx + (1 if idx < in_size - 1 else 0))
        w0.append(rnd(1.0 - lam))
        w1.append(lam)
    return tuple(i0), tuple(i1), tuple(w0), tuple(w1)


_INTERP_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """F.interpolate for 3-D and 4-D input, modes 'nearest', 'linear' (3-D)
    and 'bilinear' (4-D): index_select of PyTorch's source indices along
    each spatial dim (last first), linear modes blending the two neighbours
    as x0 * w0 + x1 * w1, as PyTorch's separable kernel does."""
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    dim = input.dim() - 2
    if dim < 1 or input.dim() > 5 or mode not in _INTERP_MODES:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{input.dim()}D) for the modes: nearest | linear | bilinear | "
                                  f"bicubic | trilinear | area | nearest-exact (got {mode})")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    spatial = list(input.shape)[2:]
    scales = None
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError("Input and output must have the same number of spatial "
                                 "dimensions, but got input with spatial dimensions of "
                                 f"{spatial} and output size of {size}. Please provide input "
                                 "tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            out = [int(s) for s in size]
        else:
            out = [int(size)] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError("Input and scale_factor must have the same number of spatial "
                                 "dimensions, but got input with spatial dimensions of "
                                 f"{spatial} and scale_factor of shape {scale_factor}. Please "
                                 "provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 "scale_factor in (s1, s2, ...,sK) format.")
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * dim
        out = [int(math.floor(float(n) * s)) for n, s in zip(spatial, scales)]
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor is not None and recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if recompute_scale_factor:
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic") and dim == 2):
        raise ValueError("Anti-alias option is only supported for bilinear and bicubic modes")
    linear = {"linear": 1, "bilinear": 2, "trilinear": 3}.get(mode)
    if linear is not None and linear != dim:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{linear + 2}D input")
    if mode not in ("nearest", "linear", "bilinear") or antialias or dim > 2:
        raise NotImplementedError(f"jitgrad: interpolate supports 3-D and 4-D input in modes "
                                  f"'nearest', 'linear' and 'bilinear' without antialias (got "
                                  f"{input.dim()}-D input, mode '{mode}')")
    if any(n <= 0 for n in spatial) or any(o <= 0 for o in out):
        if dim == 1:
            raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                               f"(W: {spatial[0]}) and output (W: {out[0]})")
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (H: "
                           f"{spatial[0]}, W: {spatial[1]}) output (H: {out[0]}, W: {out[1]})")
    if input.dtype not in (_C.float32, _C.float64):
        kernel = "compute_indices_weights_nearest" if mode == "nearest" else \
            "compute_indices_weights_linear"
        raise RuntimeError(f"\"{kernel}\" not implemented for '{_dtype_name(input.dtype)}'")
    from .. import tensor
    rnd = _f32 if input.dtype == _C.float32 else float
    x = input
    for d in reversed(range(dim)):  # the last dim first: PyTorch's innermost loop
        axis = 2 + d
        scale = None if scales is None else scales[d]
        if mode == "nearest":
            idx = _nearest_index(spatial[d], out[d], scale)
            x = x.index_select(axis, tensor(list(idx), dtype=_C.int64))
            continue
        i0, i1, w0, w1 = _linear_index(spatial[d], out[d], align_corners, scale, rnd)
        bshape = [out[d]] + [1] * (dim - 1 - d)
        x = x.index_select(axis, tensor(list(i0), dtype=_C.int64)) * \
            tensor(list(w0), dtype=input.dtype).reshape(bshape) + \
            x.index_select(axis, tensor(list(i1), dtype=_C.int64)) * \
            tensor(list(w1), dtype=input.dtype).reshape(bshape)
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- transposed convolutions: conv2d's input gradient (jg_conv_transpose2d)

def _conv_arg(v, name, n):
    """PyTorch's int-or-n-list convolution arguments, as an n-tuple."""
    if isinstance(v, int):
        return (v,) * n
    v = list(v)
    if len(v) == 1 and isinstance(v[0], int):
        return (v[0],) * n
    if len(v) != n or not all(isinstance(e, int) for e in v):
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                           f"values to match the convolution dimensions, but got {name}={v}")
    return tuple(v)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-D convolution, weight [in, out / groups, kh, kw]: the
    gradient of conv2d with respect to its input (one op-table row), plus
    the bias."""
    stride = _conv_arg(stride, "stride", 2)
    if weight.dim() != 4:  # PyTorch picks the convolution's dims from the weight's
        raise RuntimeError(f"expected stride to be a single integer value or a list of "
                           f"{weight.dim() - 2} values to match the convolution dimensions, but "
                           f"got stride={list(stride)}")
    return _C._conv_transpose2d(input, weight, bias, stride, _conv_arg(padding, "padding", 2),
                                _conv_arg(output_padding, "output_padding", 2),
                                _conv_arg(dilation, "dilation", 2), int(groups))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """conv_transpose2d over a unit height ([N, C, L] -> [N, C, 1, L]), with
    PyTorch's conv_transpose1d checks and messages showing the 1-D shapes."""
    if input.dim() not in (2, 3):
        raise RuntimeError("Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, "
                           f"but got input of size: {list(input.shape)}")
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    args = [_conv_arg(v, name, 1)[0] for v, name in
            ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
             (dilation, "dilation"))]
    xs, ws = list(x.shape), list(weight.shape)
    if weight.dim() != 3:
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-"
                           f"dimensional weight {ws}, but got 3-dimensional input of size {xs} "
                           "instead")
    if groups > 0 and all(a >= 0 for a in args[1:3]) and args[0] > 0 and args[3] > 0:
        if ws[0] % groups != 0:
            raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                               f"{groups} at dimension 0, but got weight of size [{ws}] instead")
        if xs[1] != ws[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {ws}, expected input{xs} to "
                               f"have {ws[0]} channels, but got {xs[1]} channels instead")
        if bias is not None and (bias.dim() != 1 or bias.size(0) != ws[1] * groups):
            raise RuntimeError(f"Given transposed=1, weight of size {ws}, expected bias to be "
                               f"1-dimensional with {ws[1] * groups} elements, but got bias of "
                               f"size {list(bias.shape)} instead")
    out = conv_transpose2d(x.unsqueeze(2), weight.unsqueeze(2), bias, (1, args[0]),
                           (0, args[1]), (0, args[2]), groups, (1, args[3])).squeeze(2)
    return out if batched else out.squeeze(0)
from ._functional_loss import *  # noqa: E402,F401,F403
from ._functional_act import *  # noqa: F401,F403,E402
