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


class openblas:  # noqa: N801  (torch.backends' style; PyTorch has no such module)
    """The BLAS jitgrad's matmuls run on."""

    @staticmethod
    def is_available():
        """Whether the BLAS is an OpenBLAS that names its kernels."""
        from . import _C

        return _C._blas_corename() is not None

    @staticmethod
    def corename():
        """The kernels OpenBLAS runs: "SkylakeX", "Haswell", "Prescott" ...
        (None for a BLAS that does not say).  Where OpenBLAS falls back to
        kernels without AVX2 on a CPU with AVX2 and FMA, jitgrad selects
        SkylakeX or Haswell at load; JITGRAD_BLAS_CORETYPE=keep leaves
        OpenBLAS's choice, =NAME asks for one (docs/performance.md)."""
        from . import _C

        return _C._blas_corename()
