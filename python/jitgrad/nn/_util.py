"""Small helpers shared by jitgrad.nn's modules."""
import contextlib

from .. import _C


@contextlib.contextmanager
def no_grad():
    prev = _C._set_grad_enabled(False)
    try:
        yield
    finally:
        _C._set_grad_enabled(prev)
