"""nn.utils.rnn: PackedSequence and pack_padded_sequence /
pad_packed_sequence / pack_sequence / pad_sequence with PyTorch 1.13's
layout (data holds step 0 of every sequence, then step 1 of those still
running, ...; sequences sorted by decreasing length), composed of
differentiable indexing, cat and stack."""
from collections import namedtuple

from ... import _C
from ..._opsshape import cat, stack

_PackedSequenceBase = namedtuple("PackedSequence",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def _invert_permutation(permutation):
    if permutation is None:
        return None
    order = permutation.tolist()
    inverse = [0] * len(order)
    for i, j in enumerate(order):
        inverse[j] = i
    return _C.tensor(inverse, dtype=_C.int64)


class PackedSequence(_PackedSequenceBase):
    """data (sum(batch_sizes), *), batch_sizes (int64, one per time step),
    sorted_indices (None when the batch was already sorted) and its inverse
    unsorted_indices."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = _invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _lengths_list(lengths):
    if isinstance(lengths, _C.Tensor):
        lengths = lengths.tolist()
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded (T, B, *) batch (batch_first: (B, T, *)) whose sequence
    b has lengths[b] valid steps."""
    lengths = _lengths_list(lengths)
    batch_dim = 0 if batch_first else 1
    if enforce_sorted:
        if any(a < b for a, b in zip(lengths, lengths[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        sorted_indices = _C.tensor(order, dtype=_C.int64)
        input = input.index_select(batch_dim, sorted_indices)
        lengths = [lengths[i] for i in order]
    if batch_first:
        input = input.transpose(0, 1)
    if len(lengths) != input.size(1):
        raise RuntimeError("Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={input.size(1)})")
    if lengths and lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if lengths and lengths[0] > input.size(0):
        raise RuntimeError(f"jitgrad: a length ({lengths[0]}) exceeds the padded sequence "
                           f"length ({input.size(0)})")
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0] if lengths else 0)]
    data = cat([input[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _C.tensor(batch_sizes, dtype=_C.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of pack_padded_sequence: (padded, lengths), in the order
    the batch had before packing."""
    from ... import full
    data, batch_sizes = sequence.data, [int(b) for b in sequence.batch_sizes.tolist()]
    max_len, batch = len(batch_sizes), batch_sizes[0]
    if total_length is not None:
        if total_length < max_len:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {max_len}")
    else:
        total_length = max_len
    trailing = tuple(data.shape)[1:]
    steps = []
    for chunk, b in zip(data.split(batch_sizes, 0), batch_sizes):
        if b < batch:
            chunk = cat([chunk, full((batch - b,) + trailing, padding_value, dtype=data.dtype)],
                        0)
        steps.append(chunk)
    padded = stack(steps, 0)
    if total_length > max_len:
        padded = cat([padded, full((total_length - max_len, batch) + trailing, padding_value,
                                   dtype=data.dtype)], 0)
    lengths = [sum(1 for b in batch_sizes if b > i) for i in range(batch)]
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = [lengths[i] for i in sequence.unsorted_indices.tolist()]
    if batch_first:
        padded = padded.transpose(0, 1)
    return padded, _C.tensor(lengths, dtype=_C.int64)


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Stacks tensors of shapes (L_i, *) into (L_max, B, *) (batch_first:
    (B, L_max, *)), padding with padding_value; differentiable."""
    from ... import full
    sequences = list(sequences)
    if len(sequences) == 0:
        raise RuntimeError("received an empty list of sequences")
    max_len = max(s.size(0) for s in sequences)
    padded = []
    for s in sequences:
        if s.size(0) < max_len:
            pad = full((max_len - s.size(0),) + tuple(s.shape)[1:], padding_value,
                       dtype=s.dtype)
            s = cat([s, pad], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of (L_i, *) tensors (pad_sequence, then
    pack_padded_sequence)."""
    lengths = [s.size(0) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)
