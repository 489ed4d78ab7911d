"""Utilities with PyTorch's names (torch.utils)."""
from . import data, dlpack  # noqa: F401
