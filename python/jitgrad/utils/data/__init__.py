"""torch.utils.data for jitgrad: datasets, samplers and a DataLoader that
batches in the calling process (num_workers is accepted; the order and
contents of batches are those PyTorch's loader gives with workers, but the
work is not parallel)."""
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info  # noqa: F401
from .dataset import (  # noqa: F401
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .sampler import (  # noqa: F401
    BatchSampler,
    DistributedSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
