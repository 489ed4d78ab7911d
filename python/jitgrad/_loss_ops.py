"""torch.* names of the distance and loss ops (torch.pdist,
torch.margin_ranking_loss, ...): ATen's signatures, the reduction as its
enum 0 / 1 / 2 (none / mean / sum), over the nn.functional compositions."""

from .nn import _functional_loss as _L
from .nn.functional import cosine_similarity  # noqa: F401

__all__ = [
    "cosine_similarity", "pairwise_distance", "pdist", "bilinear", "margin_ranking_loss",
    "hinge_embedding_loss", "poisson_nll_loss", "cosine_embedding_loss", "triplet_margin_loss",
    "ctc_loss",
]

pairwise_distance = _L.pairwise_distance
pdist = _L.pdist
bilinear = _L.bilinear


def _enum(reduction):
    names = {0: "none", 1: "mean", 2: "sum"}
    if reduction not in names:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return names[reduction]


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _L.margin_ranking_loss(input1, input2, target, margin, reduction=_enum(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _L.hinge_embedding_loss(input, target, margin, reduction=_enum(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _L.poisson_nll_loss(input, target, log_input, full, eps=eps,
                               reduction=_enum(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _L.cosine_embedding_loss(input1, input2, target, margin, reduction=_enum(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        reduction=1):
    return _L.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                  reduction=_enum(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1,
             zero_infinity=False):
    return _L.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                       _enum(reduction), zero_infinity)
