"""jitgrad.nn.parallel: DistributedDataParallel (over jitgrad.distributed)."""
from .distributed import DistributedDataParallel  # noqa: F401
