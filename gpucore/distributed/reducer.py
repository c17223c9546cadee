"""DDP's gradient reducer: parameters in buckets, each bucket all-reduced as soon as it is ready.

Buckets hold parameters in reverse registration order (the order backward usually produces
their gradients), split by dtype; the first bucket is small (1 MiB, as PyTorch) so communication
starts early in the backward pass, the others hold up to ``bucket_cap_mb``. A hook after each
gradient's accumulation marks its parameter ready; when a bucket is complete the gradients are
copied into its flat buffer and a non-blocking all-reduce starts, while backward goes on with the
layers below. Buckets start strictly in index order on every rank (MPI matches collectives by
order), and every hook also advances the reductions in flight. When backward ends (an autograd
callback), the remaining buckets are reduced, everything is waited for, divided by the world size
and copied back into ``.grad``. The reduction order is fixed by the bucket layout and MPI's
algorithm, so results are bitwise the same run to run for a fixed number of ranks.

The reducer has a communicator of its own, so a user's collectives (or SyncBatchNorm's) issued
during backward never interleave with its buckets.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.engine import queue_callback
from ..autograd.grad_mode import no_grad
from ..creation import from_numpy
from ..errors import DistError
from . import process_group as _pg

FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    __slots__ = ("params", "offsets", "buffer", "pending", "request")

    def __init__(self, params: list, np_dtype):
        self.params = params  # (index, name, parameter)
        sizes = [p.numel() for _, _, p in params]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.buffer = np.empty(int(self.offsets[-1]), dtype=np_dtype)
        self.pending = len(params)
        self.request = None


def _reduce_dtype(t) -> np.dtype:
    return np.dtype(np.float64) if t.dtype is D.float64 else np.dtype(np.float32)


class Reducer:
    """Averages the gradients of ``named_params`` over the ranks of ``pg`` during backward."""

    def __init__(self, named_params: list, pg, bucket_cap_bytes: int, find_unused: bool):
        self.pg = pg
        self.comm = pg.comm.Dup()
        self.find_unused = find_unused
        self.named = [(n, p) for n, p in named_params if p._requires_grad]
        self.buckets: list[_Bucket] = []
        self.where: dict[int, tuple] = {}  # id(param) -> (bucket, position)
        self._build(bucket_cap_bytes)
        self.armed = False
        self.started = False
        self.ready: list[bool] = []
        self.next_bucket = 0
        self.hooks = [p.register_post_accumulate_grad_hook(self._on_grad) for _, p in self.named]

    def _build(self, cap: int) -> None:
        open_by_dtype: dict = {}
        limit = min(FIRST_BUCKET_BYTES, cap)
        for index in reversed(range(len(self.named))):
            name, p = self.named[index]
            dt = _reduce_dtype(p)
            cur = open_by_dtype.setdefault(dt, [[], 0])
            nbytes = p.numel() * dt.itemsize
            if cur[0] and cur[1] + nbytes > limit:
                self.buckets.append(_Bucket(cur[0], dt))
                open_by_dtype[dt] = cur = [[], 0]
                limit = cap
            cur[0].append((index, name, p))
            cur[1] += nbytes
        for dt, (params, _) in open_by_dtype.items():
            if params:
                self.buckets.append(_Bucket(params, dt))
        for b in self.buckets:
            for pos, (_, _, p) in enumerate(b.params):
                self.where[id(p)] = (b, pos)

    def bucket_sizes(self) -> list:
        """The number of parameters in each bucket, in reduction order."""
        return [len(b.params) for b in self.buckets]

    def prepare(self) -> None:
        """Arm the reducer for the backward pass of the forward being run."""
        if any(b.request is not None for b in self.buckets):
            raise DistError(
                "DistributedDataParallel: the previous iteration's gradient reduction did not "
                "finish (its backward raised?); the ranks are out of step: restart the job"
            )
        self.armed = True
        self.started = False
        self.ready = [False] * len(self.named)
        for b in self.buckets:
            b.pending = len(b.params)
        self.next_bucket = 0

    def _on_grad(self, param) -> None:
        if not self.armed:
            return
        entry = self.where.get(id(param))
        if entry is None:
            return
        b, pos = entry
        index = b.params[pos][0]
        if self.ready[index]:
            return  # a parameter used twice gets one hook per use; its gradient is complete now
        if not self.started:
            self.started = True
            queue_callback(self._finish)
        self.ready[index] = True
        b.pending -= 1
        self._launch_ready()
        self._progress()

    def _launch_ready(self) -> None:
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1

    def _launch(self, b: _Bucket) -> None:
        buf = b.buffer
        for pos, (_, _, p) in enumerate(b.params):
            view = buf[b.offsets[pos] : b.offsets[pos + 1]]
            g = p.grad
            if g is None:
                view.fill(0)
            else:
                np.copyto(view, np.asarray(g.detach()._host(), dtype=buf.dtype).reshape(-1))
        b.request = self.comm.Iallreduce(_pg._World.mpi.IN_PLACE, buf, op=_pg._World.mpi.SUM)

    def _progress(self) -> None:
        reqs = [b.request for b in self.buckets if b.request is not None]
        if reqs:
            _pg._World.mpi.Request.Testall(reqs)

    def _finish(self) -> None:
        self.armed = False
        missing = [self.named[i][0] for i, r in enumerate(self.ready) if not r]
        if missing and not self.find_unused:
            self.ready = [True] * len(self.named)
            for b in self.buckets:
                b.pending = 0
            self._launch_ready()  # keep the ranks in step before raising
            self._wait()
            raise DistError(
                "DistributedDataParallel: these parameters received no gradient in this "
                f"backward pass: {missing[:10]}{' ...' if len(missing) > 10 else ''}; pass "
                "find_unused_parameters=True if the model does not use every parameter in "
                "every forward pass"
            )
        for b in self.buckets:
            b.pending = 0
        self._launch_ready()
        used = None
        if self.find_unused:
            used = np.array([p.grad is not None for _, p in self.named], dtype=np.uint8)
            reqs = [self.comm.Iallreduce(_pg._World.mpi.IN_PLACE, used, op=_pg._World.mpi.MAX)]
            _pg.wait(reqs, self.pg, "DistributedDataParallel (unused parameters)")
        self._wait()
        world = self.pg.size()
        for b in self.buckets:
            np.divide(b.buffer, world, out=b.buffer)
            for pos, (index, _, p) in enumerate(b.params):
                if used is not None and not used[index]:
                    continue  # no rank computed a gradient: leave .grad as it is (None)
                _store(p, b.buffer[b.offsets[pos] : b.offsets[pos + 1]])

    def _wait(self) -> None:
        reqs = [b.request for b in self.buckets if b.request is not None]
        try:
            _pg.wait(reqs, self.pg, "DistributedDataParallel gradient all_reduce")
        finally:
            for b in self.buckets:
                b.request = None

    def remove(self) -> None:
        """Unregister the hooks and free the communicator."""
        for h in self.hooks:
            h.remove()
        self.hooks = []
        self.comm.Free()


def _store(p, flat: np.ndarray) -> None:
    g = p.grad
    if (
        g is not None
        and g._dev is None
        and g.dtype.np == flat.dtype
        and g._data.flags.c_contiguous
        and g._data.flags.writeable
    ):
        np.copyto(g._data.reshape(-1), flat)
        g._vbox[0] += 1
        return
    value = from_numpy(flat.reshape(tuple(p.shape)).copy())
    with no_grad():
        if g is None:
            value = value.to(p.dtype)
            p.grad = value if p._dev is None else value.to(p.device.type)
        else:
            g.copy_(value)
