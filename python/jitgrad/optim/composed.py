"""NAdam, RAdam, Adamax, Rprop and ASGD with torch.optim's arguments, checks
and state.  Their updates are jitgrad tensor ops written in Python, in the
element-wise order of PyTorch 1.13's single-tensor implementations, so the
results agree with torch.optim to rounding.  The scalars PyTorch computes
in Python from a count read with item() are computed the same way here; a
compiled program runs in pieces around those reads (docs/compiler.md,
"Graph breaks")."""
import math

import jitgrad
from jitgrad import _C

from .algorithms import _steps_as_int
from .optimizer import Optimizer, _count_tensor



def _check_betas_lr_eps_wd(lr, betas, eps, weight_decay):
    if not 0.0 <= lr:
        raise ValueError("Invalid learning rate: {}".format(lr))
    if not 0.0 <= eps:
        raise ValueError("Invalid epsilon value: {}".format(eps))
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
    if not 0.0 <= weight_decay:
        raise ValueError("Invalid weight_decay value: {}".format(weight_decay))


def _as_tensor(state, key):
    """A count or scalar saved as a number (older PyTorch) as the 0-d
    float32 tensor PyTorch 1.13 keeps (its __setstate__ does the same)."""
    if not isinstance(state[key], jitgrad.Tensor):
        state[key] = _count_tensor(state[key])
    return state[key]


class _Composed(Optimizer):
    """An optimizer whose update is composed of tensor ops here rather than
    run by the C library's jg_optim_update."""

    # 0-d tensors of the state that older PyTorch saved as numbers
    _scalar_state = ("step",)

    def _update(self, group, p, grad, state):
        raise NotImplementedError

    def load_state_dict(self, state_dict):
        """As Optimizer.load_state_dict; counts and scalars saved as numbers
        (PyTorch before 1.12) become the 0-d float32 tensors 1.13 keeps, as
        its __setstate__ makes them: here, not inside a later step, which
        may be traced."""
        super().load_state_dict(state_dict)
        for state in self.state.values():
            for key in self._scalar_state:
                if key in state:
                    _as_tensor(state, key)

    def step(self, closure=None):
        """Performs a single optimization step; closure, if given,
        re-evaluates the model and returns the loss (run with grad on)."""
        loss = None
        if closure is not None:
            with jitgrad.enable_grad():
                loss = closure()
        todo = [(g, p) for g in self.param_groups for p in g["params"] if p.grad is not None]
        # state made while a program is traced would hold its stand-ins:
        # the step that creates it runs eagerly (outside a program this
        # does nothing)
        if any(not self.state.get(p) for _, p in todo):  # (.get: adds no empty entry)
            _C._graph_break(f"{type(self).__name__}.step() creates the optimizer's state (its "
                            "first step): that call cannot be compiled")
        with jitgrad.no_grad():
            for group, p in todo:
                state = self.state[p]
                if len(state) == 0:
                    self._init_group_state(group, p, state)
                grad = p.grad
                if group.get("maximize"):
                    grad = -grad
                self._update(group, p, grad, state)
        return loss


class NAdam(_Composed):
    """NAdam (torch.optim.NAdam): Adam with Nesterov momentum."""

    _scalar_state = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, foreach=None):
        _check_betas_lr_eps_wd(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError("Invalid momentum_decay value: {}".format(momentum_decay))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, foreach=foreach)
        super().__init__(params, defaults)

    def _init_group_state(self, group, p, state):
        state["step"] = jitgrad.tensor(0.0)
        state["mu_product"] = jitgrad.tensor(1.0)
        state["exp_avg"] = jitgrad.zeros_like(p)
        state["exp_avg_sq"] = jitgrad.zeros_like(p)

    def _update(self, group, param, grad, state):
        beta1, beta2 = group["betas"]
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        momentum_decay = group["momentum_decay"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        mu_product, step_t = _as_tensor(state, "mu_product"), _as_tensor(state, "step")
        step_t.add_(1)
        step = step_t.item()
        bias_correction2 = 1 - beta2**step
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product.mul_(mu)
        # (PyTorch 1.13 multiplies by mu a second time here)
        mu_product_next = mu_product * mu * mu_next
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
        param.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product.item()))
        param.addcdiv_(exp_avg, denom, value=-lr * mu_next / (1.0 - mu_product_next.item()))


class RAdam(_Composed):
    """RAdam (torch.optim.RAdam): Adam with a rectified adaptive learning rate."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None):
        _check_betas_lr_eps_wd(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach)
        super().__init__(params, defaults)

    def _init_group_state(self, group, p, state):
        state["step"] = jitgrad.tensor(0.0)
        state["exp_avg"] = jitgrad.zeros_like(p)
        state["exp_avg_sq"] = jitgrad.zeros_like(p)

    def _update(self, group, param, grad, state):
        beta1, beta2 = group["betas"]
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        step_t = _as_tensor(state, "step")
        step_t.add_(1)
        step = step_t.item()
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_corrected_exp_avg = exp_avg.div(bias_correction1)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            # a number over a tensor: PyTorch's reciprocal, then a product
            adaptive_lr = exp_avg_sq.sqrt().add_(eps).reciprocal().mul(math.sqrt(bias_correction2))
            param.add_(bias_corrected_exp_avg.mul(lr).mul(adaptive_lr).mul(rect), alpha=-1.0)
        else:
            param.add_(bias_corrected_exp_avg.mul(lr), alpha=-1.0)


class Adamax(_Composed):
    """Adamax (torch.optim.Adamax): Adam with the infinity norm."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False):
        _check_betas_lr_eps_wd(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _init_group_state(self, group, p, state):
        state["step"] = jitgrad.tensor(0.0)
        state["exp_avg"] = jitgrad.zeros_like(p)
        state["exp_inf"] = jitgrad.zeros_like(p)

    def _update(self, group, param, grad, state):
        beta1, beta2 = group["betas"]
        lr, weight_decay, eps = group["lr"], group["weight_decay"], group["eps"]
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        step_t = _as_tensor(state, "step")
        step_t.add_(1)
        step = step_t.item()
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        # PyTorch's amax over the stacked pair: the element-wise maximum,
        # NaN propagating as there
        exp_inf.copy_(jitgrad.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        bias_correction = 1 - beta1**step
        clr = lr / bias_correction
        param.addcdiv_(exp_avg, exp_inf, value=-clr)


class Rprop(_Composed):
    """Rprop (torch.optim.Rprop), resilient backpropagation.  state_dict()
    saves 'step' as an int, as PyTorch 1.13 does; opt.state holds the count
    in a tensor so that a compiled step counts too."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None,
                 maximize=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError("Invalid eta values: {}, {}".format(etas[0], etas[1]))
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _init_group_state(self, group, p, state):
        state["step"] = jitgrad.tensor(0.0)
        state["prev"] = jitgrad.zeros_like(p)
        state["step_size"] = jitgrad.full(tuple(p.shape), group["lr"], dtype=p.dtype)

    def _update(self, group, param, grad, state):
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        prev, step_size = state["prev"], state["step_size"]
        _as_tensor(state, "step").add_(1)
        sign = grad.mul(prev).sign()
        # PyTorch's three masked writes, in their order (a NaN stays)
        sign = sign.masked_fill(sign.gt(0), etaplus)
        sign = sign.masked_fill(sign.lt(0), etaminus)
        sign = sign.masked_fill(sign.eq(0), 1)
        step_size.mul_(sign).clamp_(step_size_min, step_size_max)
        grad = grad.masked_fill(sign.eq(etaminus), 0)
        param.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)

    def state_dict(self):
        """As Optimizer.state_dict, with each 'step' an int (PyTorch 1.13's
        Rprop counts in an int)."""
        return _steps_as_int(super().state_dict())


class ASGD(_Composed):
    """Averaged stochastic gradient descent (torch.optim.ASGD)."""

    _scalar_state = ("step", "eta", "mu")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _init_group_state(self, group, p, state):
        state["step"] = jitgrad.tensor(0.0)
        state["eta"] = jitgrad.tensor(group["lr"])
        state["mu"] = jitgrad.tensor(1.0)
        state["ax"] = jitgrad.zeros_like(p)

    def _update(self, group, param, grad, state):
        lambd, lr, t0, alpha = group["lambd"], group["lr"], group["t0"], group["alpha"]
        weight_decay = group["weight_decay"]
        ax = state["ax"]
        step_t, eta, mu = (_as_tensor(state, k) for k in ("step", "eta", "mu"))
        step_t.add_(1)
        step = step_t.item()
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        param.mul_(1 - lambd * eta.item())
        param.add_(grad, alpha=-eta.item())
        if mu.item() != 1:
            ax.add_(param.sub(ax).mul(mu))
        else:
            ax.copy_(param)
        # a float32 tensor of each copied in, as PyTorch: rounded to float32
        # also where a load made eta and mu float64
        eta.copy_(jitgrad.tensor(lr / math.pow((1 + lambd * lr * step), alpha)))
        mu.copy_(jitgrad.tensor(1 / max(1, step - t0)))
