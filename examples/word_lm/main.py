"""Word-level language modelling: trains a Transformer (or an LSTM) to
predict the next word, in the style of PyTorch's word_language_model
example.  The same file runs under PyTorch and under jitgrad imported as
torch; only the import differs.

    python3 examples/word_lm/main.py --steps 20            # jitgrad
    python3 examples/word_lm/main.py --steps 20 --torch    # PyTorch
    ... --save-init w.pt / --init w.pt                     # one initialization for both
    ... --data DIR     # DIR/train.txt, valid.txt, test.txt instead of the built-in corpus
    ... --words 30     # then sample 30 words from the trained model

It prints the loss of every training step and the validation and test
perplexities; python/tests/test_word_lm.py runs it under both libraries
from one checkpoint and compares the losses."""
import argparse
import importlib.util
import math
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    # the sibling files, under names that cannot clash with other modules
    spec = importlib.util.spec_from_file_location(f"word_lm_{name}",
                                                  os.path.join(HERE, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


lm_data = _load("data")
lm_model = _load("model")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--torch", action="store_true", help="run on PyTorch instead of jitgrad")
    p.add_argument("--data", type=str, default=None,
                   help="folder with train.txt, valid.txt, test.txt (default: built-in corpus)")
    p.add_argument("--model", type=str, default="Transformer",
                   help="Transformer, LSTM, GRU, RNN_TANH or RNN_RELU")
    p.add_argument("--emsize", type=int, default=32, help="size of word embeddings")
    p.add_argument("--nhid", type=int, default=64,
                   help="hidden units per layer (the Transformer's feed-forward size)")
    p.add_argument("--nlayers", type=int, default=2, help="number of layers")
    p.add_argument("--nhead", type=int, default=2, help="attention heads (Transformer)")
    p.add_argument("--lr", type=float, default=1.0, help="initial learning rate")
    p.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
    p.add_argument("--epochs", type=int, default=2, help="upper epoch limit")
    p.add_argument("--steps", type=int, default=0,
                   help="stop after this many training batches in all (0: no limit)")
    p.add_argument("--batch_size", type=int, default=8, metavar="N", help="batch size")
    p.add_argument("--bptt", type=int, default=12, help="sequence length")
    p.add_argument("--dropout", type=float, default=0.2, help="dropout (0 = no dropout)")
    p.add_argument("--optimizer", type=str, default="plain",
                   help="plain (p.data.add_(p.grad, alpha=-lr)), sgd or adam (torch.optim)")
    p.add_argument("--seed", type=int, default=1111, help="random seed")
    p.add_argument("--log-interval", type=int, default=10, metavar="N", help="report interval")
    p.add_argument("--save", type=str, default="", help="where to save the best model")
    p.add_argument("--words", type=int, default=0, help="words to generate after training")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature (higher: more diverse)")
    p.add_argument("--init", type=str, default="", help="load the initial weights from here")
    p.add_argument("--save-init", type=str, default="", help="save the initial weights here")
    return p.parse_args(argv)


def batchify(data, bsz):
    """(N,) ids -> (N // bsz, bsz): bsz independent streams, one per column."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)  # drop what does not fill a column
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    """Inputs source[i:i+L] and, flattened, the next word of each: source[i+1:i+1+L]."""
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    """Detaches hidden states from their history (truncated backpropagation)."""
    if isinstance(h, tuple):
        return tuple(repackage_hidden(v) for v in h)
    return h.detach()


def build(torch, args, ntokens):
    models = lm_model.define(torch)
    if args.model == "Transformer":
        return models.TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers,
                                       args.dropout)
    return models.RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers,
                           args.dropout)


def generate(torch, model, args, dictionary, log=print):
    """Samples args.words words, one at a time, each from the model's
    distribution given the words so far."""
    model.eval()
    ntokens = len(dictionary)
    input = torch.randint(ntokens, (1, 1), dtype=torch.long)
    hidden = None if args.model == "Transformer" else model.init_hidden(1)
    words = []
    with torch.no_grad():
        for _ in range(args.words):
            if args.model == "Transformer":
                output = model(input, False)
                word_weights = output[-1].squeeze().div(args.temperature).exp()
                word_idx = torch.multinomial(word_weights, 1)[0]
                word_tensor = torch.tensor([[word_idx]], dtype=torch.long)
                input = torch.cat([input, word_tensor], 0)
            else:
                output, hidden = model(input, hidden)
                word_weights = output.squeeze().div(args.temperature).exp()
                word_idx = torch.multinomial(word_weights, 1)[0]
                input.fill_(word_idx)
            word = dictionary.idx2word[word_idx]
            words.append("\n" if word == "<eos>" else word + " ")
    log("".join(words))
    return words


def run(torch, args, log=print):
    """Trains and evaluates; returns the training losses (one per step) and
    the validation losses (one per epoch) and the final test loss."""
    torch.manual_seed(args.seed)
    corpus = lm_data.Corpus(torch, args.data)
    eval_batch_size = 4
    train_data = batchify(corpus.train, args.batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    test_data = batchify(corpus.test, eval_batch_size)
    ntokens = len(corpus.dictionary)

    model = build(torch, args, ntokens)
    if args.init:
        model.load_state_dict(torch.load(args.init))
    if args.save_init:
        torch.save(model.state_dict(), args.save_init)
    criterion = torch.nn.NLLLoss()
    optimizer = None
    if args.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    elif args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    elif args.optimizer != "plain":
        raise ValueError(f"--optimizer must be plain, sgd or adam, not {args.optimizer}")

    def forward(data, hidden):
        if args.model == "Transformer":
            return model(data).view(-1, ntokens), None
        return model(data, repackage_hidden(hidden))

    def evaluate(data_source):
        model.eval()
        total_loss = 0.0
        hidden = None if args.model == "Transformer" else model.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                output, hidden = forward(data, hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    lr = args.lr
    best_val_loss = None
    losses, val_losses, step = [], [], 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        start = time.time()
        hidden = None if args.model == "Transformer" else model.init_hidden(args.batch_size)
        total_loss = 0.0
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            output, hidden = forward(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            # clipping keeps exploding gradients (common in language models) in check
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            if optimizer is None:
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
            else:
                optimizer.step()
            losses.append(loss.item())
            total_loss += losses[-1]
            step += 1
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                log(f"| epoch {epoch:3d} | batch {batch:4d} | lr {lr:.2f} | "
                    f"ms/batch {(time.time() - start) * 1000 / args.log_interval:6.1f} | "
                    f"loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")
                total_loss = 0.0
                start = time.time()
            if step == args.steps:
                break
        val_loss = evaluate(val_data)
        val_losses.append(val_loss)
        log(f"| end of epoch {epoch:3d} | step {step:4d} | valid loss {val_loss:5.2f} | "
            f"valid ppl {math.exp(val_loss):8.2f}")
        if best_val_loss is None or val_loss < best_val_loss:
            if args.save:
                torch.save(model.state_dict(), args.save)
            best_val_loss = val_loss
        else:
            lr /= 4.0  # no improvement on the validation set: anneal
        if step == args.steps:
            break

    if args.save:  # the best model, as saved
        model.load_state_dict(torch.load(args.save))
    test_loss = evaluate(test_data)
    log(f"| end of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    if args.words:
        generate(torch, model, args, corpus.dictionary, log)
    return {"train": losses, "valid": val_losses, "test": test_loss}


def main(argv=None):
    args = parse_args(argv)
    if args.torch:
        import torch
    else:
        import jitgrad as torch
    run(torch, args)


if __name__ == "__main__":
    main()
