"""jitgrad.autograd: grad() and Function (custom differentiable functions).

Function.apply(*args) goes to the C library's jg_apply: every tensor
argument is one input slot (the same tensor twice is two slots, whose
gradients the library sums), non-tensor arguments are passed to forward as
they are and guarded on by value in compiled code.
"""
import functools
import sys
import types

from . import _C
from ._C import FunctionCtx  # noqa: F401


class _no_grad:
    def __enter__(self):
        self._prev = _C._set_grad_enabled(False)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)


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


class _OnceDifferentiableError(Function):
    """PyTorch's DelayedError node: what a once_differentiable backward
    returns when its result would get history.  Its outputs are copies of
    detached leaves (so nothing before them is reached); differentiating
    them raises the message.  Its grad_fn shows as PyTorch's `Error`."""

    @staticmethod
    def forward(ctx, *values):
        outs = tuple(None if v is None else v.clone() for v in values)
        return outs if len(outs) != 1 else outs[0]

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def once_differentiable(fn):
    """Decorates a custom Function's backward that is not itself
    differentiable: it runs without grad mode, and when its gradients would
    need history (create_graph with gradients that require grad) they come
    back through a node whose backward raises "trying to differentiate twice
    a function that was marked with @once_differentiable" (PyTorch's)."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with _no_grad():
            outputs = fn(ctx, *args)
        if not _C.is_grad_enabled():
            return outputs
        if not any(isinstance(a, _C.Tensor) and a.requires_grad for a in args):
            return outputs
        if not isinstance(outputs, tuple):
            outputs = (outputs,)

        def fake_requires_grad(v):
            if v is not None:
                v = v.detach()
                v.requires_grad = True
            return v
        return _OnceDifferentiableError.apply(*[fake_requires_grad(v) for v in outputs])
    wrapper._jitgrad_once_differentiable = True  # (compiled: the call is opaque, function.c)
    return wrapper


function = types.ModuleType(__name__ + ".function",
                            "torch.autograd.function's names: FunctionCtx, Function, "
                            "once_differentiable")
function.FunctionCtx = FunctionCtx
function.Function = Function
function.once_differentiable = once_differentiable
sys.modules[function.__name__] = function  # from jitgrad.autograd.function import ...
