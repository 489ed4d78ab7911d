"""bench/kernels.py (the kernel table of `make bench`) runs against jitgrad and
prints one well-formed line per workload.  Correctness only: no timings are
checked."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "bench", "kernels.py")
SUITE = os.path.join(ROOT, "bench", "suite.py")

EXPECTED = {
    "add", "mul_scalar", "matmul_256x1024x1024", "max_dim1_1024x1024", "relu", "tanh",
    "sum_all", "sigmoid", "exp", "sum_dim0_1024x1024", "sum_dim1_1024x1024",
    "softmax_dim1_1024x1024", "log_softmax_dim1_1024x1024", "t_contiguous_1024x1024",
    "fused_relu_4M_fwd_bwd", "mlp_784_256_256_10_b64_sgd_step",
}
LINE = re.compile(
    r"^jitgrad (\S+) us=([0-9.e+-]+) threads=1 min_us=[0-9.e+-]+ max_us=[0-9.e+-]+ "
    r"iters_per_batch=\d+ batches=3$"
)


def test_bench_kernels_quick_emits_every_workload():
    p = subprocess.run(
        [sys.executable, KERNELS, "--lib", "jitgrad", "--quick", "--groups", "kernels,fused,mlp"],
        capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("jitgrad meta threads=1 "), lines[0]
    seen = set()
    for line in lines[1:]:
        m = LINE.match(line)
        assert m, line
        assert float(m.group(2)) > 0
        seen.add(m.group(1))
    assert seen == EXPECTED


def test_bench_suite_parses_result_lines():
    sys.path.insert(0, os.path.dirname(SUITE))
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no bench/__pycache__
    try:
        import suite
    finally:
        sys.path.pop(0)
        sys.dont_write_bytecode = keep
    rows = suite.parse("# comment\njitgrad relu us=12.5 threads=2 tag=x\nnot a line\n")
    assert rows == [("jitgrad", "relu", {"us": 12.5, "threads": 2.0, "tag": "x"})]


def test_bench_suite_blas_cores():
    """The GPT section's note of each library's OpenBLAS kernels: jitgrad's
    is what jitgrad.backends.openblas.corename() says; PyTorch's is
    OpenBLAS's own choice in a process of its own."""
    import jitgrad

    sys.path.insert(0, os.path.dirname(SUITE))
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        import suite
    finally:
        sys.path.pop(0)
        sys.dont_write_bytecode = keep
    libs = [("jitgrad", sys.executable)]
    try:
        import torch  # noqa: F401

        libs.append(("torch", sys.executable))
    except ImportError:
        pass
    cores = suite.blas_cores(libs)
    if jitgrad.backends.openblas.corename() is None:
        assert "jitgrad" not in cores
        return
    want = jitgrad.backends.openblas.corename()
    if os.environ.get("OPENBLAS_CORETYPE") and not suite.KEEP_CORETYPE:
        # the suite's runs drop an OPENBLAS_CORETYPE from the environment
        # (this process has it): jitgrad's choice without it
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
        want = subprocess.run(
            [sys.executable, "-c", "import jitgrad; print(jitgrad.backends.openblas.corename())"],
            env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert cores["jitgrad"] == want
    if len(libs) == 2:
        assert isinstance(cores["torch"], str) and cores["torch"]
