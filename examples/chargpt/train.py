"""Trains a small character-level GPT (model.py) on a built-in text, in the
style of nanoGPT's train.py.

    python3 examples/chargpt/train.py                      # jitgrad
    python3 examples/chargpt/train.py --lib=torch          # PyTorch
    python3 examples/chargpt/train.py --max_iters=50 --out_dir=/tmp/gpt

Every global below can be overridden with --name=value.  Writes
out_dir/ckpt.pt (model, optimizer, model_args, iter_num, best_val_loss,
config; torch.save's format under either library) and out_dir/meta.pkl
(the character vocabulary), which sample.py reads."""
import math
import os
import pickle
import sys
import time
from ast import literal_eval
from contextlib import nullcontext

# -----------------------------------------------------------------------------
# configuration: plain globals, overridable from the command line
lib = "jitgrad"  # or "torch"
out_dir = "out-chargpt"
eval_interval = 50
log_interval = 10
eval_iters = 10
eval_only = False
always_save_checkpoint = True
init_from = "scratch"  # or "resume" (from out_dir/ckpt.pt)
# data
gradient_accumulation_steps = 1  # micro-batches per optimizer step
batch_size = 8
block_size = 32
# model
n_layer = 2
n_head = 4
n_embd = 32
dropout = 0.0
bias = True
# AdamW
learning_rate = 1e-2
max_iters = 200
weight_decay = 1e-1
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0  # 0 turns clipping off
# learning rate schedule: linear warmup, then cosine decay to min_lr
decay_lr = True
warmup_iters = 20
lr_decay_iters = 200
min_lr = 1e-3
# system
device = "cpu"
dtype = "float32"  # "float16" scales the loss (GradScaler; GPUs only)
seed = 1337
compile = False


def _configure(argv):
    """--name=value for every global above; values are Python literals
    (strings may be given bare)."""
    for arg in argv:
        if not arg.startswith("--") or "=" not in arg:
            sys.exit(f"usage: train.py [--name=value ...]; got {arg!r}")
        key, val = arg[2:].split("=", 1)
        if key not in globals() or key.startswith("_"):
            sys.exit(f"unknown config key: {key}")
        try:
            val = literal_eval(val)
        except (SyntaxError, ValueError):
            pass  # a bare string
        old = globals()[key]
        if type(val) is not type(old) and not (isinstance(old, float) and isinstance(val, int)):
            sys.exit(f"--{key}: expected {type(old).__name__}, got {val!r}")
        globals()[key] = type(old)(val)


config_keys = [k for k, v in globals().items()
               if not k.startswith("_") and isinstance(v, (int, float, bool, str))]
_configure(sys.argv[1:])
config = {k: globals()[k] for k in config_keys}  # saved into the checkpoint
# -----------------------------------------------------------------------------

os.environ["CHARGPT_LIB"] = lib
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402

from _lib import torch  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402

TEXT = """\
Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declines,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee.

When I do count the clock that tells the time,
And see the brave day sunk in hideous night;
When I behold the violet past prime,
And sable curls all silver'd o'er with white;
When lofty trees I see barren of leaves
Which erst from heat did canopy the herd,
And summer's green all girded up in sheaves
Borne on the bier with white and bristly beard,
Then of thy beauty do I question make,
That thou among the wastes of time must go,
Since sweets and beauties do themselves forsake
And die as fast as they see others grow;
And nothing 'gainst Time's scythe can make defence
Save breed, to brave him when he takes thee hence.
"""

os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(seed)
torch.backends.cuda.matmul.allow_tf32 = True  # no effect on a CPU
torch.backends.cudnn.allow_tf32 = True
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else \
    torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# character-level data: the vocabulary is the text's characters
chars = sorted(set(TEXT))
vocab_size = len(chars)
stoi = {ch: i for i, ch in enumerate(chars)}
itos = {i: ch for i, ch in enumerate(chars)}


def encode(s):
    return [stoi[c] for c in s]


def decode(ids):
    return "".join(itos[i] for i in ids)


with open(os.path.join(out_dir, "meta.pkl"), "wb") as f:
    pickle.dump({"vocab_size": vocab_size, "itos": itos, "stoi": stoi}, f)

n = int(0.9 * len(TEXT))
train_data = np.array(encode(TEXT[:n]), dtype=np.uint16)
val_data = np.array(encode(TEXT[n:]), dtype=np.uint16)


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64))
                     for i in ix])
    return x.to(device), y.to(device)


iter_num = 0
best_val_loss = 1e9
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size,
                  bias=bias, vocab_size=vocab_size, dropout=dropout)
if init_from == "scratch":
    print("initializing a new model from scratch")
    model = GPT(GPTConfig(**model_args))
elif init_from == "resume":
    print(f"resuming training from {out_dir}")
    checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
    # the architecture comes from the checkpoint; the rest may change
    for k in ["n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size"]:
        model_args[k] = checkpoint["model_args"][k]
    model = GPT(GPTConfig(**model_args))
    state_dict = checkpoint["model"]
    unwanted_prefix = "_orig_mod."  # what a compiled model's state_dict adds
    for k in list(state_dict):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)
    iter_num = checkpoint["iter_num"]
    best_val_loss = checkpoint["best_val_loss"]
else:
    sys.exit(f"unknown init_from: {init_from}")
model.to(device)
print(f"number of parameters: {model.get_num_params()}")

scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if init_from == "resume":
    optimizer.load_state_dict(checkpoint["optimizer"])
checkpoint = None  # free it

if compile:
    print("compiling the model")
    model = torch.compile(model)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))  # from 1 down to 0
    return min_lr + coeff * (learning_rate - min_lr)


raw_model = model  # compiled: its state_dict keys start with "_orig_mod."
X, Y = get_batch("train")
t0 = time.time()
while True:
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr

    if iter_num % eval_interval == 0 or iter_num == max_iters:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses["val"]
            if iter_num > 0:
                checkpoint = {
                    "model": raw_model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "model_args": model_args,
                    "iter_num": iter_num,
                    "best_val_loss": best_val_loss,
                    "config": config,
                }
                print(f"saving checkpoint to {out_dir}")
                torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    if iter_num == 0 and eval_only:
        break
    if iter_num >= max_iters:
        break

    for micro_step in range(gradient_accumulation_steps):
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps  # the gradients add up
        X, Y = get_batch("train")  # the next batch, while this one's backward runs
        scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    t1 = time.time()
    dt, t0 = t1 - t0, t1
    if iter_num % log_interval == 0:
        lossf = loss.item() * gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}, lr {lr:.2e}, time {dt * 1000:.1f}ms")
    iter_num += 1
