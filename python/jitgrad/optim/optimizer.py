"""The Optimizer base class (torch.optim.Optimizer): parameter groups,
state, zero_grad and state_dict in PyTorch 1.13's layout.  The update of
each parameter runs in the C library (jg_optim_update)."""
from collections import defaultdict
from itertools import chain

import jitgrad
from jitgrad import _C


class _RequiredParameter:
    """Singleton class representing a required parameter for an Optimizer."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(o):
    if isinstance(o, jitgrad.Tensor):
        return "jitgrad.Tensor"
    module = type(o).__module__
    name = type(o).__qualname__
    return name if module in (None, "builtins") else module + "." + name


def _to_jitgrad(value):
    """A jitgrad copy of a tensor: jitgrad's own, or any object NumPy can
    read (a torch.Tensor from torch.optim's state_dict)."""
    if isinstance(value, jitgrad.Tensor):
        return value.detach().clone()
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    import numpy as np

    return jitgrad.from_numpy(np.array(value.numpy() if hasattr(value, "numpy") else value))


def _is_tensor_like(value):
    return isinstance(value, jitgrad.Tensor) or (
        hasattr(value, "numpy") and hasattr(value, "dtype") and hasattr(value, "shape")
    )


def _copy_value(value):
    """A deep copy of a state_dict value, tensors as jitgrad tensors."""
    if _is_tensor_like(value):
        return _to_jitgrad(value)
    if isinstance(value, dict):
        return {k: _copy_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copy_value(v) for v in value)
    return value


def _count_tensor(value):
    """A step count saved as a number (RMSprop's, older PyTorch's Adam) as
    the 0-d float32 tensor the updates count in."""
    return jitgrad.tensor(float(value), dtype=jitgrad.float32)


class Optimizer:
    """Base class for all optimizers (torch.optim.Optimizer).

    params: an iterable of Tensors or of dicts (parameter groups, each with
    its own hyperparameters); defaults: the hyperparameters groups lack."""

    _kind = None  # the C library's name of the algorithm
    _state_names = ()  # the C library's state order

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, jitgrad.Tensor):
            raise TypeError(
                "params argument given to the optimizer should be "
                "an iterable of Tensors or dicts, but got " + _typename(params)
            )
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        format_string = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            format_string += "\n"
            format_string += "Parameter Group {0}\n".format(i)
            for key in sorted(group.keys()):
                if key != "params":
                    format_string += "    {0}: {1}\n".format(key, group[key])
        format_string += ")"
        return format_string

    def add_param_group(self, param_group):
        """Adds a parameter group (a dict with 'params' and any
        hyperparameters to override) to the optimizer."""
        if not isinstance(param_group, dict):
            raise TypeError("param group must be a dict")
        params = param_group["params"]
        if isinstance(params, jitgrad.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but "
                "the ordering of tensors in sets will change between runs. Please use a list "
                "instead."
            )
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, jitgrad.Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is "
                    + _typename(param)
                )
            if not param.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
            if not param.is_floating_point():
                raise ValueError(
                    f"jitgrad optimizers update floating point tensors, got {param.dtype}"
                )
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization parameter "
                    + name
                )
            param_group.setdefault(name, default)
        self._check_group(param_group)
        ids = [id(p) for p in param_group["params"]]
        if len(set(ids)) != len(ids):
            import warnings

            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; "
                "in future, this will cause an error; ",
                stacklevel=3,
            )
        param_set = set()
        for group in self.param_groups:
            param_set.update(id(p) for p in group["params"])
        if not param_set.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def _check_group(self, group):
        """Unsupported options raise here (subclasses)."""
        if group.get("differentiable"):
            raise NotImplementedError(
                f"jitgrad: {type(self).__name__}(differentiable=True) is not supported"
            )

    def zero_grad(self, set_to_none=False):
        """Sets the gradients of all optimized tensors to zero, or to None
        with set_to_none=True (PyTorch 1.13's default is False)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                grad = p.grad
                if grad.grad_fn is not None:
                    grad = grad.detach()
                    p.grad = grad
                else:
                    grad.requires_grad_(False)
                with jitgrad.no_grad():
                    grad.zero_()

    # ---- state: PyTorch's per-parameter dict <-> the C library's list
    def _state_list(self, state):
        values = [state.get(n) for n in self._state_names]
        # a step count set as a number: the count lives in a tensor from now
        # on (loaded state dicts are converted when loaded, outside any
        # compiled program: one made here while tracing would not persist)
        if values and self._state_names[0] == "step" and values[0] is not None:
            if not isinstance(values[0], jitgrad.Tensor):
                values[0] = state["step"] = _count_tensor(values[0])
        return values

    def _store_state(self, state, values):
        for n, v in zip(self._state_names, values):
            if v is not None:
                state[n] = v

    def _init_group_state(self, group, p, state):
        """Called once per parameter before its first update."""

    def step(self, closure=None):
        """Performs a single optimization step; closure, if given,
        re-evaluates the model and returns the loss (run with grad on)."""
        loss = None
        if closure is not None:
            with jitgrad.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    self._init_group_state(group, p, state)
                values = self._state_list(state)
                _C._optim_update(self._kind, p, p.grad, values, group)
                self._store_state(state, values)
        return loss

    def state_dict(self):
        """The optimizer's state as a dict in PyTorch's layout: 'state'
        (per parameter index) and 'param_groups' (hyperparameters and the
        indices of their parameters)."""
        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update(
                {
                    id(p): i
                    for i, p in enumerate(group["params"], start_index)
                    if id(p) not in param_mappings
                }
            )
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {
            (param_mappings[id(k)] if isinstance(k, jitgrad.Tensor) else k): v
            for k, v in self.state.items()
        }
        return {"state": packed_state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Loads a state_dict() (from jitgrad or torch.optim): tensors are
        copied, converted to each parameter's dtype except 'step'."""
        groups = self.param_groups
        saved_groups = _copy_value(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        param_lens = (len(g["params"]) for g in groups)
        saved_lens = (len(g["params"]) for g in saved_groups)
        if any(p_len != s_len for p_len, s_len in zip(param_lens, saved_lens)):
            raise ValueError(
                "loaded state dict contains a parameter group "
                "that doesn't match the size of optimizer's group"
            )
        id_map = {
            old_id: p
            for old_id, p in zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in groups),
            )
        }

        def cast(param, value, key=None):
            if key == "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                return _count_tensor(value)
            if isinstance(value, jitgrad.Tensor):
                if key != "step" and param.is_floating_point():
                    value = value.to(param.dtype)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, key=k) for k, v in value.items()}
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            v = _copy_value(v)
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        for g, ng in zip(groups, saved_groups):
            ng["params"] = g["params"]
            self._check_group(ng)
        self.__setstate__({"state": state, "param_groups": saved_groups})
