"""Docstrings for the Python-level callables that have none: functions that
forward to a Tensor method get that method's text, the rest a pointer to
PyTorch's documentation of the same name (jitgrad keeps its signatures)."""
import inspect

_GENERIC = ("As PyTorch's {name} (same signature and results; see docs/python.md for what "
            "jitgrad supports).")

_OWN = {
    "no_grad": "Context manager and decorator: operations inside record no history.",
    "enable_grad": "Context manager and decorator: operations inside record history again.",
    "set_grad_enabled": "set_grad_enabled(mode): turns history recording on or off (at once, "
                        "and as a context manager or decorator, restored on exit).",
    "is_tensor": "is_tensor(obj) -> bool: whether obj is a jitgrad Tensor.",
    "cpu": "cpu() -> Tensor: self (jitgrad runs on the CPU only).",
    "device": "device(type='cpu'): the only device, kept so that device= arguments read like "
              "PyTorch's.",
    "Tensor": "A tensor: an n-dimensional array of float32, float64, int64, int32 or bool "
              "computed by the jitgrad C library, with autograd (requires_grad, backward, "
              "grad).  Tensor(data) / Tensor(*sizes) is PyTorch's legacy float32 "
              "constructor.",
    "dtype": "A tensor element type: jitgrad.float32, float64, int64, int32, bool.",
}


def _fill(obj, name, qual):
    if (getattr(obj, "__doc__", None) or "").strip():
        return
    text = _OWN.get(name)
    if text is None:
        method = getattr(_tensor, name, None)
        mdoc = (getattr(method, "__doc__", None) or "").strip() if method else ""
        if inspect.isfunction(obj) and mdoc:
            text = f"{name}(input, *args, **kwargs): input.{name}(*args, **kwargs).\n\n{mdoc}"
        else:
            text = _GENERIC.format(name=qual)
    try:
        obj.__doc__ = text
    except (AttributeError, TypeError):  # C callables keep theirs (see csrc/docs_io.c)
        pass


def apply(*modules):
    """Gives every public callable of the modules (and their classes'
    public methods) a docstring."""
    for mod in modules:
        for name in dir(mod):
            if name.startswith("_"):
                continue
            obj = getattr(mod, name)
            if not callable(obj) or inspect.ismodule(obj):
                continue
            qual = f"torch.{mod.__name__.partition('.')[2]}.{name}".replace("torch..", "torch.")
            _fill(obj, name, qual)
            if inspect.isclass(obj) and getattr(obj, "__module__", "").startswith("jitgrad"):
                for mname, m in vars(obj).items():
                    if not mname.startswith("_") and inspect.isfunction(m):
                        _fill(m, mname, f"{qual}.{mname}")


_tensor = None


def install():
    global _tensor
    import jitgrad

    _tensor = jitgrad.Tensor
    mods = [jitgrad, jitgrad.autograd]
    for sub in ("nn", "nn.functional", "nn.init", "optim", "utils.data", "cuda", "backends"):
        m = jitgrad
        for part in sub.split("."):
            m = getattr(m, part, None)
        if m is not None and inspect.ismodule(m):
            mods.append(m)
    apply(*mods)
