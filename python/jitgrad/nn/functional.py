"""jitgrad.nn.functional: each op is one call into the C library (or a short
composition of them, where noted)."""
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


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    if weight is not None or label_smoothing != 0.0 or size_average is not None or \
            reduce is not None:
        raise NotImplementedError("jitgrad: cross_entropy supports input, target, reduction and "
                                  "ignore_index only")
    return _C._cross_entropy(input, target, reduction, int(ignore_index))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    d = input - target
    sq = d * d
    if reduction == "mean":
        return sq.mean()
    if reduction == "sum":
        return sq.sum()
    if reduction == "none":
        return sq
    raise ValueError(f"{reduction} is not a valid value for reduction")


def linear(input, weight, bias=None):
    out = input.matmul(weight.t())
    if bias is not None:
        out = out + bias
    return out
