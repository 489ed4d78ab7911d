"""A small transformer block (pre-norm attention + MLP) trained for 20
steps with the whole step compiled as one graph (forward, loss.backward(),
AdamW step, zero_grad) and with compile(model) alone: losses and
parameters bitwise equal to the eager loop's, on both backends."""
import math

import pytest

BACKENDS = ["interp", "c"]


def make_block(T):
    nn, F = T.nn, T.nn.functional

    class Block(nn.Module):
        def __init__(self, d=16, heads=2):
            super().__init__()
            self.heads = heads
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)
            self.head = nn.Linear(d, 5)

        def forward(self, x):
            B, S, D = x.shape
            h = self.heads
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q = q.view(B, S, h, D // h).transpose(1, 2)
            k = k.view(B, S, h, D // h).transpose(1, 2)
            v = v.view(B, S, h, D // h).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D // h))
            mask = T.ones(S, S).tril() == 0
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, S, D)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return self.head(x)

    return Block


def train(T, backend=None, scope="step"):
    T.manual_seed(0)
    model = make_block(T)()
    opt = T.optim.AdamW(model.parameters(), lr=1e-2)
    fwd = T.compile(model, backend=backend, fullgraph=True) if backend and scope == "model" else model

    def step(x, y):
        loss = T.nn.functional.cross_entropy(fwd(x).view(-1, 5), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    if backend and scope == "step":
        step = T.compile(step, backend=backend, fullgraph=True)
    T.manual_seed(1)
    x, y = T.randn(4, 6, 16), T.randint(0, 5, (4, 6))
    losses = [step(x, y).item() for _ in range(20)]
    params = [p.detach().numpy().tobytes() for p in model.parameters()]
    compiled = getattr(step, "_jitgrad_compiled", None) or getattr(fwd.forward, "_jitgrad_compiled",
                                                                  None)
    return losses, params, compiled


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scope", ["step", "model"])
def test_transformer_block_trains_as_eager(jg, backend, scope):
    want = train(jg)
    got = train(jg, backend, scope)
    assert got[0] == want[0]
    assert got[1] == want[1]
    c = got[2]
    # the whole step: the first call creates AdamW's state and runs eagerly
    # (not cached), every later one runs the one entry
    assert c.entries() == 1
    assert c.fallbacks() == (1 if scope == "step" else 0)
