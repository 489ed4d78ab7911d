"""Utilities with PyTorch's names (torch.utils)."""
