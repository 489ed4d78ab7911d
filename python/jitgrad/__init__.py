"""jitgrad: tensors, reverse-mode autograd, custom differentiable functions
and a tracing compiler, with PyTorch's names (see docs/python.md).

Everything computes in the C library through the extension jitgrad._C; this
file only arranges names, context managers and printing.
"""
import builtins as _builtins
import functools as _functools
import shutil as _shutil

from . import _C
from . import _tensor_str
from ._tensor_str import set_printoptions  # noqa: F401
from ._C import (  # noqa: F401
    Tensor,
    dtype,
    float32,
    float64,
    int64,
    int32,
    bool,
    tensor,
    from_numpy,
    randn,
    rand,
    zeros,
    ones,
    full,
    zeros_like,
    ones_like,
    randn_like,
    rand_like,
    arange,
    is_grad_enabled,
    set_num_threads,
    get_num_threads,
    memory_allocated,
    max_memory_allocated,
    reset_peak_memory_stats,
)

float = float32  # noqa: A001  (PyTorch's aliases)
double = float64
long = int64
int = int32  # noqa: A001


class _UnsupportedDtype:
    """A PyTorch dtype name jitgrad has no kernels for: using it raises."""

    __slots__ = ("_unsupported_dtype",)

    def __init__(self, name):
        self._unsupported_dtype = name

    def __repr__(self):
        return f"jitgrad.{self._unsupported_dtype}"


float16 = half = _UnsupportedDtype("float16")
bfloat16 = _UnsupportedDtype("bfloat16")
Size = tuple


def manual_seed(seed):
    """Seeds jitgrad's generator (a counter-based SplitMix64: the same seed
    gives the same numbers on every machine, but not PyTorch's numbers)."""
    _C.manual_seed(_builtins.int(seed))


class device:
    """Only the CPU exists; kept so that `device=` arguments and `x.device`
    read like PyTorch's."""

    def __init__(self, type="cpu", index=None):
        type = str(type)
        if type.split(":")[0] != "cpu":
            raise RuntimeError(f"jitgrad runs on the CPU only: device '{type}' is not available")
        self.type = "cpu"
        self.index = index

    def __repr__(self):
        return "device(type='cpu')"

    def __str__(self):
        return "cpu"

    def __eq__(self, other):
        return str(other) == "cpu"

    def __hash__(self):
        return hash("cpu")


_cpu = device("cpu")


class _GradMode:
    """Base of no_grad / enable_grad: a context manager and a decorator."""

    _mode = True

    def __enter__(self):
        self._prev = _C._set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    _mode = False


class enable_grad(_GradMode):
    _mode = True


class set_grad_enabled(_GradMode):
    def __init__(self, mode):
        self._mode = _builtins.bool(mode)
        self._prev = _C._set_grad_enabled(self._mode)  # takes effect at once, like PyTorch's

    def __enter__(self):
        return self

    def __call__(self, fn):
        _C._set_grad_enabled(self._prev)
        mode = self._mode

        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class _GradFn:
    """What `x.grad_fn` returns: the node that made x, of a class named after
    it as in PyTorch (`type(y.grad_fn).__name__ == "MulBackward0"`)."""

    __slots__ = ()
    _name = "_GradFn"

    def name(self):
        return self._name

    def __repr__(self):
        return f"<{self._name} object>"


_grad_fn_classes = {}


def _grad_fn(self):
    n = self._grad_fn_name
    if n is None:
        return None
    cls = _grad_fn_classes.get(n)
    if cls is None:
        # PyTorch's hand-written nodes answer name() with their C++ name
        full = "torch::autograd::" + n if n == "CopySlices" else n
        shown = n
        if n == "_OnceDifferentiableErrorBackward":  # autograd.once_differentiable's node
            shown, full = "Error", "torch::autograd::Error"
        cls = _grad_fn_classes[n] = type(shown, (_GradFn,), {"__slots__": (), "_name": full})
    return cls()


def _iter(self):
    if self.dim() == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(len(self)))


def _fill_(self, value):
    """fill_(value) -> Tensor

    Fills self with value (a number or a 0-d tensor), in place, as
    ``self.copy_(value)`` would: the old values get no gradient."""
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.dim()} dimensions.")
    else:
        value = _C.tensor(value, dtype=self.dtype)
    self.copy_(value)
    return self


Tensor.fill_ = _fill_
Tensor.__repr__ = _tensor_str.tensor_repr
Tensor.__str__ = _tensor_str.tensor_repr
Tensor.__format__ = _tensor_str.tensor_format
Tensor.__iter__ = _iter
Tensor.grad_fn = property(_grad_fn)
Tensor.device = property(lambda self: _cpu)
Tensor.T = property(lambda self: self.permute(*reversed(range(self.dim()))))
Tensor.__array_priority__ = 1000  # numpy scalars on the left defer to Tensor


def cpu(self):
    return self


Tensor.cpu = cpu
Tensor.cuda = lambda self, *a, **k: (_ for _ in ()).throw(
    RuntimeError("jitgrad runs on the CPU only: device 'cuda' is not available")
)


# ---- functions with PyTorch's names (each one Tensor method call) ----


def _method(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    return fn


for _name in (
    "exp", "log", "tanh", "sigmoid", "relu", "abs", "sqrt", "neg", "sum", "mean", "max",
    "softmax", "log_softmax", "reshape", "t", "transpose", "permute", "detach", "clone",
    "matmul", "mm", "add", "sub", "mul", "div", "pow", "square", "flatten", "squeeze",
    "unsqueeze", "numel", "is_floating_point", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_xor", "logical_not", "any", "all", "masked_fill",
):
    globals()[_name] = _method(_name)
del _name


# ---- opsmath ----
from ._C import var_mean, pow  # noqa: E402,F401,A004



def _opsmath_fn(name):
    def fn(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(input).__name__}")
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name}(input, ...): input.{getattr(Tensor, name).__doc__}"
    return fn


for _name in (
    "sin", "cos", "erf", "clamp", "clip", "clamp_min", "clamp_max", "maximum", "minimum", "prod",
    "var", "std", "norm", "cumsum", "argmax", "argmin", "topk", "sort",
):
    globals()[_name] = _opsmath_fn(_name)
del _name
# ---- surface2 ----
from ._C import std_mean  # noqa: E402,F401
for _name in ("min", "amax", "amin"):
    globals()[_name] = _opsmath_fn(_name)
del _name
from ._generator import Generator, bernoulli  # noqa: E402
from . import _generator  # noqa: E402

Tensor.normal_ = _generator.normal_
Tensor.uniform_ = _generator.uniform_
Tensor.bernoulli = _generator.bernoulli
Tensor.bernoulli_ = _generator.bernoulli_
# ---- end surface2 ----
# ---- math2 ---- (Tensor methods in csrc/ops_math2.c)
for _name in (
    "floor", "ceil", "trunc", "fix", "round", "frac", "sign", "sgn", "log1p", "expm1", "log2",
    "log10", "rsqrt", "reciprocal", "sinh", "cosh", "tan", "asin", "arcsin", "acos", "arccos",
    "atan", "arctan", "erfc", "atan2", "arctan2", "addcmul", "addcdiv", "lerp",
):
    globals()[_name] = _opsmath_fn(_name)
del _name
# ---- end math2 ----
# casts to the dtypes jitgrad has no kernels for: raise as the names do
Tensor.half = lambda self: self.to(float16)
Tensor.bfloat16 = lambda self: self.to(bfloat16)


def is_tensor(obj):
    return isinstance(obj, Tensor)


# ---- OPS-SHAPE ----
from ._opsshape import (  # noqa: E402,F401
    cat, concat, concatenate, stack, hstack, vstack, split, chunk, narrow, tril, triu,
    index_select, eye, linspace, randint, randperm, multinomial, nonzero, unbind,
)

# ---- word-lm ----
from ._bmm import baddbmm, bmm  # noqa: E402,F401

Tensor.bmm = bmm
Tensor.baddbmm = lambda self, batch1, batch2, *, beta=1, alpha=1: baddbmm(
    self, batch1, batch2, beta=beta, alpha=alpha)
# ---- end word-lm ----

# ---- index ops ---- (gather, scatter, ...: jitgrad/_indexops.py)
from ._indexops import (  # noqa: E402,F401
    gather, scatter, scatter_add, index_add, index_copy, index_fill, masked_select, flip,
    fliplr, flipud, roll, repeat_interleave, isnan, isinf, isfinite, nan_to_num, logsumexp,
    remainder, fmod, floor_divide, argsort, outer, ger, dot, mv, addmm, trace, diag,
)
from . import _indexops  # noqa: E402

_indexops.install(Tensor)
_indexops.install_div(Tensor)
divide = true_divide = div  # noqa: E305 (torch.divide: div's rounding_mode too)

from . import _inplace  # noqa: E402

_inplace.install(Tensor)  # exp_, relu_, pow_, eq_ ...: docs/python.md

from . import _aliases  # noqa: E402

_aliases.install(Tensor, globals())  # greater, movedim, isclose, xlogy ...: docs/python.md

from . import distributed  # noqa: E402,F401


class _RemovableHandle:
    """What register_hook and register_post_accumulate_grad_hook return:
    remove() unhooks."""

    def __init__(self, tensor, hook_id):
        self._tensor, self.id = tensor, hook_id

    def remove(self):
        if self._tensor is not None:
            _C._remove_grad_hook(self._tensor, self.id)
            self._tensor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) runs after a backward accumulated tensor's gradient into
    .grad (a leaf that requires grad); it must return None.  Returns a
    handle whose remove() unregisters it."""
    return _RemovableHandle(self, _C._register_post_accumulate_grad_hook(self, hook))


Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook


def _register_hook(self, hook):
    """hook(grad) runs each time the gradient with respect to this tensor
    is computed (summed over all its uses), before it flows on (into
    grad_fn, or into .grad for a leaf); it returns None or a replacement of
    the same shape and dtype.  Hooks run in registration order.  Returns a
    handle whose remove() unregisters it (PyTorch's Tensor.register_hook)."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    return _RemovableHandle(self, _C._register_tensor_hook(self, hook))


def _retain_grad(self):
    """Keeps a non-leaf's gradient in .grad after backward (accumulating
    over backwards); a no-op on a leaf."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    _C._retain_grad(self)


Tensor.register_hook = _register_hook
Tensor.retain_grad = _retain_grad
Tensor.retains_grad = property(_C._retains_grad, doc="Whether retain_grad() was called on this "
                               "non-leaf tensor.")
from . import autograd  # noqa: E402
from . import nn  # noqa: E402

# ---- nn ----
Tensor._make_subclass = staticmethod(_C._make_subclass)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    """torch.binary_cross_entropy_with_logits: reduction 0 / 1 / 2 (none /
    mean / sum) as ATen's, or its name."""
    return nn.functional.binary_cross_entropy_with_logits(input, target, weight,
                                                          reduction=reduction,
                                                          pos_weight=pos_weight)
# ---- end nn ----

from .autograd import grad as _grad  # noqa: E402,F401

# ---- compile ----

_BACKENDS = {
    None: "auto",
    "inductor": "auto",
    "c": "c",
    "interp": "interp",
    "eager": "interp",
    "aot_eager": "interp",
}


from . import _symint  # noqa: E402,F401  (sizes of traced tensors)

_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")


def compile(fn=None, *, fullgraph=False, backend=None, dynamic=None, mode=None, options=None,
            disable=False, verify=False):
    """Compiles fn (a call, or a decorator with or without arguments).

    The function is traced with symbolic tensors through the C tracer the
    first time it is called and again whenever a guard misses (tensor
    dtype/shape/requires_grad, aliasing among tensor arguments, the value of
    every non-tensor argument).  Tensors it reaches through its scope
    (globals, closure variables, attributes, container elements) are graph
    inputs too: read at every call (in-place updates are seen), guarded the
    same way, and a name bound to another tensor traces again.  Reading a traced tensor's value (bool(),
    item(), tolist(), numpy()) cannot be traced: with fullgraph=True that is
    an error, otherwise the call runs eagerly.  backend: "interp", "c", or
    PyTorch's names ("inductor" -> the fastest available, "eager" and
    "aot_eager" -> "interp").  mode: None or one of PyTorch's, not together
    with options ("default"; "reduce-overhead": each graph keeps its
    intermediate buffers across calls, a replay allocates only its outputs
    and never overwrites one still held; "max-autotune-no-cudagraphs": each graph's first call times
    its schedules and keeps the fastest; "max-autotune": both; results are
    bitwise the same in every mode, see docs/compiler.md "Modes"); an
    unknown mode is an error.  dynamic: None (automatic: tensor dims whose size changed between
    two traces, all from one size to one other, are not traced again per
    size where the graph allows, see docs/compiler.md "Dynamic shapes"),
    True (so from the first call) or False (every new size traces).  A
    program traced for 8 distinct guard sets (JITGRAD_CACHE_SIZE_LIMIT) runs
    further new ones eagerly.
    An nn.Module gives an OptimizedModule (PyTorch 2's): a Module around it
    (`_orig_mod`) whose calls run the module's __call__ compiled.
    """
    if fn is None:
        return lambda f: compile(f, fullgraph=fullgraph, backend=backend, dynamic=dynamic,
                                 mode=mode, options=options, disable=disable, verify=verify)
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can specify, but both can't be specified at "
                           "the same time.")
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if options is not None and not isinstance(options, dict):
        raise TypeError("jitgrad.compile: options must be a dict")
    if disable:
        return fn
    if backend is not None and not isinstance(backend, str):
        raise TypeError("jitgrad.compile: backend must be a string (custom backends are not "
                        "supported)")
    if backend not in _BACKENDS:
        raise ValueError(f"jitgrad.compile: unknown backend {backend!r}; expected one of "
                         "'interp', 'c', 'inductor', 'eager', 'aot_eager'")
    if isinstance(fn, nn.Module):
        from ._compile_module import OptimizedModule
        return OptimizedModule(fn, lambda f: compile(f, fullgraph=fullgraph, backend=backend,
                                                     dynamic=dynamic, mode=mode, verify=verify))
    b = _BACKENDS[backend]
    if b == "auto" and _shutil.which("cc") is None and _shutil.which("gcc") is None:
        b = "interp"
    if dynamic is not None and not isinstance(dynamic, _builtins.bool):
        raise TypeError(f"jitgrad.compile: dynamic must be None, True or False, not "
                        f"{type(dynamic).__name__}")
    compiled = _C.Compiled(fn, b, _builtins.bool(fullgraph), _builtins.bool(verify), dynamic,
                           mode)

    @_functools.wraps(fn)
    def compiled_fn(*args, **kwargs):
        return compiled(*args, **kwargs)

    compiled_fn._jitgrad_compiled = compiled
    return compiled_fn


HAS_COMPILER = _C.HAS_COMPILER


where = _C.where

# ---- optim ----
from . import optim  # noqa: E402
# ---- part IO ----
from .serialization import save, load  # noqa: E402,F401
from ._legacy import get_default_dtype  # noqa: E402,F401
from . import backends, cuda, utils  # noqa: E402,F401
from ._C import from_dlpack  # noqa: E402,F401
from ._loss_ops import *  # noqa: E402,F401,F403
from . import _more_ops  # noqa: E402  (einsum, cdist, cumprod, median ...)
_more_ops.install(Tensor, globals())
from . import _more_utils; _more_utils.install(Tensor, globals())  # noqa: E402,E702 empty, finfo, get_rng_state ...
from . import linalg  # noqa: E402,F401
from . import _more_ops2  # noqa: E402
_more_ops2.install(Tensor, globals())  # bitwise ops, quantile, jitgrad.special ...
from . import _docs  # noqa: E402

_docs.install()  # last: gives the callables above that lack one a docstring
