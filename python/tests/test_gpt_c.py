"""examples/gpt/train.c (the GPT example over the C API) against
examples/gpt/train.py on jitgrad: from one --init file they print the same
losses bitwise (--exact prints %.9g, which tells float32 values apart) and
end with bitwise-equal parameters, eager and compiled, both attention
variants.  A short configuration."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import jitgrad

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TRAIN_PY = os.path.join(ROOT, "examples", "gpt", "train.py")
BUILD = os.environ.get("JITGRAD_BUILD_DIR", os.path.join(ROOT, "build"))
TRAIN_C = os.path.join(BUILD, "examples", "gpt_train")
SMALL = ["--steps", "6", "--batch", "2", "--block", "16", "--layers", "2", "--heads", "2",
         "--width", "32", "--lr", "1e-3", "--exact"]


@pytest.fixture(scope="module")
def train_c():
    if not os.path.exists(TRAIN_C):
        pytest.skip("examples/gpt_train is not built")
    return TRAIN_C


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("gptc") / "init.pt")
    subprocess.run([sys.executable, TRAIN_PY] + SMALL + ["--steps", "0", "--compile", "none",
                                                         "--save", path], check=True)
    return path


def losses(out):
    steps = re.findall(r"^step (\d+): loss (\S+)$", out, re.M)
    summary = re.search(r"final loss (\S+), val loss (\S+),", out)
    assert summary, out
    return [v for _, v in steps] + [summary.group(1), summary.group(2)]


def run(cmd, init, save, *extra):
    r = subprocess.run(cmd + SMALL + ["--init", init, "--save", save] + list(extra),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r


def backends():
    return ["none", "interp"] + (["c"] if jitgrad.HAS_COMPILER else [])


@pytest.mark.parametrize("scope", ["step", "model"])
@pytest.mark.parametrize("attn", ["builtin", "custom"])
@pytest.mark.parametrize("compile", backends())
def test_gpt_c_equals_python_bitwise(train_c, init, tmp_path, attn, compile, scope):
    if compile == "none" and scope == "model":
        pytest.skip("no compile: the scope does not apply")
    py = run([sys.executable, TRAIN_PY], init, str(tmp_path / "py.pt"), "--attn", attn,
             "--compile", compile, "--compile-scope", scope)
    c = run([train_c], init, str(tmp_path / "c.pt"), "--attn", attn, "--compile", compile,
            "--compile-scope", scope)
    got, want = losses(c.stdout), losses(py.stdout)
    assert len(got) == 8
    assert got == want
    if compile != "none" and scope == "model":  # the forward: one graph, never eager
        assert "compiled: 1 graph(s), 0 call(s) ran eagerly" in c.stderr
    if compile != "none" and scope == "step":  # the whole step: one graph; the first
        # call, which creates AdamW's state, runs eagerly
        assert "compiled: 1 graph(s), 1 call(s) ran eagerly" in c.stderr
    a, b = jitgrad.load(str(tmp_path / "c.pt")), jitgrad.load(str(tmp_path / "py.pt"))
    assert list(a) == list(b)
    for k in a:
        assert a[k].numpy().tobytes() == b[k].numpy().tobytes(), k
    assert a["lm_head.weight"]._storage_key() == a["wte.weight"]._storage_key()


def test_gpt_c_reads_torch_init(train_c, tmp_path):
    """An initialization written by PyTorch itself trains the same in C as
    in train.py on jitgrad."""
    pytest.importorskip("torch")
    path = str(tmp_path / "torch_init.pt")
    subprocess.run([sys.executable, TRAIN_PY, "--torch"] + SMALL +
                   ["--steps", "0", "--save", path], check=True)
    py = run([sys.executable, TRAIN_PY], path, str(tmp_path / "py.pt"), "--compile", "none")
    c = run([train_c], path, str(tmp_path / "c.pt"), "--compile", "none")
    assert losses(c.stdout) == losses(py.stdout)


def test_gpt_c_bad_init(train_c, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    r = subprocess.run([train_c] + SMALL + ["--init", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert "not a zip archive" in r.stderr
    other = str(tmp_path / "other.pt")
    subprocess.run([sys.executable, TRAIN_PY] + SMALL + ["--steps", "0", "--width", "16",
                                                         "--save", other], check=True)
    r = subprocess.run([train_c] + SMALL + ["--init", other], capture_output=True, text=True)
    assert r.returncode == 1
    assert "size mismatch for wte.weight" in r.stderr


def sample_text(out):
    """The bytes printed after the summary line (--sample)."""
    lines = out.splitlines()
    i = next(i for i, l in enumerate(lines) if "final loss" in l)
    return "\n".join(lines[i + 1:])


def test_gpt_c_sample_equals_python(train_c, init, tmp_path):
    """--sample N: from the same trained weights both programs draw the
    same N bytes (sampling reseeds the generator with --seed)."""
    py = run([sys.executable, TRAIN_PY], init, str(tmp_path / "py.pt"), "--compile", "none",
             "--sample", "40")
    c = run([train_c], init, str(tmp_path / "c.pt"), "--compile", "none", "--sample", "40")
    got, want = sample_text(c.stdout), sample_text(py.stdout)
    assert len(want) >= 40 and want.isascii(), want
    assert got == want
