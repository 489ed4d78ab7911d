"""torch.backends' queries for a CPU-only library."""


class mps:  # noqa: N801  (PyTorch's name)
    """Apple's Metal backend: not available."""

    @staticmethod
    def is_available():
        """False: jitgrad runs on the CPU only."""
        return False

    @staticmethod
    def is_built():
        """False: jitgrad runs on the CPU only."""
        return False


class cudnn:  # noqa: N801
    """Settings scripts assign (deterministic, benchmark); they change
    nothing in jitgrad, which is deterministic."""

    enabled = False
    deterministic = False
    benchmark = False

    @staticmethod
    def is_available():
        """False: jitgrad runs on the CPU only."""
        return False


class cuda:  # noqa: N801
    """CUDA settings: no effect in jitgrad."""

    class matmul:  # noqa: N801
        allow_tf32 = False
