"""torch.utils.dlpack: tensors to and from DLPack capsules, without copies."""
from .._C import from_dlpack  # noqa: F401


def to_dlpack(tensor):
    """to_dlpack(tensor) -> capsule: the tensor's memory as a DLPack capsule
    (consumable once, by from_dlpack here, in NumPy or in PyTorch)."""
    return tensor.__dlpack__()
