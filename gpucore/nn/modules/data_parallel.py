"""DataParallel: PyTorch's single-process multi-GPU wrapper. gpucore has no CUDA devices to
replicate onto, so it runs the wrapped module as it is (as PyTorch's DataParallel does when it
finds no GPU): scripts that wrap their model keep working, and ``state_dict()`` keys carry the
``module.`` prefix PyTorch's do."""

from __future__ import annotations

from ..module import Module


class DataParallel(Module):
    """Wraps ``module``; calls run it directly. ``device_ids``, ``output_device`` and ``dim`` are
    accepted and kept (there is nothing to scatter to); use
    ``DistributedDataParallel`` to train on several processes."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(
                f"DataParallel: module must be an nn.Module, got {type(module).__name__}"
            )
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
