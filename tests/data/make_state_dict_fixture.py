"""Writes tests/data/state_dict_torch.pt with torch.save (PyTorch 1.13), the
fixture test_state_dict.c reads: every dtype jitgrad has, tied entries, a
view, a transposed tensor, a 0-d tensor and a Parameter."""
import collections
import os

import torch

sd = collections.OrderedDict()
sd["weight"] = torch.arange(6, dtype=torch.float32).view(2, 3) * 0.5 - 1
sd["bias"] = torch.tensor([0.25, -0.75])
sd["tied"] = sd["weight"]
sd["i64"] = torch.arange(5)
sd["view"] = sd["i64"][1:4]
sd["f64"] = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64).t()
sd["b"] = torch.tensor([True, False, True])
sd["i32"] = torch.tensor([-7, 100000], dtype=torch.int32)
sd["scalar"] = torch.tensor(3.5)
sd["p"] = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
torch.save(sd, os.path.join(os.path.dirname(os.path.abspath(__file__)), "state_dict_torch.pt"))
