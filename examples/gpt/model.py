"""A GPT-2-style byte-level language model in plain PyTorch API.

Token and position embeddings, n_layer blocks of (LayerNorm -> causal
multi-head self-attention -> residual, LayerNorm -> MLP with GELU (tanh
approximation) -> residual), a final LayerNorm and an LM head tied to the
token embedding.  Attention shares keys and values: c_attn projects to q and
k only, and k is passed as the keys AND the values.  attn="builtin" writes
softmax(q k^T / sqrt(d) + mask) k with ordinary ops; attn="custom" calls
SharedKVAttention.apply(q, k, k, scale), a custom autograd.Function whose
backward returns the key slot's and the value slot's gradients separately
(the pattern a compiler must not collapse: k's gradient is their sum).

The module takes the tensor library as an argument (`torch` or `jitgrad`),
so one file serves both."""
import math
from dataclasses import dataclass


@dataclass
class GPTConfig:
    vocab_size: int = 128
    block_size: int = 64
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    attn: str = "builtin"  # or "custom"


def build(torch):
    """The model classes over library `torch`."""
    nn = torch.nn
    F = nn.functional

    class SharedKVAttention(torch.autograd.Function):
        """y = softmax(q k^T * scale, causal) v, for q, k, v of shape
        [B, H, T, D].  Called with v = k."""

        @staticmethod
        def forward(ctx, q, k, v, scale):
            t = q.shape[-2]
            mask = torch.ones(t, t).tril() == 0
            att = ((q @ k.transpose(-2, -1)) * scale).masked_fill(mask, float("-inf"))
            att = att.softmax(dim=-1)
            ctx.save_for_backward(q, k, v, att)
            ctx.scale = scale
            return att @ v

        @staticmethod
        def backward(ctx, dy):
            q, k, v, att = ctx.saved_tensors
            dv = att.transpose(-2, -1) @ dy
            datt = dy @ v.transpose(-2, -1)
            ds = att * (datt - (datt * att).sum(-1, keepdim=True))
            dq = (ds @ k) * ctx.scale
            dk = (ds.transpose(-2, -1) @ q) * ctx.scale
            return dq, dk, dv, None

    class CausalSelfAttention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.n_head = cfg.n_head
            self.attn = cfg.attn
            self.c_attn = nn.Linear(cfg.n_embd, 2 * cfg.n_embd)  # q and the shared k/v
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
            t = cfg.block_size
            self.register_buffer("mask", torch.ones(t, t).tril().view(1, 1, t, t) == 0,
                                 persistent=False)

        def forward(self, x):
            b, t, c = x.shape
            q, k = self.c_attn(x).split(c, dim=2)
            q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            scale = 1.0 / math.sqrt(k.shape[-1])
            if self.attn == "custom":
                y = SharedKVAttention.apply(q, k, k, scale)  # k in the key and the value slot
            else:
                att = ((q @ k.transpose(-2, -1)) * scale).masked_fill(
                    self.mask[:, :, :t, :t], float("-inf"))
                y = att.softmax(dim=-1) @ k
            y = y.transpose(1, 2).contiguous().view(b, t, c)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.gelu = nn.GELU(approximate="tanh")
            self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention(cfg)
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = MLP(cfg)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.cfg = cfg
            self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
            self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * cfg.n_layer) if name.endswith("c_proj.weight") \
                        else 0.02
                    nn.init.normal_(p, mean=0.0, std=std)

        def forward(self, idx, targets=None):
            b, t = idx.shape
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                return logits, None
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
            return logits, loss

    return GPT, SharedKVAttention
