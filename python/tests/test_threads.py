"""jitgrad.set_num_threads / get_num_threads: torch's names, argument checks
and messages; large kernels give the same bits for any thread count."""
import os
import subprocess
import sys

import pytest

import jitgrad


@pytest.fixture
def restore_threads():
    before = jitgrad.get_num_threads()
    yield
    jitgrad.set_num_threads(before)


def test_set_get(restore_threads):
    assert isinstance(jitgrad.get_num_threads(), int)
    assert jitgrad.get_num_threads() >= 1
    assert jitgrad.set_num_threads(3) is None
    assert jitgrad.get_num_threads() == 3
    jitgrad.set_num_threads(1)
    assert jitgrad.get_num_threads() == 1


def test_numpy_ints_like_torch(restore_threads):
    np = pytest.importorskip("numpy")
    jitgrad.set_num_threads(np.int64(3))
    assert jitgrad.get_num_threads() == 3
    jitgrad.set_num_threads(np.int32(2))
    assert jitgrad.get_num_threads() == 2


class _Index:
    def __index__(self):
        return 2


@pytest.mark.parametrize("bad", [0, -1, 2**40, 2.5, "a", True, None, _Index(),
                                 pytest.param("np.float64", id="np.float64"),
                                 pytest.param("np.int64(0)", id="np.int64(0)")])
def test_bad_counts_like_torch(bad, restore_threads):
    torch = pytest.importorskip("torch")
    if isinstance(bad, str) and bad.startswith("np."):
        np = pytest.importorskip("numpy")
        bad = np.float64(2.0) if bad == "np.float64" else np.int64(0)
    jitgrad.set_num_threads(2)
    with pytest.raises(Exception) as want:
        torch.set_num_threads(bad)
    with pytest.raises(type(want.value)) as got:
        jitgrad.set_num_threads(bad)
    assert str(got.value) == str(want.value)
    assert jitgrad.get_num_threads() == 2  # unchanged


def test_arity_like_torch():
    with pytest.raises(TypeError):
        jitgrad.get_num_threads(1)
    with pytest.raises(TypeError):
        jitgrad.set_num_threads()
    with pytest.raises(TypeError):
        jitgrad.set_num_threads(1, 2)


def test_env_var():
    code = "import jitgrad; print(jitgrad.get_num_threads())"
    env = dict(os.environ, JITGRAD_NUM_THREADS="3")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "3"


def test_bitwise_any_thread_count(restore_threads):
    jitgrad.manual_seed(0)
    x = jitgrad.randn(513, 1031)
    y = jitgrad.randn(513, 1031)
    col = jitgrad.randn(513, 1)

    def run():
        return [t.numpy().copy() for t in (
            x + y, x * y, x.relu(), x.tanh(), y.sigmoid(), y.exp(), x + col,
            x.t() * y.t(), x.t().contiguous(), x.sum(), y.sum(0), y.softmax(1))]

    jitgrad.set_num_threads(1)
    want = run()
    for n in (2, 3, 4, 7):
        jitgrad.set_num_threads(n)
        for a, b in zip(run(), want):
            assert a.tobytes() == b.tobytes()


def test_openblas_single_thread(restore_threads):
    ctypes = pytest.importorskip("ctypes")
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
        blas.openblas_get_num_threads
    except (OSError, AttributeError):
        pytest.skip("no OpenBLAS")
    # matmul splits large products over jitgrad's own threads; OpenBLAS
    # stays on one
    jitgrad.set_num_threads(1)
    assert blas.openblas_get_num_threads() == 1
    jitgrad.set_num_threads(2)
    assert blas.openblas_get_num_threads() == 1
