"""In-place tensor methods (x.exp_(), x.relu_(), x.pow_(2), x.eq_(y) ...).

Each one computes the out-of-place result and writes it into self with
copy_, so every rule copy_ enforces holds for them too: a leaf that requires
grad (or a view of one) is refused, self's version goes up once, a view's
base gets the new values, and autograd sees self's new value as a function
of its old one.  The node on self is CopyBackwards where PyTorch names the
op's own node (ExpBackward0, ...): the gradients are the same.

When autograd records the op and it saves its input, the op reads a clone
of self: writing self afterwards would otherwise make the saved value stale
and backward would fail where PyTorch's in-place op succeeds.
"""

from . import _C

# ops whose backward reads only their output (or nothing): they can read self directly
_SAVES_OUTPUT_ONLY = frozenset(("exp", "tanh", "sigmoid", "sqrt", "relu", "expm1", "rsqrt",
                                "reciprocal", "tan", "floor", "ceil", "trunc", "round", "frac",
                                "sign", "sgn"))

# comparisons write a bool result, which copies into any dtype
_COMPARISONS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))

def _kind(dtype):
    """0 bool, 1 integer, 2 floating: an in-place result may not go down."""
    if dtype == _C.bool:
        return 0
    return 2 if dtype.is_floating_point else 1


def _type_name(dtype):
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
            "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(str(dtype).replace("jitgrad.", ""), str(dtype))


def _records(self, args, kwargs):
    if not _C.is_grad_enabled():
        return False
    if self.requires_grad:
        return True
    return any(isinstance(a, _C.Tensor) and a.requires_grad
               for a in list(args) + list(kwargs.values()))


def _inplace(name):
    op = getattr(_C.Tensor, name)

    def method(self, *args, **kwargs):
        src = self
        if _records(self, args, kwargs) and (name not in _SAVES_OUTPUT_ONLY or args or kwargs):
            src = self.clone()
        result = op(src, *args, **kwargs)
        if name not in _COMPARISONS and _kind(result.dtype) > _kind(self.dtype):
            raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the "
                               f"desired output type {_type_name(self.dtype)}")
        if tuple(result.shape) != tuple(self.shape):
            raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the "
                               f"broadcast shape {list(result.shape)}")
        return self.copy_(result)

    method.__name__ = name + "_"
    method.__qualname__ = "Tensor." + name + "_"
    method.__doc__ = f"{name}_(...) -> self: {name} in place (copy_ of the result into self)."
    return method


# in-place form of every out-of-place method that has one in PyTorch
_NAMES = ("abs", "cos", "cumsum", "erf", "exp", "log", "neg", "pow", "relu", "sigmoid", "sin",
          "sqrt", "square", "tanh", "tril", "triu", "eq", "ne", "lt", "le", "gt", "ge",
          "logical_and", "logical_or", "logical_xor", "logical_not", "baddbmm",
          "floor", "ceil", "trunc", "round", "frac", "sign", "sgn", "log1p", "expm1", "log2",
          "log10", "rsqrt", "reciprocal", "sinh", "cosh", "tan", "asin", "acos", "atan", "erfc",
          "atan2", "addcmul", "addcdiv", "lerp")

# PyTorch's alias spellings
_ALIASES = {"absolute": "abs", "negative": "neg", "multiply": "mul", "divide": "div",
            "true_divide": "div", "subtract": "sub", "not_equal": "ne", "greater": "gt",
            "greater_equal": "ge", "less": "lt", "less_equal": "le", "fix": "trunc",
            "arcsin": "asin", "arccos": "acos", "arctan": "atan", "arctan2": "atan2"}


def install(tensor_type):
    for name in _NAMES:
        if hasattr(tensor_type, name) and not hasattr(tensor_type, name + "_"):
            setattr(tensor_type, name + "_", _inplace(name))
    for alias, name in _ALIASES.items():
        if hasattr(tensor_type, name + "_") and not hasattr(tensor_type, alias + "_"):
            setattr(tensor_type, alias + "_", getattr(tensor_type, name + "_"))
