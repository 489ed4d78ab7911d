"""Samplers: the order in which a DataLoader visits a dataset's indices."""
import jitgrad


def _randperm(n, generator=None):
    """A random permutation of range(n) from generator (a jitgrad.Generator;
    None: the global generator, the same after the same manual_seed)."""
    if n == 0:
        return []
    return jitgrad.randperm(n, generator=generator).tolist()


class Sampler:
    """Base class of samplers: iterating gives dataset indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A fresh random permutation at each iteration (replacement=False), or
    num_samples indices drawn uniformly with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            u = jitgrad.rand(self.num_samples, dtype=jitgrad.float64,
                             generator=self.generator).tolist()
            return iter([min(int(v * n), n - 1) for v in u])
        out = []
        for _ in range(self.num_samples // n):
            out += _randperm(n, self.generator)
        out += _randperm(n, self.generator)[: self.num_samples % n]
        return iter(out)

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        return (self.indices[i] for i in _randperm(len(self.indices), self.generator))

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError("drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
