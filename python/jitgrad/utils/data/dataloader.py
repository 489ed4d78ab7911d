"""DataLoader and default_collate."""
import collections.abc
import numbers

import jitgrad

from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """None: jitgrad's DataLoader reads every sample in the calling process
    (PyTorch returns None there too)."""
    return None


def _stack(batch):
    if hasattr(jitgrad, "stack"):
        return jitgrad.stack(batch, 0)
    first = batch[0]
    for b in batch:
        if tuple(b.shape) != tuple(first.shape):
            raise RuntimeError("stack expects each tensor to be equal size, but got "
                               f"{list(first.shape)} at entry 0 and {list(b.shape)} at entry "
                               f"{batch.index(b)}")
    if any(b.requires_grad for b in batch) and jitgrad.is_grad_enabled():
        raise RuntimeError("default_collate: batching tensors that require grad needs "
                           "jitgrad.stack")
    out = jitgrad.zeros((len(batch),) + tuple(first.shape), dtype=first.dtype)
    with jitgrad.no_grad():
        for i, b in enumerate(batch):
            out[i] = b
    return out


def default_collate(batch):
    """Merges a list of samples into a batch as PyTorch's default_collate:
    tensors are stacked along a new first dimension, Python floats and ints
    become float64 and int64 tensors, strings stay a list, and tuples,
    lists, dicts and namedtuples are collated field by field."""
    elem = batch[0]
    if isinstance(elem, jitgrad.Tensor):
        return _stack(batch)
    if type(elem).__module__ == "numpy" and type(elem).__name__ == "ndarray":
        return _stack([jitgrad.from_numpy(b) for b in batch])
    if isinstance(elem, bool):
        return jitgrad.tensor(batch)
    if isinstance(elem, float):
        return jitgrad.tensor(batch, dtype=jitgrad.float64)
    if isinstance(elem, int):
        return jitgrad.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        merged = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(merged)
        except TypeError:
            return merged
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        n = len(elem)
        if not all(len(e) == n for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [default_collate(s) for s in transposed]
        try:
            return type(elem)([default_collate(s) for s in transposed])
        except TypeError:
            return [default_collate(s) for s in transposed]
    if isinstance(elem, numbers.Number):
        return jitgrad.tensor(batch)
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


def default_convert(data):
    """What a loader without batching applies to each sample (PyTorch's
    default_convert): numpy arrays become tensors, containers are converted
    item by item, everything else is left as it is."""
    if type(data).__module__ == "numpy" and type(data).__name__ == "ndarray":
        return jitgrad.from_numpy(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data


class DataLoader:
    """DataLoader(dataset, batch_size=1, shuffle=False, sampler=None,
    batch_sampler=None, num_workers=0, collate_fn=None, pin_memory=False,
    drop_last=False, ...)

    Iterates over batches of dataset, as PyTorch's: shuffle=True draws a new
    permutation from jitgrad's generator each epoch (the same after the same
    manual_seed; not PyTorch's numbers); batch_size=None yields single samples
    uncollated.  Everything runs in the calling process.  An IterableDataset
    is read once, in order, batch_size samples at a time (shuffle, sampler
    and batch_sampler are refused as PyTorch does; with num_workers > 0
    PyTorch would read one replica per worker, jitgrad reads it once)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=2, persistent_workers=False, pin_memory_device=""):
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if self._iterable:
            sampler = _InfiniteConstantSampler()
        elif sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    def __iter__(self):
        if self._iterable:
            yield from self._iter_stream()
            return
        if self.batch_sampler is None:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])
        else:
            for idx in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in idx])

    def _iter_stream(self):
        """An IterableDataset's samples in order, batch_size at a time (the
        last, shorter batch dropped with drop_last)."""
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:  # the dataset's own length, in batches
            length = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last \
                    else -(-length // self.batch_size)
            return length
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


class _InfiniteConstantSampler:
    """The sampler of a loader over an IterableDataset: None forever (the
    dataset itself decides what comes next)."""

    def __iter__(self):
        while True:
            yield None
