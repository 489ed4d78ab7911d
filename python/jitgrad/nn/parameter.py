"""nn.Parameter: a Tensor subclass that Modules register as a parameter."""
from .. import _C
from .._C import Tensor


class Parameter(Tensor):
    """A leaf tensor that shares data's storage (PyTorch's Parameter); results
    of ops on it are plain Tensors, as in PyTorch."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.zeros(0)
        return _C._make_subclass(cls, data, bool(requires_grad))

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result
