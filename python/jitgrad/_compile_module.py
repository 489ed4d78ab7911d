"""compile(module): PyTorch 2's OptimizedModule, a Module wrapping the
original (`_orig_mod`) whose calls run the module's __call__ compiled.
Attributes it lacks are the original's (so `m.generate(...)`,
`m.configure_optimizers(...)` work), its state_dict keys start with
`_orig_mod.` as PyTorch's do, and train()/eval() reach the original
through the submodule."""
from .nn.modules import Module


class OptimizedModule(Module):
    """A module whose calls run compiled (what compile(module) returns)."""

    def __init__(self, mod, compiler):
        super().__init__()
        self._orig_mod = mod  # a submodule: parameters, state_dict, train/eval
        # an instance attribute, not a submodule: Module.__call__ calls it
        object.__setattr__(self, "forward", compiler(mod.__call__))

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)
