"""torch.cuda.amp for a CPU-only library, as PyTorch 1.13 behaves on a
machine without CUDA: GradScaler and autocast are always disabled (asking
for them enabled warns and disables them), so scripts written for mixed
precision run unchanged in float32."""
import functools
import warnings


class GradScaler:
    """Loss scaling for float16 training: disabled (no CUDA), so scale()
    returns its argument, step() is optimizer.step() and the rest do
    nothing."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if enabled:
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.")
        self._enabled = False

    def is_enabled(self):
        """False: there is no CUDA."""
        return self._enabled

    def scale(self, outputs):
        """outputs itself (a disabled scaler does not scale)."""
        return outputs

    def unscale_(self, optimizer):
        """Nothing to undo."""

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs)."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Nothing to update."""

    def get_scale(self):
        """1.0, the scale of a disabled scaler."""
        return 1.0

    def state_dict(self):
        """{} (a disabled scaler saves nothing)."""
        return {}

    def load_state_dict(self, state_dict):
        """Ignored, as a disabled scaler ignores it."""


class autocast:  # noqa: N801  (PyTorch's name)
    """Mixed-precision regions: disabled (no CUDA); a context manager and a
    decorator that change nothing."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        if enabled:
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. "
                          "Disabling")
        self._enabled = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return wrapper
