"""Distance functions, the margin / embedding / likelihood losses, bilinear
and embedding_bag of torch.nn.functional: compositions of library ops with
PyTorch 1.13's formulas (ATen's Loss.cpp, Distance.cpp and its Python
functional), so autograd and compile need nothing new.  Index logic that
depends on a target's or an offset's values (multi_margin_loss,
multilabel_margin_loss, embedding_bag, ctc_loss) is made of tensor ops
too, so a compiled program captures it instead of reading values back
(ctc_loss's concatenated 1-D targets excepted: they are cut on the host);
the checks on values run in eager mode only (see _any)."""

import math

from .. import _C
from .functional import _check_reduction, _legacy_reduction, _reduce

__all__ = [
    "pairwise_distance", "pdist", "margin_ranking_loss", "hinge_embedding_loss",
    "soft_margin_loss", "multilabel_soft_margin_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "multi_margin_loss", "multilabel_margin_loss", "bilinear",
    "embedding_bag", "ctc_loss",
]


def _zeros_like(x):
    return _C.zeros(*x.shape, dtype=x.dtype)


def _legacy(size_average, reduce, reduction):
    """The reduction a loss taking size_average / reduce uses, checked as
    _Reduction.get_enum does."""
    return _check_reduction(_legacy_reduction(size_average, reduce, reduction))


def _any(mask):
    """Whether any element of mask is set, for a check: False while a
    program is traced (the values do not exist then, also for one computed
    from a captured tensor), so compile skips the check as PyTorch's does."""
    a = mask.any()
    return _C._has_data(a) and bool(a.item())


# ---- distances

def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim of the broadcast shape
    (ATen's pairwise_distance)."""
    dim = max(x1.dim(), x2.dim()) - 1
    return (x1 - x2 + eps).norm(p, dim, keepdim)


def pdist(input, p=2):
    """||x_i - x_j||_p for each row pair i < j of a 2-D input, in
    row-major order of the upper triangle (ATen's _pdist_forward)."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if input.dtype not in (_C.float32, _C.float64):
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    from .. import tensor
    n = input.size(0)
    first = [i for i in range(n) for _ in range(i + 1, n)]
    second = [j for i in range(n) for j in range(i + 1, n)]
    if not first:
        return _C.zeros(0, dtype=input.dtype) + input.sum() * 0
    diff = input.index_select(0, tensor(first, dtype=_C.int64)) - \
        input.index_select(0, tensor(second, dtype=_C.int64))
    return diff.norm(p, 1)


# ---- margin and embedding losses

def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    reduction = _legacy(size_average, reduce, reduction)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: torch.Size({list(input1.shape)}), input2: "
                           f"torch.Size({list(input2.shape)}), target: "
                           f"torch.Size({list(target.shape)}) ")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (both
    summed for other target values, as ATen's)."""
    reduction = _legacy(size_average, reduce, reduction)
    zeros = _zeros_like(input)
    out = _C.where(target != 1, (margin - input).clamp_min(0), zeros) + \
        _C.where(target != -1, input, zeros)
    return _reduce(out, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    reduction = _legacy(size_average, reduce, reduction)
    return _reduce((-input * target).exp().log1p(), reduction)


def _reduce_py(loss, reduction):
    """The reduction of PyTorch's Python-level losses: checked last, with
    their message."""
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(reduction + " is not valid")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """-(t * logsigmoid(x) + (1 - t) * logsigmoid(-x)), weighted, averaged
    over the class (last) dim: one loss per sample."""
    from .functional import logsigmoid
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.size(class_dim)
    return _reduce_py(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos - margin) where it is
    -1; cos = sum(x1 x2) / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))."""
    reduction = _legacy(size_average, reduce, reduction)
    td = target.dim()
    s1, s2 = list(input1.shape), list(input2.shape)
    if td not in (0, 1):
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if td == 1 and (input1.dim() != 2 or input2.dim() != 2):
        raise RuntimeError("1D target tensor expects 2D input tensors, but found inputs with "
                           f"sizes {s1} and {s2}.")
    if td == 0 and (input1.dim() != 1 or input2.dim() != 1):
        raise RuntimeError("0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {s1} and {s2}.")
    prod_sum = (input1 * input2).sum(td)
    mag1 = (input1 * input1).sum(td) + 1e-12
    mag2 = (input2 * input2).sum(td) + 1e-12
    cos = prod_sum / (mag1 * mag2).sqrt()
    zeros = _zeros_like(cos)
    out = _C.where(target == 1, 1 - cos, zeros) + \
        _C.where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(out, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)), d the pairwise distance; swap
    takes d(a, n) as min(d(a, n), d(p, n))."""
    reduction = _legacy(size_average, reduce, reduction)
    a, pd, nd = anchor.dim(), positive.dim(), negative.dim()
    if not (a == pd and pd == nd):
        raise RuntimeError(f"All inputs should have same dimension but got {a}D, {pd}D and "
                           f"{nd}D inputs.")
    dist_pos = pairwise_distance(anchor, positive, p, eps)
    dist_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = dist_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance (pairwise_distance by default)."""
    distance_function = distance_function if distance_function is not None else \
        pairwise_distance
    positive_dist = distance_function(anchor, positive)
    negative_dist = distance_function(anchor, negative)
    if swap:
        negative_dist = negative_dist.minimum(distance_function(positive, negative))
    output = (positive_dist - negative_dist + margin).clamp(min=0.0)
    reduction = _check_reduction(reduction)
    return _reduce(output, reduction)


# ---- likelihood losses

def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input) or input - target *
    log(input + eps); full adds Stirling's term where target > 1."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + (target * (2 * math.pi)).log() * 0.5
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+
    0.5 log(2 pi) when full); var one per input or one per last-dim row.
    The clamp has no gradient of its own, as PyTorch's (in place, without
    history): var gets the gradient of the clamped value everywhere."""
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape)[:-1] == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(input.shape)[:-1] == tuple(var.shape)[:-1] and var.size(-1) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if var.numel() and _any(var < 0):
        raise ValueError("var has negative entry/entries")
    # value max(var, eps), gradient 1: where clamped, var - var.detach() is
    # exactly 0 with var's gradient
    var = _C.where(var < eps, var - var.detach() + eps, var)
    loss = ((input - target) ** 2 / var + var.log()) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


# ---- multi-class margin losses

def _class_input(input):
    if not ((input.dim() == 2 and input.size(1) != 0) or
            (input.dim() == 1 and input.size(0) != 0) or input.dim() == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {list(input.shape)}")
    nframe = 1 if input.dim() <= 1 else input.size(0)
    dim = 1 if input.dim() == 0 else input.size(-1)
    return nframe, dim


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over j != y of max(0, margin - x[y] + x[j])^p * weight[y], over
    the number of classes, y the target class of each sample."""
    reduction = _legacy(size_average, reduce, reduction)
    if p != 1 and p != 2:
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    nframe, dim = _class_input(input)
    if not (target.dim() <= 1 and target.numel() == nframe):
        raise RuntimeError(f"inconsistent target size, got: {list(target.shape)}")
    if target.numel() and _any((target < 0).logical_or(target >= dim)):
        raise RuntimeError("target out of range")
    from .. import arange
    x = input.reshape(nframe, dim)
    t = target.reshape(nframe)
    xy = x.gather(1, t.unsqueeze(1))
    z = margin - xy + x
    h = _C.where(z > 0, z, _zeros_like(z))
    if p == 2:
        h = h * h
    if weight is not None:
        h = h * weight.index_select(0, t).unsqueeze(1)
    is_target = t.unsqueeze(1) == arange(dim).unsqueeze(0)
    h = _C.where(is_target, _zeros_like(h), h)
    loss = h.sum(1) / dim
    if reduction == "none":  # (PyTorch's has the target's shape)
        return loss.reshape(tuple(target.shape))
    return _reduce(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over target classes j and non-target classes i of max(0, 1 -
    (x[j] - x[i])), over the number of classes; each target row lists its
    classes up to the first -1."""
    reduction = _legacy(size_average, reduce, reduction)
    nframe, dim = _class_input(input)
    if input.dim() <= 1:
        if not (target.dim() <= 1 and target.numel() == dim):
            raise RuntimeError(f"inconsistent size {list(target.shape)} for argument #2 'target'")
    elif not (target.dim() == 2 and target.size(0) == nframe and target.size(1) == dim):
        raise RuntimeError(f"inconsistent size {list(target.shape)} for argument #2 'target'")
    if target.numel() and _any((target < -1).logical_or(target >= dim)):
        raise RuntimeError("argument #2 'target' is out of range")
    from .. import arange
    # the classes of each row up to its first -1 (valid), as a mask over
    # the classes (is_target); all from tensor ops, so compile captures it
    t = target.reshape(nframe, dim)
    valid = (t < 0).cumsum(1) == 0
    is_target = valid.unsqueeze(2).logical_and(
        t.unsqueeze(2) == arange(dim).reshape(1, 1, dim)).any(1)
    x = input.reshape(nframe, dim)
    xt = x.gather(1, _C.where(valid, t, t * 0))
    z = 1 - xt.unsqueeze(2) + x.unsqueeze(1)
    keep = valid.unsqueeze(2).logical_and(is_target.logical_not().unsqueeze(1))
    loss = _C.where(keep.logical_and(z > 0), z, _zeros_like(z)).sum((1, 2)) / dim
    if reduction == "none":
        return loss if input.dim() >= 2 else loss.reshape(())
    return _reduce(loss, reduction)


# ---- bilinear, embedding_bag

def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]: x1 times W
    viewed as [in1, out * in2], then the product with x2 summed over in2."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and "
                           f"{input2.dim()}")
    for i in range(input1.dim() - 1):
        if input1.size(i) != input2.size(i):
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: "
                               f"got {input1.size(i)} and {input2.size(i)}")
    from .functional import _dtype_name
    for t in (input2, weight):
        if t.dtype != input1.dtype:
            raise RuntimeError(f"expected scalar type {_dtype_name(input1.dtype)} but found "
                               f"{_dtype_name(t.dtype)}")
    if input1.size(-1) != weight.size(1):
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{input1.size(-1)} but expected {weight.size(1)}")
    if input2.size(-1) != weight.size(2):
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{input2.size(-1)} but expected {weight.size(2)}")
    if bias is not None and bias.size(0) != weight.size(0):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.size(0)} but expected {weight.size(0)}")
    out_f, in1, in2 = weight.shape
    lead = list(input1.shape)[:-1]
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    y = (x1.matmul(w).reshape(-1, out_f, in2) * x2.unsqueeze(1)).sum(2)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + [out_f])


_BAG_MODES = {"sum": 0, "mean": 1, "max": 2}


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sums, means or maxima of bags of embedding rows: a 2-D input is one
    bag per row, a 1-D input is cut into bags at offsets.  Entries equal to
    padding_idx do not count, an empty bag gives zeros.  The bag of each
    position comes from tensor ops on the offsets (no values read back), so
    compile captures it; the rows are summed into their bags by index_add.
    The max mode pads the bags to the longest in eager mode; compiled, it
    holds a [bags, positions, dim] tensor.  Gradients reach weight (and
    per_sample_weights)."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("jitgrad: embedding_bag supports no max_norm, "
                                  "scale_grad_by_freq or sparse")
    if weight.dtype == _C.int64 and input.dtype in (_C.float32, _C.float64):
        # PyTorch 1.13 swaps the two arguments then, with a warning
        import warnings
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.")
        weight, input = input, weight
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights "
                         f"(torch.Size({list(per_sample_weights.shape)})) is not None, then it "
                         f"must have the same shape as the input "
                         f"(torch.Size({list(input.shape)}))")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dtype not in (_C.int64, _C.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                           "following scalar types: Long, Int; but got "
                           f"{str(input.dtype).replace('jitgrad', 'torch')} instead (while "
                           "checking arguments for embedding_bag)")
    if input.dim() == 2:
        if offsets is not None:
            type_str = str(type(offsets)).replace("jitgrad.", "torch.")
            raise ValueError(f"if input is 2D, then offsets has to be None, as input is treated "
                             f"is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type_str}")
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in _BAG_MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        names = {_C.float32: "FloatTensor", _C.float64: "DoubleTensor"}
        raise RuntimeError("Expected tensor for argument #1 'weight' to have the same type as "
                           "tensor for argument #1 'per_sample_weights'; but type "
                           f"torch.{names.get(weight.dtype)} does not equal "
                           f"torch.{names.get(per_sample_weights.dtype)} (while checking "
                           "arguments for embedding_bag)")
    num = weight.size(0)
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{num} "
                               f"through {num - 1}, but got {padding_idx}")
        if padding_idx < 0:
            padding_idx = num + padding_idx
    dim = weight.size(1)
    if input.numel() and _any((input < 0).logical_or(input >= num)):
        bad = input.reshape(-1)[((input < 0).logical_or(input >= num)).reshape(-1)][0].item()
        raise RuntimeError("embedding_bag: Expected idx >= 0 && idx < num_embeddings but found "
                           f"idx to be {bad}")
    from .. import arange, cat
    keep_idx = input != (-1 if padding_idx is None else padding_idx)
    rows = weight.index_select(0, input.reshape(-1))
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    if input.dim() == 2:
        # one bag per row: the rows of a bag summed in order, as PyTorch's
        b, n = input.shape
        keep = keep_idx.unsqueeze(2)
        rows = rows.reshape(b, n, dim)
        counts = keep_idx.sum(1, keepdim=True)
        if mode == "max":
            m = _C.where(keep, rows, _zeros_like(rows) - math.inf).max(1).values if n else \
                _C.zeros(b, dim, dtype=rows.dtype)
            return _C.where(counts > 0, m, _zeros_like(m))
        out = _C.where(keep, rows, _zeros_like(rows)).sum(1)
    else:
        total = input.size(0)
        if offsets.numel() and _any((offsets[0] != 0).logical_or(offsets[-1] > total)):
            first, last = offsets[0].item(), offsets[-1].item()
            if first != 0:
                # (PyTorch's message ends with the 0-dim tensor it printed)
                kind = "LongTensor" if offsets.dtype == _C.int64 else "IntTensor"
                raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                                   f"mini-batch has to start from position 0. However, got "
                                   f"{first}\n[ torch.{kind}{{}} ]")
            if last > total:
                raise RuntimeError(f"offsets[-1] can not be greater than input's length {total} "
                                   f"but got offsets[-1] of {last}")
        nb = offsets.size(0)
        if include_last_offset:
            if nb < 1:
                raise RuntimeError("include_last_offset: numBags should be at least 1")
            nb -= 1
            starts, ends = offsets[:nb], offsets[1:]
        else:
            starts = offsets
            ends = cat([offsets[1:], offsets.new_full((1,), total)]) if nb else offsets
        if nb == 0:
            return _C.zeros(0, dim, dtype=rows.dtype)
        # bag b holds the positions offsets[b] <= k < offsets[b + 1] (the
        # input's end for the last one): each position's bag is the number
        # of starts at or before it, less one
        pos = arange(total)
        bag = (pos.unsqueeze(0) >= starts.unsqueeze(1)).sum(0) - 1
        bag0 = bag.clamp_min(0)
        inside = (bag >= 0).logical_and(pos < ends.index_select(0, bag0)).logical_and(keep_idx)
        counts = _C.zeros(nb, dtype=_C.int64).index_add(0, bag0, inside.to(_C.int64)) \
            .unsqueeze(1)
        if mode == "max":
            neg = _zeros_like(rows) - math.inf
            m = None
            if _C._has_data(bag):
                # eager: the bags padded to the longest, [bags, longest, dim]
                bags = [[] for _ in range(nb)]
                for k, (g, ok) in enumerate(zip(bag.tolist(), inside.tolist())):
                    if ok:
                        bags[g].append(k)
                longest = max(len(g) for g in bags)
                if longest:
                    from .. import tensor
                    at = tensor([g + [0] * (longest - len(g)) for g in bags], dtype=_C.int64)
                    ok = tensor([[True] * len(g) + [False] * (longest - len(g)) for g in bags])
                    m = _C.where(ok.unsqueeze(2), rows.index_select(0, at.reshape(-1))
                                 .reshape(nb, longest, dim),
                                 neg.narrow(0, 0, 1).unsqueeze(0)).max(1).values
            if m is None:
                # traced (or every bag empty): a [bags, positions, dim] mask
                # over all positions; the same maximum, and the same (first)
                # position gets its gradient
                member = (bag0.unsqueeze(0) == arange(nb).unsqueeze(1)).logical_and(inside)
                m = _C.where(member.unsqueeze(2), rows.unsqueeze(0), neg.unsqueeze(0)) \
                    .max(1).values if total else _C.zeros(nb, dim, dtype=rows.dtype)
            return _C.where(counts > 0, m, _zeros_like(m))
        # each bag's rows added in order, as PyTorch's kernel
        out = _C.zeros(nb, dim, dtype=rows.dtype).index_add(
            0, bag0, _C.where(inside.unsqueeze(1), rows, _zeros_like(rows)))
    if mode == "mean":
        out = out / counts.clamp_min(1).to(out.dtype)
    return out


# ---- CTC

def _lse(terms, neginf):
    """log(sum(exp(terms))) as PyTorch's CTC kernel computes it: the largest
    term m taken out (0 where all are -inf), log(sum exp(x - m)) + m.  The
    all -inf case is a constant branch, so no NaN reaches the gradient."""
    m = terms[0]
    for x in terms[1:]:
        m = m.maximum(x)
    m = m.detach()
    dead = m == -math.inf
    m = _C.where(dead, _zeros_like(m), m)
    u = (terms[0] - m).exp()
    for x in terms[1:]:
        u = u + (x - m).exp()
    u = _C.where(dead, _zeros_like(u) + 1, u)
    return _C.where(dead, neginf, u.log() + m)


def _lengths(v, n, what):
    from .. import tensor
    if isinstance(v, _C.Tensor):
        t = v.reshape(-1).to(_C.int64)
    else:
        t = tensor([int(e) for e in (v if isinstance(v, (list, tuple)) else [v])],
                   dtype=_C.int64)
    if t.numel() != n:
        raise RuntimeError(f"{what} must be of size batch_size")
    return t


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification: -log of the total probability
    of the alignments of each target, by the forward (alpha) recursion over
    the blank-extended target in log space, as PyTorch's CPU kernel (its
    order of operations); autograd differentiates the recursion.  Like
    PyTorch's, the gradient with respect to log_probs has exp(log_probs)
    added at each step before the input's length (so that through a
    log_softmax it is the usual softmax - posterior): a term of value 0.
    'mean' divides each loss by its target length, then averages."""
    from .. import arange, cat, stack
    reduction = _check_reduction(reduction)
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if unbatched and targets.dim() == 1:
        targets = targets.unsqueeze(0)
    steps, n, classes = lp.shape
    if blank < 0 or blank >= classes:
        raise RuntimeError("blank must be in label range")
    il = _lengths(input_lengths, n, "input_lengths")
    tl = _lengths(target_lengths, n, "target_lengths")
    targets = targets.to(_C.int64)
    if targets.dim() == 1:
        # concatenated targets: cut at the target lengths (read on the host)
        lens = [int(v) for v in tl.tolist()]
        if targets.size(0) != sum(lens):
            raise RuntimeError(f"Expected tensor to have size {sum(lens)} at dimension 0, but "
                               f"got size {targets.size(0)} for argument #2 'targets' (while "
                               "checking arguments for ctc_loss_cpu)")
        width = max(lens + [0])
        rows, at = [], 0
        for k in lens:
            row = targets.narrow(0, at, k)
            if k < width:
                row = cat([row, row.new_full((width - k,), blank)])
            rows.append(row)
            at += k
        targets = stack(rows) if rows else targets.reshape(0, 0)
    smax = targets.size(1)
    if tl.numel() and _any(tl > smax):
        bad = int(tl.max().item())
        raise RuntimeError(f"Expected tensor to have size at least {bad} at dimension 1, but got "
                           f"size {smax} for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_cpu)")
    if il.numel() and _any(il > steps):
        bad = int(il.max().item())
        raise RuntimeError(f"Expected input_lengths to have value at most {steps}, but got value "
                           f"{bad} (while checking arguments for ctc_loss_cpu)")
    # the extended target: blank, l1, blank, l2, ..., blank (padding as blank)
    width = 2 * smax + 1
    tgt = _C.where(arange(smax).unsqueeze(0) < tl.unsqueeze(1), targets,
                   targets * 0 + blank)
    ext = cat([stack([tgt * 0 + blank, tgt], 2).reshape(n, 2 * smax),
               tl.unsqueeze(1) * 0 + blank], 1)
    # the skip from s - 2 is allowed onto a label that differs from the one before
    skip = (ext != blank).logical_and(
        ext != cat([ext.narrow(1, 0, 2) * 0 + blank, ext.narrow(1, 0, width - 2)], 1)
        if width > 2 else ext != ext)
    neginf = _C.zeros(n, width, dtype=lp.dtype) - math.inf
    pos = arange(width).unsqueeze(0)
    lpe = [lp[t].gather(1, ext) for t in range(steps)]  # [N, width] per step
    start = (pos == 0).logical_or((pos == 1).logical_and(tl.unsqueeze(1) > 0))
    alpha = _C.where(start, lpe[0], neginf) if steps else neginf
    for t in range(1, steps):
        prev1 = cat([neginf.narrow(1, 0, 1), alpha.narrow(1, 0, width - 1)], 1)
        prev2 = cat([neginf.narrow(1, 0, 2), alpha.narrow(1, 0, width - 2)], 1) \
            if width > 2 else neginf
        prev2 = _C.where(skip, prev2, neginf)
        new = _lse([alpha, prev1, prev2], neginf) + lpe[t]
        alpha = _C.where((il > t).unsqueeze(1), new, alpha)
    last = alpha.gather(1, (2 * tl).unsqueeze(1)).squeeze(1)
    before = alpha.gather(1, (2 * tl - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
    before = _C.where(tl > 0, before, neginf[:, 0])
    nll = -_lse([last, before], neginf[:, 0])
    # no input steps: probability 1 for the empty target, else 0
    empty = _C.where(tl == 0, _zeros_like(nll), _zeros_like(nll) - math.inf)
    nll = _C.where(il == 0, -empty, nll)
    # PyTorch's gradient adds exp(log_probs) for t < input_length: e - e.detach()
    active = (arange(steps).unsqueeze(1) < il.unsqueeze(0)).unsqueeze(2)
    e = lp.exp()
    nll = nll + _C.where(active, e - e.detach(), _zeros_like(e)).sum((0, 2))
    if zero_infinity:
        nll = _C.where(nll == math.inf, _zeros_like(nll), nll)
    if reduction == "none":
        return nll.squeeze(0) if unbatched else nll
    if reduction == "mean":
        return (nll / tl.clamp_min(1).to(nll.dtype)).mean()
    return nll.sum()
