"""Samples text from a model trained by train.py (nanoGPT's sample.py style).

    python3 examples/chargpt/sample.py --out_dir=out-chargpt [--lib=torch]
        [--start="Shall "] [--num_samples=2] [--max_new_tokens=100]
        [--temperature=0.8] [--top_k=10] [--seed=1337]

The checkpoint may come from either library: both write torch.save's
format."""
import os
import pickle
import sys
from ast import literal_eval
from contextlib import nullcontext

lib = "jitgrad"  # or "torch"
out_dir = "out-chargpt"
start = "\n"  # the prompt
num_samples = 2
max_new_tokens = 100
temperature = 0.8  # < 1 sharpens the distribution, > 1 flattens it
top_k = 10  # sample among the k likeliest characters only
seed = 1337
device = "cpu"

for _arg in sys.argv[1:]:
    if not _arg.startswith("--") or "=" not in _arg:
        sys.exit(f"usage: sample.py [--name=value ...]; got {_arg!r}")
    _key, _val = _arg[2:].split("=", 1)
    if _key not in globals() or _key.startswith("_"):
        sys.exit(f"unknown config key: {_key}")
    try:
        _val = literal_eval(_val)
    except (SyntaxError, ValueError):
        pass  # a bare string
    globals()[_key] = _val

os.environ["CHARGPT_LIB"] = lib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _lib import torch  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

torch.manual_seed(seed)
ctx = nullcontext()

checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
model = GPT(GPTConfig(**checkpoint["model_args"]))
state_dict = checkpoint["model"]
unwanted_prefix = "_orig_mod."
for k in list(state_dict):
    if k.startswith(unwanted_prefix):
        state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
model.load_state_dict(state_dict)
model.eval()
model.to(device)

with open(os.path.join(out_dir, "meta.pkl"), "rb") as f:
    meta = pickle.load(f)
stoi, itos = meta["stoi"], meta["itos"]


def encode(s):
    return [stoi[c] for c in s]


def decode(ids):
    return "".join(itos[i] for i in ids)


start_ids = encode(start)
x = torch.tensor(start_ids, dtype=torch.long, device=device)[None, ...]

with torch.no_grad():
    with ctx:
        for k in range(num_samples):
            y = model.generate(x, max_new_tokens, temperature=temperature, top_k=top_k)
            print(decode(y[0].tolist()))
            print("---------------")
