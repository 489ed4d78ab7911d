"""Dictionary and Corpus for the word-level language model: text is split
into words, each line ends with <eos>, and every word gets an id.  Without a
data folder the corpus is a small generated one (a toy grammar, a fixed
seed), so the example needs no download."""
import os
import random

SUBJECTS = ["the cat", "a dog", "the old man", "my sister", "the bird", "a child", "the teacher"]
VERBS = ["sees", "likes", "finds", "follows", "feeds", "draws", "hears"]
OBJECTS = ["the ball", "a tree", "the river", "an apple", "the house", "a red box", "the moon"]
ENDINGS = ["today", "again", "at night", "in the park", "near the sea", "", "", ""]


def generated_text(n_lines, seed):
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(ENDINGS)]
        if rng.random() < 0.3:
            words += ["and", rng.choice(VERBS), rng.choice(OBJECTS)]
        lines.append(" ".join(w for w in words if w) + " .")
    return "\n".join(lines) + "\n"


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    """train/valid/test as 1-D int64 tensors of word ids.  path: a folder
    with train.txt, valid.txt and test.txt; None: the generated corpus."""

    def __init__(self, torch, path=None):
        self.torch = torch
        self.dictionary = Dictionary()
        if path is None:
            texts = [generated_text(n, seed) for n, seed in ((400, 1), (60, 2), (60, 3))]
        else:
            texts = []
            for name in ("train.txt", "valid.txt", "test.txt"):
                with open(os.path.join(path, name), "r", encoding="utf8") as f:
                    texts.append(f.read())
        self.train, self.valid, self.test = (self.tokenize(t) for t in texts)

    def tokenize(self, text):
        torch = self.torch
        idss = []
        for line in text.splitlines():
            words = line.split() + ["<eos>"]
            ids = [self.dictionary.add_word(word) for word in words]
            idss.append(torch.tensor(ids).type(torch.int64))
        return torch.cat(idss)
