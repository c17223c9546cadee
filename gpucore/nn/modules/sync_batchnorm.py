"""SyncBatchNorm: batch normalization whose statistics cover the batch of every rank."""

from __future__ import annotations

import numpy as np

from ...autograd.grad_mode import no_grad
from ...creation import from_numpy, full
from ...errors import ShapeError
from ...ops.joining import cat
from ..module import Module
from .normalization import _BatchNorm


def _global_sum(t, pg):
    """``t`` summed over the ranks of ``pg``, differentiably: the sum's gradient with respect to
    each rank's ``t`` is the sum of every rank's gradient with respect to the result (an
    all-reduce in backward too)."""
    # gpucore.distributed is needed only while training on several ranks
    from ...distributed import process_group as _pg  # noqa: PLC0415

    MPI = _pg._World.mpi

    def allreduce(x):
        arr = np.array(x.detach()._host(), dtype=x.dtype.np, order="C", copy=True)
        _pg.wait([pg.comm.Iallreduce(MPI.IN_PLACE, arr, op=MPI.SUM)], pg, "SyncBatchNorm")
        return from_numpy(arr).to(x.device.type)

    total = allreduce(t)
    out = t + (total - t).detach()
    if out._requires_grad:
        out.register_hook(allreduce)
    return out


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over inputs of 2 or more dims whose training statistics (mean and variance per
    channel, and the running averages) are computed over the batches of all ranks of
    ``process_group`` (default: the world), with gradients to match, as PyTorch's. Outside a
    process group, or in eval mode, it is an ordinary BatchNorm. ``convert_sync_batchnorm``
    swaps the BatchNorm layers of a model for it."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group=None,
        device=None,
        dtype=None,
    ):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.ndim < 2:
            raise ShapeError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input)")
        if input.shape[1] != self.num_features:
            raise ShapeError(
                f"SyncBatchNorm({self.num_features}): input of shape {tuple(input.shape)} has "
                f"{input.shape[1]} channels in dim 1"
            )

    def _group(self):
        # gpucore.distributed is needed only while training on several ranks
        from ... import distributed as dist  # noqa: PLC0415

        if not self.training or not dist.is_initialized():
            return None
        pg = dist.process_group.resolve(self.process_group, "SyncBatchNorm")
        return pg if pg is not None and pg.size() > 1 else None

    def forward(self, input):
        self._check_input_dim(input)
        pg = self._group()
        if pg is None:
            return super().forward(input)
        c = self.num_features
        dims = (0,) + tuple(range(2, input.ndim))
        shape = (1, c) + (1,) * (input.ndim - 2)
        count = full((1,), float(input.numel() // c), dtype=input.dtype, device=input.device.type)
        # two passes (mean, then the squared deviations from it): E[x^2] - mean^2 would lose
        # the variance of large-mean channels to cancellation
        first = _global_sum(cat([input.sum(dims), count]), pg)
        n = float(first[c].item())
        mean = first[:c] / n
        centered = input - mean.reshape(shape)
        var = _global_sum((centered * centered).sum(dims), pg) / n
        y = centered / (var + self.eps).sqrt().reshape(shape)
        if self.weight is not None:
            y = y * self.weight.reshape(shape)
        if self.bias is not None:
            y = y + self.bias.reshape(shape)
        if self.track_running_stats and self.running_mean is not None:
            self._update_running(mean.detach(), var.detach(), n)
        return y

    def _update_running(self, mean, var, n: float) -> None:
        with no_grad():
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                m = 1.0 / float(self.num_batches_tracked)
            else:
                m = self.momentum
            unbiased = var * (n / max(n - 1.0, 1.0))
            self.running_mean.mul_(1 - m).add_(mean.to(self.running_mean.dtype) * m)
            self.running_var.mul_(1 - m).add_(unbiased.to(self.running_var.dtype) * m)

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm layer replaced by a SyncBatchNorm holding the same
        parameters and running statistics (``module`` itself when it is one)."""
        out = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.train(module.training)
        for name, child in list(module.named_children()):
            setattr(out, name, cls.convert_sync_batchnorm(child, process_group))
        return out
