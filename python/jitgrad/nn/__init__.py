"""jitgrad.nn: only the functional ops (see docs/python.md)."""
from . import functional  # noqa: F401
