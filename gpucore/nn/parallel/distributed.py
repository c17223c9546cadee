"""DistributedDataParallel: the same model on every rank, gradients averaged during backward."""

from __future__ import annotations

import contextlib

import numpy as np

from ...autograd.grad_mode import is_grad_enabled
from ...distributed import objects as _objects
from ...distributed import process_group as _pg
from ...distributed.buffers import stage
from ...distributed.reducer import Reducer
from ...errors import DistError
from ..module import Module


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training over the ranks of ``process_group``.

    At construction the ranks check that they hold the same parameters (names, shapes, dtypes)
    and take rank 0's parameters and buffers. During each backward, gradients are averaged over
    the ranks in buckets whose all-reduce overlaps the rest of backward (``reducer``); after it
    every rank holds the same ``.grad``, so the same optimizer step keeps the replicas equal.
    ``no_sync()`` skips the averaging (gradient accumulation); ``find_unused_parameters``
    allows parameters that receive no gradient in some iterations; ``broadcast_buffers``
    (default) copies rank 0's buffers (BatchNorm's running statistics) to every rank at each
    forward, as PyTorch does. ``device_ids``, ``output_device``, ``gradient_as_bucket_view`` and
    ``static_graph`` are accepted for compatibility and change nothing. The wrapped model is
    ``.module``; the state_dict's keys start with ``module.``, as PyTorch's.
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group=None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(
                f"DistributedDataParallel: module must be a gpucore.nn.Module, got "
                f"{type(module).__name__}"
            )
        pg = _pg.resolve(process_group, "DistributedDataParallel")
        if pg is None:
            raise DistError("DistributedDataParallel: this rank is not in process_group")
        cap = 25.0 if bucket_cap_mb is None else float(bucket_cap_mb)
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {cap}")
        self.module = module
        self.process_group = pg
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.dim = dim
        named = list(module.named_parameters())
        _check_replicas(pg, named, list(module.named_buffers()))
        _broadcast_coalesced(pg, [p for _, p in named] + list(module.buffers()))
        object.__setattr__(
            self, "reducer", Reducer(named, pg, int(cap * 2**20), find_unused_parameters)
        )

    def forward(self, *args, **kwargs):
        """Run the wrapped module (first taking rank 0's buffers) and arm the gradient
        reduction for the backward pass that follows."""
        if self.broadcast_buffers and self.process_group.size() > 1:
            bufs = list(self.module.buffers())
            if bufs:
                _broadcast_coalesced(self.process_group, bufs)
        if is_grad_enabled() and self.require_backward_grad_sync:
            self.reducer.prepare()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate gradients locally without averaging them; the
        first backward after the block averages everything accumulated."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def extra_repr(self) -> str:
        return f"world_size={self.process_group.size()}, buckets={self.reducer.bucket_sizes()}"


def _check_replicas(pg, named_params: list, named_buffers: list) -> None:
    mine = [(n, tuple(p.shape), str(p.dtype)) for n, p in named_params + named_buffers]
    everyone = [None] * pg.size()
    _objects.all_gather_object(everyone, mine, group=_group_arg(pg))
    for rank, theirs in zip(pg.ranks, everyone):
        if theirs == everyone[0]:
            continue
        first = everyone[0]
        for i in range(max(len(first), len(theirs))):
            a = first[i] if i < len(first) else None
            b = theirs[i] if i < len(theirs) else None
            if a != b:
                raise DistError(
                    "DistributedDataParallel: the ranks hold different models: parameter/buffer "
                    f"#{i} is {a} on rank {pg.ranks[0]} but {b} on rank {rank} "
                    f"({len(first)} against {len(theirs)} tensors); build the same model on "
                    "every rank"
                )


def _group_arg(pg):
    return None if pg is _pg._World.world else pg


def _broadcast_coalesced(pg, tensors: list) -> None:
    """Rank 0's values of ``tensors`` on every rank, one broadcast per dtype."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(stage(t, reduce=False))
    reqs, work = [], []
    for staged in by_dtype.values():
        flat = np.concatenate([s.array.reshape(-1) for s in staged])
        reqs.append(pg.comm.Ibcast(flat, root=0))
        work.append((staged, flat))
    _pg.wait(reqs, pg, "DistributedDataParallel broadcast from rank 0")
    if pg.rank() == 0:
        return
    for staged, flat in work:
        at = 0
        for s in staged:
            n = s.array.size
            np.copyto(s.array.reshape(-1), flat[at : at + n])
            at += n
            s.write_back()
