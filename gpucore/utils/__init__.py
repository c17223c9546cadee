"""``gpucore.utils``: helpers around training, as ``torch.utils`` (``gpucore.utils.data``: datasets,
samplers, the DataLoader)."""

from . import data
