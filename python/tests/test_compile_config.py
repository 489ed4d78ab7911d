"""jitgrad.compile's configuration surface: modes (PyTorch's names; an
unknown one is an error, as in PyTorch 2) and the cache size limit (after 8
traced entries, new guard sets run eagerly with one warning)."""
import os
import subprocess
import sys

import pytest


@pytest.mark.parametrize("mode", [None, "default", "reduce-overhead", "max-autotune",
                                  "max-autotune-no-cudagraphs"])
def test_known_modes(jg, mode):
    f = jg.compile(lambda x: x * 2, backend="interp", mode=mode)
    assert f(jg.ones(2)).tolist() == [2.0, 2.0]


def test_unknown_mode_is_an_error(jg):
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast, should be one of: default"):
        jg.compile(lambda x: x, mode="fast")


def test_mode_and_options_together_is_an_error(jg):
    with pytest.raises(RuntimeError, match="Either mode or options"):
        jg.compile(lambda x: x, mode="default", options={})


# (dynamic=False: every size is an entry; with dynamic sizes they are not)
PROGRAM = r'''
import jitgrad as T
f = T.compile(lambda x: x * 2 + 1, backend="interp", dynamic=DYNAMIC)
for n in range(1, 12):
    assert f(T.ones(n)).tolist() == [3.0] * n
print("fallbacks", f._jitgrad_compiled.fallbacks(), "entries", f._jitgrad_compiled.entries())
'''


def run(env_extra, dynamic=False):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", PROGRAM.replace("DYNAMIC", repr(dynamic))],
                          env=env, capture_output=True, text=True, timeout=120)


def test_dynamic_sizes_stay_under_the_limit():
    # 1 and 2 are traced (1 is specialized), 3 makes the size dynamic
    r = run({}, dynamic=None)
    assert r.returncode == 0, r.stderr
    assert "fallbacks 0 entries 3" in r.stdout
    assert "cache size limit" not in r.stderr


def test_cache_size_limit_default_8():
    r = run({})
    assert r.returncode == 0, r.stderr
    assert "fallbacks 3" in r.stdout
    assert r.stderr.count("hit the cache size limit (8 entries)") == 1
    assert "input 0 shape [9] != [8]" in r.stderr


def test_cache_size_limit_env():
    r = run({"JITGRAD_CACHE_SIZE_LIMIT": "0"})
    assert r.returncode == 0, r.stderr
    assert "fallbacks 0" in r.stdout and "cache size limit" not in r.stderr
    r = run({"JITGRAD_CACHE_SIZE_LIMIT": "2"})
    assert "fallbacks 9" in r.stdout and "(2 entries)" in r.stderr
