"""clip_grad_norm_ in PyTorch 1.13's order of operations: the norm of the
per-parameter norms, then every gradient scaled by min(1, max_norm / (total
+ 1e-6)) (always multiplied, as PyTorch does)."""
import math

from ... import _C
from ..._C import Tensor
from .._util import no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if len(grads) == 0:
        return _C.tensor(0.0)
    with no_grad():
        if norm_type == math.inf:
            norms = [g.abs().max() for g in grads]
            total_norm = norms[0]
            for n in norms[1:]:
                total_norm = _C.where(total_norm >= n, total_norm, n)
        else:
            norms = [_vector_norm(g, norm_type) for g in grads]
            acc = None
            for n in norms:
                t = _pow(n, norm_type)
                acc = t if acc is None else acc + t
            total_norm = _pow(acc, 1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(total_norm.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               "`parameters` is non-finite, so it cannot be clipped. To disable "
                               "this error and scale the gradients by the non-finite norm anyway, "
                               "set `error_if_nonfinite=False`")
        clip_coef = max_norm / (total_norm + 1e-6)
        clip_coef_clamped = clip_coef.masked_fill(clip_coef > 1.0, 1.0)
        for g in grads:
            g.mul_(clip_coef_clamped.to(g.dtype))
    return total_norm


def _pow(t, p):
    return t if p == 1.0 else (t.square() if p == 2.0 else t.pow(p))


def _vector_norm(g, p):
    if p == 2.0:
        return g.square().sum().sqrt()
    if p == 1.0:
        return g.abs().sum()
    return g.abs().pow(p).sum().pow(1.0 / p)


def clip_grad_value_(parameters, clip_value):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    clip_value = float(clip_value)
    with no_grad():
        for p in parameters:
            if p.grad is not None:
                g = p.grad
                g.copy_(g.masked_fill(g > clip_value, clip_value)
                        .masked_fill(g < -clip_value, -clip_value))


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """The deprecated name older scripts call (PyTorch's warning, then
    clip_grad_norm_)."""
    import warnings
    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of "
                  "torch.nn.utils.clip_grad_norm_.", stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)
