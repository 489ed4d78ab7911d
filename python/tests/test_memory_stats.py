"""jitgrad.memory_allocated / max_memory_allocated / reset_peak_memory_stats
(jg_memory_allocated ...): the bytes of tensor data held, and the peak.  The
peak of a compiled forward+backward must not exceed eager's (issues 12, 14):
measured here on steady-state calls."""
import gc

import pytest

import jitgrad as torch
import jitgrad.nn as nn


def test_memory_counts_tensor_data():
    gc.collect()
    base = torch.memory_allocated()
    x = torch.zeros(1000)  # 4000 bytes
    assert torch.memory_allocated() == base + 4000
    y = x.view(10, 100)  # a view holds no new data
    assert torch.memory_allocated() == base + 4000
    del x
    assert torch.memory_allocated() == base + 4000  # the view keeps the storage
    del y
    assert torch.memory_allocated() == base


def test_peak_and_reset():
    gc.collect()
    base = torch.memory_allocated()
    torch.reset_peak_memory_stats()
    assert torch.max_memory_allocated() == base
    a = torch.ones(1 << 16, dtype=torch.float64)
    del a
    assert torch.max_memory_allocated() == base + 8 * (1 << 16)
    assert torch.memory_allocated() == base
    torch.reset_peak_memory_stats()
    assert torch.max_memory_allocated() == base


def test_small_tensors_not_counted():
    base = torch.memory_allocated()
    t = torch.zeros(16)  # 64 bytes: inside the tensor struct
    assert torch.memory_allocated() == base
    del t


def step_peak(step, calls=3):
    """Peak bytes above the starting point of the last of `calls` calls."""
    for _ in range(calls - 1):
        step()
    gc.collect()
    base = torch.memory_allocated()
    torch.reset_peak_memory_stats()
    step()
    return torch.max_memory_allocated() - base


CHAINS = {
    "scale_add": lambda t, b: t * 1.5 + b,
    "relu": lambda t, b: (t - b).relu(),
    "tanh": lambda t, b: (t * b).tanh(),
}


def backends():
    return ["interp"] + (["c"] if torch.HAS_COMPILER else [])


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_compiled_chain_peak_not_above_eager(chain, backend):
    f = CHAINS[chain]

    def fn(a, b):
        t = a
        for _ in range(16):
            t = f(t, b)
        return t.sum()

    a = torch.randn(100000, requires_grad=True)
    b = torch.randn(100000, requires_grad=True)
    cf = torch.compile(fn, backend=backend)

    def run(g):
        def step():
            a.grad = b.grad = None
            g(a, b).backward()
        return step

    eager = step_peak(run(fn))
    compiled = step_peak(run(cf))
    assert compiled <= eager, (compiled, eager)


@pytest.mark.parametrize("backend", backends())
def test_compiled_mlp_step_peak_not_above_eager(backend):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    x = torch.randn(64, 784)
    y = torch.randint(0, 10, (64,))
    cm = torch.compile(model, backend=backend)

    def run(m):
        def step():
            model.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(m(x), y).backward()
        return step

    eager = step_peak(run(model))
    compiled = step_peak(run(cm))
    assert compiled <= eager, (compiled, eager)


@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("attn", ["builtin", "custom"])
def test_compiled_gpt_step_peak_not_above_eager(backend, attn):
    """examples/gpt/model.py, a small configuration: forward + loss +
    backward, compiled (the model) against eager."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "gpt", "model.py")
    spec = importlib.util.spec_from_file_location("jitgrad_example_gpt_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    GPT, _ = mod.build(torch)
    torch.manual_seed(0)
    model = GPT(mod.GPTConfig(block_size=16, n_layer=2, n_head=2, n_embd=32, attn=attn))
    x = torch.randint(0, 128, (2, 16))
    y = torch.randint(0, 128, (2, 16))
    cm = torch.compile(model, backend=backend)

    def run(m):
        def step():
            model.zero_grad(set_to_none=True)
            m(x, y)[1].backward()
        return step

    eager = step_peak(run(model))
    compiled = step_peak(run(cm))
    assert compiled <= eager, (compiled, eager)
