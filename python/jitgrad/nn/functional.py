"""jitgrad.nn.functional: each op is one call into the C library or a short
composition of library ops (docs/python.md lists which)."""
import math

from .. import _C


def relu(input, inplace=False):
    if inplace:
        raise NotImplementedError("jitgrad: relu(inplace=True) is not supported")
    return input.relu()


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


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


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
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_same_size(input, target, "l1_loss")
    return _reduce((input - target).abs(), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _check_same_size(input, target, "smooth_l1_loss")
    d = (input - target).abs()
    if beta == 0.0:
        return _reduce(d, reduction)
    loss = _C.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction)


def _one_hot(target, n_classes, dtype):
    """[N, C] float indicator of target along the class dim (a composition:
    no gather op is public yet)."""
    classes = _C.arange(n_classes)
    return (target.unsqueeze(1) == classes).to(dtype)


def _class_dim_last(input, target):
    """input [N, C, d1, ...] -> [N*d1*..., C]; target alike -> [N*d1*...]."""
    if input.dim() == 1:
        return input.unsqueeze(0), target.unsqueeze(0)
    if input.dim() > 2:
        c = input.size(1)
        perm = [0] + list(range(2, input.dim())) + [1]
        return input.permute(*perm).reshape(-1, c), target.reshape(-1)
    return input, target


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    out_shape = tuple(target.shape)
    return _nll(input, target, weight, ignore_index, reduction, 0.0, out_shape)


def _nll(logp, target, weight, ignore_index, reduction, label_smoothing, out_shape, rows=None):
    """nll_loss, with PyTorch's label smoothing; rows: the unweighted
    per-row loss when the caller has it already."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if target.dtype != _C.int64:
        raise RuntimeError(f"expected scalar type Long but found {_dtype_title(target.dtype)}")
    if logp.dim() >= 2 and target.dim() > 0 and logp.size(0) != target.size(0):
        raise ValueError(f"Expected input batch_size ({logp.size(0)}) to match target "
                         f"batch_size ({target.size(0)}).")
    logp, target = _class_dim_last(logp, target)
    n_classes = logp.size(1)
    if weight is not None and tuple(weight.shape) != (n_classes,):
        raise RuntimeError(f"weight tensor should be defined either for all {n_classes} classes "
                           f"or no classes but got weight tensor of shape: "
                           f"{list(weight.shape)}")
    keep = target != ignore_index
    if rows is None and _C._has_data(target):  # a traced target cannot be read (docs/python.md)
        bad = ((target < 0).logical_or(target >= n_classes)).logical_and(keep)
        if bad.any().item():
            first = [v for v, b in zip(target.tolist(), bad.tolist()) if b][0]
            raise IndexError(f"Target {first} is out of bounds.")
    onehot = _one_hot(target, n_classes, logp.dtype)
    w = onehot if weight is None else onehot * weight
    keepf = keep.to(logp.dtype)
    w_row = w.sum(1) * keepf  # the weight of each row's target (0 where ignored)
    if rows is None:
        nll = -(logp * w).sum(1) * keepf
    else:
        nll = rows if weight is None else rows * w_row
    if label_smoothing > 0.0:
        cw = logp if weight is None else logp * weight
        smooth = -cw.sum(1) * keepf
        if reduction == "none":
            loss = nll * (1 - label_smoothing) + smooth * (label_smoothing / n_classes)
            return loss.reshape(*out_shape)
        if reduction == "sum":
            return nll.sum() * (1 - label_smoothing) + smooth.sum() * (label_smoothing / n_classes)
        denom = w_row.sum()
        return (nll.sum() / denom) * (1 - label_smoothing) + \
            (smooth.sum() / denom) * (label_smoothing / n_classes)
    if reduction == "none":
        return nll.reshape(*out_shape)
    if reduction == "sum":
        return nll.sum()
    return nll.sum() / w_row.sum()


def _dtype_title(d):
    return {"torch.float32": "Float", "torch.float64": "Double", "torch.int32": "Int",
            "torch.bool": "Bool"}.get(str(d).replace("jitgrad", "torch"), str(d))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if weight is None and label_smoothing == 0.0 and input.dim() == 2 and \
            target.dtype == _C.int64:
        return _C._cross_entropy(input, target, reduction, int(ignore_index))
    if target.is_floating_point():
        raise NotImplementedError("jitgrad: cross_entropy with class-probability targets is not "
                                  "supported")
    class_dim = 0 if input.dim() == 1 else 1
    logp = input.log_softmax(class_dim)
    rows = None
    if input.dim() == 2 and target.dtype == _C.int64:
        # the per-row -logp[i, t_i] from the library's op, which checks the
        # targets when it runs (eagerly or in compiled code)
        rows = _C._cross_entropy(input, target, "none", int(ignore_index))
    return _nll(logp, target, weight, int(ignore_index), reduction, float(label_smoothing),
                tuple(target.shape), rows)


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def silu(input, inplace=False):
    if inplace:
        raise NotImplementedError("jitgrad: silu(inplace=True) is not supported")
    return _C._silu(input)


def gelu(input, approximate="none"):
    return _C._gelu(input, approximate=approximate)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise NotImplementedError("jitgrad: dropout(inplace=True) is not supported")
    if not training or p == 0.0:
        return input
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
    L, S = query.size(-2), key.size(-2)
    scores = query.matmul(key.transpose(-2, -1)) * (1.0 / math.sqrt(query.size(-1)))
    if is_causal:
        causal = _C.arange(S).unsqueeze(0) > _C.arange(L).unsqueeze(1)
        scores = scores.masked_fill(causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == _C.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    attn = scores.softmax(-1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return attn.matmul(value)


def flatten(input, start_dim=0, end_dim=-1):
    return input.flatten(start_dim, end_dim)


def _not_implemented(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"jitgrad: {name} is not implemented yet")

    fn.__name__ = name
    return fn


max_pool2d = _not_implemented("max_pool2d")
conv2d = _not_implemented("conv2d")
