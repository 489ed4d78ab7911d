"""torch.cuda's queries, answered for a CPU-only library: no device exists,
and the seeding calls scripts make unconditionally do nothing."""


def is_available():
    """False: jitgrad runs on the CPU only."""
    return False


def device_count():
    """0: jitgrad runs on the CPU only."""
    return 0


def manual_seed(seed):
    """Does nothing (there is no CUDA generator); jitgrad.manual_seed seeds
    jitgrad's generator."""


def manual_seed_all(seed):
    """Does nothing (there is no CUDA generator)."""


def is_bf16_supported():
    """False: jitgrad has no bfloat16."""
    return False


# ---- chargpt: GradScaler / autocast (always disabled) ----
from . import _amp as amp  # noqa: E402,F401
