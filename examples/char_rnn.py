"""A character-level LSTM language model (the char-rnn of many tutorials),
written in plain PyTorch API: the same file runs under PyTorch, only the
import differs.

    python3 examples/char_rnn.py                  # jitgrad, GPL-3's text
    python3 examples/char_rnn.py --torch          # PyTorch
    python3 examples/char_rnn.py --text FILE --steps 500 --sample 300
    ... --save-init w.pt / --init w.pt            # one initialization for both

The text is split into --batch-size parallel streams (batchify); each step
reads the next --bptt characters of every stream, the LSTM's (h, c) carries
over from the previous step, detached (truncated backpropagation through
time), and Adam updates after clip_grad_norm_.  --sample N then draws N
characters one at a time from the model's distribution.
python/tests/test_char_rnn.py runs a few steps under both libraries from one
checkpoint and compares the losses."""
import argparse

import numpy as np

DEFAULT_TEXT = "/usr/share/common-licenses/GPL-3"


def define(torch):
    nn = torch.nn

    class CharRNN(nn.Module):
        """Embedding, a (multi-layer) LSTM over (batch, time, feature), and a
        linear decoder to logits over the characters."""

        def __init__(self, vocab, emsize, nhid, nlayers, dropout):
            super().__init__()
            self.encoder = nn.Embedding(vocab, emsize)
            self.rnn = nn.LSTM(emsize, nhid, nlayers, dropout=dropout, batch_first=True)
            self.drop = nn.Dropout(dropout)
            self.decoder = nn.Linear(nhid, vocab)
            self.nlayers, self.nhid = nlayers, nhid

        def forward(self, x, hidden=None):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return self.decoder(self.drop(out)), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))

    return CharRNN


def load_text(path, limit=None):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text[:limit] if limit else text


def batchify(text, chars, batch_size):
    """The text as character ids in batch_size rows of equal length (the
    remainder dropped), each row a contiguous stream."""
    index = {c: i for i, c in enumerate(chars)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    n = len(ids) // batch_size
    return ids[:n * batch_size].reshape(batch_size, n)


def repackage_hidden(h):
    """Detaches the state from its history, so backward stops at this step."""
    if isinstance(h, tuple):
        return tuple(repackage_hidden(v) for v in h)
    return h.detach()


def sample(torch, model, chars, n, temperature=1.0, prime="The "):
    """n characters after prime, each drawn from the model's distribution."""
    F = torch.nn.functional
    index = {c: i for i, c in enumerate(chars)}
    model.eval()
    out = []
    with torch.no_grad():
        x = torch.tensor([[index[c] for c in prime if c in index] or [0]], dtype=torch.long)
        logits, hidden = model(x)
        for _ in range(n):
            probs = F.softmax(logits[0, -1] / temperature, dim=-1)
            i = int(torch.multinomial(probs, 1)[0])
            out.append(chars[i])
            logits, hidden = model(torch.tensor([[i]], dtype=torch.long), hidden)
    model.train()
    return prime + "".join(out)


def train(torch, text=DEFAULT_TEXT, steps=100, batch_size=16, bptt=32, emsize=32, nhid=128,
          nlayers=2, dropout=0.0, lr=3e-3, clip=1.0, limit=None, init=None, save_init=None,
          samples=0, log_interval=10, log=print):
    """Trains for `steps` steps; returns the training losses (one per step)."""
    F = torch.nn.functional
    text = load_text(text, limit)
    chars = sorted(set(text))
    data = batchify(text, chars, batch_size)
    model = define(torch)(len(chars), emsize, nhid, nlayers, dropout)
    if init:
        model.load_state_dict(torch.load(init))
    if save_init:
        torch.save(model.state_dict(), save_init)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    hidden = model.init_hidden(batch_size)
    losses, pos = [], 0
    model.train()
    for step in range(steps):
        if pos + bptt + 1 > data.shape[1]:  # the streams are used up: start again
            pos, hidden = 0, model.init_hidden(batch_size)
        x = torch.tensor(data[:, pos:pos + bptt])
        y = torch.tensor(data[:, pos + 1:pos + bptt + 1])
        pos += bptt
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        logits, hidden = model(x, hidden)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
        if step % log_interval == 0:
            log(f"step {step:5d} | loss {losses[-1]:.4f}")
    if samples:
        log(sample(torch, model, chars, samples))
    return losses


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch", action="store_true", help="run under PyTorch")
    p.add_argument("--text", default=DEFAULT_TEXT, help="the training text")
    p.add_argument("--limit", type=int, help="use only the first N characters")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--bptt", type=int, default=32, help="characters per step and stream")
    p.add_argument("--emsize", type=int, default=32)
    p.add_argument("--nhid", type=int, default=128)
    p.add_argument("--nlayers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--sample", type=int, default=200, help="characters to sample at the end")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--init", help="load the initial weights from this checkpoint")
    p.add_argument("--save-init", help="save the initial weights to this checkpoint")
    args = p.parse_args(argv)
    if args.torch:
        import torch
    else:
        import jitgrad as torch
    torch.manual_seed(args.seed)
    train(torch, args.text, args.steps, args.batch_size, args.bptt, args.emsize, args.nhid,
          args.nlayers, args.dropout, args.lr, args.clip, args.limit, args.init, args.save_init,
          args.sample, args.log_interval)


if __name__ == "__main__":
    main()
