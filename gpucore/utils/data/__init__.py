"""``gpucore.utils.data``: datasets, samplers and the DataLoader, as ``torch.utils.data``.

    from gpucore.utils.data import DataLoader, TensorDataset, random_split

    train, val = random_split(TensorDataset(x, y), [0.9, 0.1])
    for xb, yb in DataLoader(train, batch_size=64, shuffle=True, num_workers=2):
        ...

Modules: dataset.py (Dataset, IterableDataset and their combinations), sampler.py, collate.py
(default_collate), fetch.py (a batch from a dataset), dataloader.py, iterator.py (the
single-process iterator), multiprocess.py and worker.py (the two sides of worker processes),
distributed.py (DistributedSampler).
"""

from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .worker import WorkerInfo, get_worker_info

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
