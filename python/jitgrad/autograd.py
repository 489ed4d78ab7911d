"""jitgrad.autograd: grad() and Function (custom differentiable functions).

Function.apply(*args) goes to the C library's jg_apply: every tensor
argument is one input slot (the same tensor twice is two slots, whose
gradients the library sums), non-tensor arguments are passed to forward as
they are and guarded on by value in compiled code.
"""
from . import _C
from ._C import FunctionCtx  # noqa: F401


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=False, is_grads_batched=False):
    return _C._grad(outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs,
                    allow_unused, is_grads_batched)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    if isinstance(tensors, _C.Tensor):
        tensors, grad_tensors = [tensors], [grad_tensors]
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        last = i == len(tensors) - 1
        t.backward(g, retain_graph=retain_graph if last else True, create_graph=create_graph)


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads);
    call with Subclass.apply(*args)."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method.")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    vjp = backward  # PyTorch's other name for backward; a subclass defines one of them

    @classmethod
    def _backward_fn(cls):
        """The static method that computes the gradients (called by the library)."""
        has_backward = cls.backward is not Function.backward
        has_vjp = cls.vjp is not Function.vjp
        if has_backward and has_vjp:
            raise RuntimeError("Implementing both 'backward' and 'vjp' for a custom Function is "
                               "not allowed. You should only implement one of them.")
        return cls.vjp if has_vjp else cls.backward

    @classmethod
    def apply(cls, *args, **kwargs):
        if kwargs:
            raise TypeError("jitgrad: Function.apply takes positional arguments only (as in "
                            "PyTorch)")
        return _C._function_apply(cls, args)


class function:  # torch.autograd.function.FunctionCtx lives here in PyTorch
    FunctionCtx = FunctionCtx
    Function = Function
