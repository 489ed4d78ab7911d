"""PyTorch's legacy constructor and default-dtype query."""
from . import _C

_Tensor = _C.Tensor
# the extension's own constructor, if it has one (for subclasses such as
# nn.Parameter); the legacy forms below apply to Tensor itself only
_base_new = _Tensor.__dict__.get("__new__")


def get_default_dtype():
    """The dtype of tensors made from Python floats: jitgrad.float32 (it
    cannot be changed)."""
    return _C.float32


def _tensor_new(cls, *args, **kwargs):
    """Tensor(data) / Tensor(*sizes), PyTorch's legacy constructor: a float32
    tensor with data's values (lists, tuples, numbers... not ints alone), or
    of the given sizes (filled with zeros: PyTorch leaves them uninitialized).
    """
    if cls is not _Tensor:
        if _base_new is not None:
            return _base_new(cls, *args, **kwargs)
        raise TypeError(f"{cls.__name__}() cannot be constructed through Tensor.__new__")
    if kwargs:
        bad = [k for k in kwargs if k != "device"]
        if bad:
            raise TypeError(f"new() received an invalid combination of arguments - got an "
                            f"unexpected keyword argument '{bad[0]}'")
        if kwargs.get("device") is not None:
            _C.zeros(0, device=kwargs["device"])  # the same device check as elsewhere
    if not args:
        return _C.zeros(0)
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
        return _C.zeros(*args)
    if len(args) == 1:
        a = args[0]
        if isinstance(a, _Tensor):  # an alias, whatever its dtype (PyTorch's too)
            return a.detach()
        if isinstance(a, (int, float, bool)):
            raise TypeError("new(): data must be a sequence (got "
                            f"{type(a).__name__})")
        return _C.tensor(a, dtype=_C.float32)
    raise TypeError("new() received an invalid combination of arguments - got "
                    f"({', '.join(type(a).__name__ for a in args)})")


_Tensor.__new__ = _tensor_new
