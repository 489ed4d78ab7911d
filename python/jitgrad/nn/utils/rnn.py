"""nn.utils.rnn: pad_sequence; PackedSequence is a type the recurrent
layers recognise and refuse (packing is not supported: pad instead)."""
from collections import namedtuple

from ..._opsshape import cat, stack

_PackedSequenceBase = namedtuple("PackedSequence",
                                 ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedSequenceBase):
    """PyTorch's PackedSequence fields; no jitgrad function makes or takes
    one (the recurrent layers refuse it by name)."""


def _no_packing(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"jitgrad: nn.utils.rnn.{name} is not supported (packed "
                                  "sequences); pad the batch with pad_sequence and pass the "
                                  "padded tensor")

    fn.__name__ = name
    return fn


pack_padded_sequence = _no_packing("pack_padded_sequence")
pad_packed_sequence = _no_packing("pad_packed_sequence")
pack_sequence = _no_packing("pack_sequence")


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
