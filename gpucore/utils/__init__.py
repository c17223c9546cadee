"""``gpucore.utils``: helpers around training, as ``torch.utils`` (``gpucore.utils.data``: datasets,
samplers, the DataLoader; ``gpucore.utils.checkpoint``: activation checkpointing)."""

from . import checkpoint, data
