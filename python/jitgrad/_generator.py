"""jitgrad.Generator: a random generator of its own (SplitMix64, as the
global one manual_seed seeds), for the generator= keyword of the random
functions.  The same seed gives the same stream (not PyTorch's numbers)."""
import os

from . import _C

_MASK = (1 << 64) - 1
_DEFAULT_SEED = 67280421310721  # PyTorch's initial seed of a new Generator


class Generator:
    """Generator(device='cpu'): manual_seed(seed) (returns self), seed(),
    initial_seed(), get_state() / set_state(state)."""

    def __init__(self, device="cpu"):
        dev = str(device)
        if dev.split(":")[0] != "cpu":
            raise RuntimeError(f"jitgrad runs on the CPU only: device '{dev}' is not available")
        self._cap = _C._generator_new(_DEFAULT_SEED)

    @property
    def device(self):
        from . import device

        return device("cpu")

    def manual_seed(self, seed):
        if not isinstance(seed, int) or isinstance(seed, bool):
            try:
                seed = int(seed)
            except (TypeError, ValueError):
                raise TypeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        _C._generator_manual_seed(self._cap, seed & _MASK)
        return self

    def seed(self):
        """Seeds from the operating system's randomness; returns the seed."""
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return _C._generator_get(self._cap)[0]

    def get_state(self):
        """The state as an int64 tensor [initial seed, position] (bit
        patterns); set_state takes it back."""
        from . import tensor, int64

        init, state = _C._generator_get(self._cap)
        signed = [v - (1 << 64) if v >> 63 else v for v in (init, state)]
        return tensor(signed, dtype=int64)

    def set_state(self, new_state):
        from . import Tensor, int64

        if not isinstance(new_state, Tensor) or new_state.dtype is not int64 or \
                tuple(new_state.shape) != (2,):
            raise RuntimeError("set_state: expected the int64 tensor of 2 elements that "
                               "get_state returns")
        init, state = (v & _MASK for v in new_state.tolist())
        _C._generator_set(self._cap, init, state)
        return self

    def __reduce__(self):
        return (_rebuild, (self.get_state().tolist(),))


def _rebuild(state):
    from . import tensor, int64

    return Generator().set_state(tensor(state, dtype=int64))


class _drawing:
    """with _drawing(generator): random draws in the block come from
    generator (None: no change)."""

    __slots__ = ("gen", "prev", "fn")

    def __init__(self, generator, fn):
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"{fn}(): argument 'generator' must be jitgrad.Generator, not "
                            f"{type(generator).__name__}")
        self.gen = generator

    def __enter__(self):
        if self.gen is not None:
            self.prev = _C._generator_use(self.gen._cap)
        return self

    def __exit__(self, *exc):
        if self.gen is not None:
            _C._generator_restore(self.prev)
        return False


def _float_check(t, fn):
    if not t.is_floating_point():
        raise RuntimeError(f"{fn} is not implemented for {str(t.dtype).split('.')[-1]}")


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fills self with Normal(mean, std) samples (in place)."""
    _float_check(self, "normal_")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    with _drawing(generator, "normal_"):
        r = _C.randn_like(self)
    return self.copy_(r * std + mean)


def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kw):
    """Fills self with Uniform[from, to) samples (in place)."""
    if "from" in kw:
        from_ = kw.pop("from")
    if kw:
        raise TypeError(f"uniform_() got an unexpected keyword argument '{next(iter(kw))}'")
    _float_check(self, "uniform_")
    if from_ > to:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={from_} > to={to}")
    with _drawing(generator, "uniform_"):
        r = _C.rand_like(self)
    return self.copy_(r * (to - from_) + from_)


def bernoulli(input, p=None, *, generator=None, out=None):
    """0/1 samples with probability input (or p) elementwise, input's dtype."""
    if out is not None:
        raise TypeError("bernoulli(): jitgrad does not support out=")
    _float_check(input, "bernoulli")
    with _drawing(generator, "bernoulli"):
        u = _C.rand_like(input.detach())
    prob = input.detach() if p is None else p
    return (u < prob).to(input.dtype)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fills self with 0/1 samples of probability p (in place)."""
    with _drawing(generator, "bernoulli_"):
        u = _C.rand_like(self.detach() if self.is_floating_point() else self.double())
    return self.copy_((u < p).to(self.dtype))
