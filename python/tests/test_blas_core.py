"""jitgrad.backends.openblas.corename(): where a DYNAMIC_ARCH OpenBLAS falls
back to kernels without AVX2 on a CPU with AVX2 and FMA (OpenBLAS 0.3.21 on
an AVX-512 model it does not know: Prescott), jitgrad selects SkylakeX or
Haswell at load; JITGRAD_BLAS_CORETYPE=keep / =NAME and OPENBLAS_CORETYPE in
fresh processes; matmuls on the chosen kernels match PyTorch."""
import os
import re
import subprocess
import sys

import pytest

import jitgrad

AVX2_CORES = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "Sapphirerapids", "Excavator"}


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


FLAGS = cpu_flags()
HAS_AVX2 = {"avx2", "fma"} <= FLAGS
HAS_AVX512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= FLAGS

needs_openblas = pytest.mark.skipif(not jitgrad.backends.openblas.is_available(),
                                    reason="the BLAS does not name its kernels")


def child(env_over):
    """(corename, OpenBLAS's own choice at its load, output) in a fresh
    process with OPENBLAS_VERBOSE=2 and these variables (None: unset)."""
    env = dict(os.environ)
    for k in ("JITGRAD_BLAS_CORETYPE", "OPENBLAS_CORETYPE", "JITGRAD_LOG"):
        env.pop(k, None)
    env["OPENBLAS_VERBOSE"] = "2"
    env.update({k: v for k, v in env_over.items() if v is not None})
    p = subprocess.run([sys.executable, "-c",
                        "import jitgrad; print('corename=%s' % jitgrad.backends.openblas.corename())"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout + p.stderr
    cores = re.findall(r"^Core: (\S+)", out, re.M)
    name = re.search(r"corename=(\S+)", out).group(1)
    return name, cores[0] if cores else None, out


@needs_openblas
def test_corename_in_process():
    name = jitgrad.backends.openblas.corename()
    assert isinstance(name, str) and name
    if HAS_AVX2 and not os.environ.get("OPENBLAS_CORETYPE") and \
            not os.environ.get("JITGRAD_BLAS_CORETYPE"):
        assert name in AVX2_CORES


@needs_openblas
def test_fallback_replaced():
    name, first, _ = child({})
    if first in AVX2_CORES or not HAS_AVX2:
        assert name == first
    else:
        assert name == ("SkylakeX" if HAS_AVX512 else "Haswell")


@needs_openblas
def test_keep_and_force():
    name, first, out = child({"JITGRAD_BLAS_CORETYPE": "keep"})
    assert name == first
    assert name == child({"OPENBLAS_CORETYPE": first})[0]  # a user's choice stands
    assert child({"JITGRAD_BLAS_CORETYPE": "prescott"})[0] == "Prescott"
    if HAS_AVX2:
        name, _, out = child({"JITGRAD_BLAS_CORETYPE": "Haswell", "JITGRAD_LOG": "blas",
                              "OPENBLAS_CORETYPE": "Prescott"})
        assert name == "Haswell"
        assert "jitgrad: OpenBLAS core Haswell (was Prescott; JITGRAD_BLAS_CORETYPE)" in out
    name, _, out = child({"JITGRAD_BLAS_CORETYPE": "NoSuchCore"})
    assert name == first
    assert "JITGRAD_BLAS_CORETYPE=NoSuchCore: this OpenBLAS has no such core" in out


@pytest.mark.parametrize("shape", [(3, 5, 2), (64, 300, 96), (256, 128, 512), (4, 64, 1024)])
@pytest.mark.parametrize("transposed", [False, True])
def test_matmul_matches_torch(shape, transposed):
    torch = pytest.importorskip("torch")
    m, k, n = shape
    g = torch.Generator().manual_seed(m * 1000 + n)
    a = torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if transposed else torch.randn(k, n, generator=g)
    ja = jitgrad.tensor(a.numpy())
    jb = jitgrad.tensor(b.contiguous().numpy())
    if transposed:
        jb = jitgrad.tensor(b.t().contiguous().numpy()).t()
    got = torch.from_numpy((ja @ jb).numpy())
    want = a.double() @ b.double()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4 * k ** 0.5)
