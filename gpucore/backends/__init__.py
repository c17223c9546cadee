"""Backends: each runs registry ops on its own storage. ``cpu`` is always present.

``cudnn``, ``cuda`` and ``mps`` are not backends of gpucore: they hold PyTorch's switches of the
same names (``gpucore.backends.cudnn.benchmark = True``), accepted so that scripts run."""

from . import cuda, cudnn, mps
