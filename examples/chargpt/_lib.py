"""Selects the tensor library the char-GPT scripts run on: PyTorch when
CHARGPT_LIB=torch, jitgrad otherwise (train.py and sample.py set the
variable from their --lib= flag before importing model.py)."""
import os

if os.environ.get("CHARGPT_LIB", "jitgrad") == "torch":
    import torch
else:
    import jitgrad as torch

__all__ = ["torch"]
