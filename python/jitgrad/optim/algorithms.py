"""SGD, Adam, AdamW, Adagrad, RMSprop and Adadelta with torch.optim's arguments,
checks and state; the arithmetic is the C library's (PyTorch 1.13's
single-tensor formulas in the same order)."""
import jitgrad

from .optimizer import Optimizer, required


def _no_cuda_options(name, group):
    if group.get("capturable"):
        raise NotImplementedError(f"jitgrad: {name}(capturable=True) is not supported")
    if group.get("fused"):
        raise NotImplementedError(f"jitgrad: {name}(fused=True) is not supported")


def _steps_as_int(sd):
    """A state_dict with each tensor 'step' made an int (the optimizers
    whose PyTorch 1.13 counts in Python ints)."""
    sd["state"] = {
        k: ({**v, "step": int(v["step"].item())} if isinstance(v.get("step"), jitgrad.Tensor)
            else v)
        for k, v in sd["state"].items()
    }
    return sd


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum (torch.optim.SGD)."""

    _kind = "sgd"
    _state_names = ("momentum_buffer",)

    def __init__(
        self,
        params,
        lr=required,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        differentiable=False,
    ):
        if lr is not required and lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
            maximize=maximize,
            foreach=foreach,
            differentiable=differentiable,
        )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _store_state(self, state, values):
        # PyTorch records the buffer (None without momentum) after each step
        state["momentum_buffer"] = values[0]


class Adam(Optimizer):
    """Adam (torch.optim.Adam)."""

    _kind = "adam"
    _state_names = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
        fused=False,
    ):
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
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            maximize=maximize,
            foreach=foreach,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
        )
        super().__init__(params, defaults)

    def _check_group(self, group):
        super()._check_group(group)
        _no_cuda_options(type(self).__name__, group)


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW)."""

    _kind = "adamw"

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
        foreach=None,
        capturable=False,
    ):
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
        defaults = dict(
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            amsgrad=amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
        )
        Optimizer.__init__(self, params, defaults)


class Adagrad(Optimizer):
    """Adagrad (torch.optim.Adagrad); state is created with the optimizer."""

    _kind = "adagrad"
    _state_names = ("step", "sum")

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
    ):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= lr_decay:
            raise ValueError("Invalid lr_decay value: {}".format(lr_decay))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                "Invalid initial_accumulator_value value: {}".format(initial_accumulator_value)
            )
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        defaults = dict(
            lr=lr,
            lr_decay=lr_decay,
            eps=eps,
            weight_decay=weight_decay,
            initial_accumulator_value=initial_accumulator_value,
            foreach=foreach,
            maximize=maximize,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_group_state(group, p, self.state[p])

    def _init_group_state(self, group, p, state):
        state["step"] = jitgrad.tensor(0.0)
        state["sum"] = jitgrad.full(
            tuple(p.shape), group["initial_accumulator_value"], dtype=p.dtype
        )


class RMSprop(Optimizer):
    """RMSprop (torch.optim.RMSprop).  state_dict() saves 'step' as an int,
    as PyTorch 1.13 does; opt.state holds the count in a tensor."""

    _kind = "rmsprop"
    _state_names = ("step", "square_avg", "momentum_buffer", "grad_avg")

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= momentum:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        if not 0.0 <= alpha:
            raise ValueError("Invalid alpha value: {}".format(alpha))
        defaults = dict(
            lr=lr,
            momentum=momentum,
            alpha=alpha,
            eps=eps,
            centered=centered,
            weight_decay=weight_decay,
            foreach=foreach,
            maximize=maximize,
            differentiable=differentiable,
        )
        super().__init__(params, defaults)

    def state_dict(self):
        """As Optimizer.state_dict, with each 'step' an int: PyTorch 1.13
        saves RMSprop's count as one.  (opt.state keeps it in a 0-d float32
        tensor, as Adam's, so that a compiled step can count.)"""
        return _steps_as_int(super().state_dict())


class Adadelta(Optimizer):
    """Adadelta (torch.optim.Adadelta); state square_avg and acc_delta, and
    'step' saved as an int by state_dict(), as PyTorch 1.13 does."""

    _kind = "adadelta"
    _state_names = ("step", "square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= rho <= 1.0:
            raise ValueError("Invalid rho value: {}".format(rho))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach)
        super().__init__(params, defaults)

    def state_dict(self):
        """As Optimizer.state_dict, with each 'step' an int (PyTorch 1.13's
        Adadelta counts in an int)."""
        return _steps_as_int(super().state_dict())
