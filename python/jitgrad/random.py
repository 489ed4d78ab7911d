"""jitgrad.random (torch.random): the global generator's seed and state,
and fork_rng, which restores them after a block."""
import contextlib

from ._more_utils import get_rng_state, initial_seed, seed, set_rng_state  # noqa: F401
from ._generator import Generator  # noqa: F401


def manual_seed(seed):
    """Seeds the global generator; returns jitgrad.default_generator."""
    import jitgrad

    jitgrad.manual_seed(seed)
    return jitgrad.default_generator


def __getattr__(name):
    if name == "default_generator":
        import jitgrad

        return jitgrad.default_generator
    raise AttributeError(f"module 'jitgrad.random' has no attribute '{name}'")


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices"):
    """Draws inside the block leave the global generator as it was: its
    state is saved on entry and restored on exit (devices: only the CPU
    exists)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
