"""Collectives on gpucore tensors, in place and with PyTorch's signatures.

Every call first checks that all ranks passed tensors of the same shapes and dtypes (one small
all-reduce of a hash; a mismatch raises DistError on every rank listing what each passed), then
starts the MPI operation non-blocking: ``async_op=True`` returns a ``Work``, otherwise the call
waits. Ranks in ``src``/``dst`` are global ranks, as in PyTorch.
"""

from __future__ import annotations

import time

import numpy as np

from .. import dtypes as D
from ..errors import DistBackendError, DistError, ShapeError
from . import faults
from . import process_group as _pg
from .buffers import check_reducible, check_tensor, signature, stage
from .work import run


class ReduceOp:
    """The reductions: ``ReduceOp.SUM``, ``AVG``, ``PRODUCT``, ``MIN``, ``MAX``, ``BAND``,
    ``BOR``, ``BXOR``."""

    SUM: ReduceOp
    AVG: ReduceOp
    PRODUCT: ReduceOp
    MIN: ReduceOp
    MAX: ReduceOp
    BAND: ReduceOp
    BOR: ReduceOp
    BXOR: ReduceOp

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name.upper()}"


for _name in ("sum", "avg", "product", "min", "max", "band", "bor", "bxor"):
    setattr(ReduceOp, _name.upper(), ReduceOp(_name))


def _mpi_op(op, dtype, what: str):
    MPI = _pg._World.mpi
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{what}: op must be a gpucore.distributed.ReduceOp, got {op!r}")
    if dtype is D.bool_:  # MPI's logical ops on C bool: sum/max are "any", product/min "all"
        table = {"sum": MPI.LOR, "max": MPI.LOR, "bor": MPI.LOR, "product": MPI.LAND,
                 "min": MPI.LAND, "band": MPI.LAND, "bxor": MPI.LXOR}  # fmt: skip
        if op.name not in table:
            raise DistError(f"{what}: {op!r} is not defined on bool tensors")
        return table[op.name]
    table = {"sum": MPI.SUM, "avg": MPI.SUM, "product": MPI.PROD, "min": MPI.MIN,
             "max": MPI.MAX, "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR}  # fmt: skip
    return table[op.name]


def _group(group, what: str):
    return _pg.resolve(group, what)


def _average_then_write(staged, op: ReduceOp, size: int):
    """The completion of a reduction: AVG divides the sum by the ranks, then the tensor gets
    the result."""

    def finish():
        if op.name == "avg":
            np.divide(staged.array, size, out=staged.array)
        staged.write_back()

    return finish


def all_reduce(tensor, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` over the ranks of ``group`` and leave the result in it on every rank."""
    what = "all_reduce"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    check_reducible(t, getattr(op, "name", ""), what)
    mop = _mpi_op(op, t.dtype, what)
    _pg.check_same(pg, what, signature(what, [t], op=op.name))
    s = stage(t, reduce=True)
    req = pg.comm.Iallreduce(_pg._World.mpi.IN_PLACE, s.array, op=mop)
    finish = _average_then_write(s, op, pg.size())
    return run([req], pg, what, async_op, finish, [t], keep=(s,))


def broadcast(tensor, src: int, group=None, async_op: bool = False):
    """Copy ``tensor`` of rank ``src`` into ``tensor`` on every other rank of ``group``."""
    what = "broadcast"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    root = pg.group_rank(src, what, "src")
    _pg.check_same(pg, what, signature(what, [t], src=src))
    s = stage(t, reduce=False)
    req = pg.comm.Ibcast(s.array, root=root)
    finish = s.write_back if pg.rank() != root else None
    return run([req], pg, what, async_op, finish, [t], keep=(s,))


def reduce(tensor, dst: int, op: ReduceOp = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` over the ranks into ``tensor`` of rank ``dst`` (others keep theirs)."""
    what = "reduce"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    root = pg.group_rank(dst, what, "dst")
    check_reducible(t, getattr(op, "name", ""), what)
    mop = _mpi_op(op, t.dtype, what)
    _pg.check_same(pg, what, signature(what, [t], dst=dst, op=op.name))
    s = stage(t, reduce=True)
    me = pg.rank()
    if me == root:
        req = pg.comm.Ireduce(_pg._World.mpi.IN_PLACE, s.array, op=mop, root=root)
    else:
        req = pg.comm.Ireduce(s.array, None, op=mop, root=root)
    finish = _average_then_write(s, op, pg.size()) if me == root else None
    return run([req], pg, what, async_op, finish, [t], keep=(s,))


def _like(outs, t, what: str, arg: str, n: int) -> list:
    if not isinstance(outs, (list, tuple)) or len(outs) != n:
        raise ShapeError(f"{what}: {arg} must be a list of {n} tensors (one per rank)")
    for i, o in enumerate(outs):
        check_tensor(o, what, f"{arg}[{i}]")
        if o.shape != t.shape or o.dtype is not t.dtype:
            raise ShapeError(
                f"{what}: {arg}[{i}] is {tuple(o.shape)} {o.dtype}; every entry must match the "
                f"tensor ({tuple(t.shape)} {t.dtype})"
            )
    return list(outs)


def _scatter_rows(buf: np.ndarray, outs: list) -> None:
    for o, row in zip(outs, buf):
        stage_o = stage(o, reduce=False)
        np.copyto(stage_o.array.reshape(-1), row.reshape(-1))
        stage_o.write_back()


def all_gather(tensor_list: list, tensor, group=None, async_op: bool = False):
    """Every rank's ``tensor`` into ``tensor_list[rank]``, on every rank."""
    what = "all_gather"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    outs = _like(tensor_list, t, what, "tensor_list", pg.size())
    _pg.check_same(pg, what, signature(what, [t]))
    s = stage(t, reduce=False)
    buf = np.empty((pg.size(),) + s.array.shape, dtype=s.array.dtype)
    req = pg.comm.Iallgather(s.array, buf)
    return run([req], pg, what, async_op, lambda: _scatter_rows(buf, outs), outs, keep=(s, buf))


def _stacked(out, t, n: int, what: str, arg: str):
    check_tensor(out, what, arg)
    shape, oshape = tuple(t.shape), tuple(out.shape)
    cat = (n * shape[0],) + shape[1:] if shape else (n,)
    if out.dtype is not t.dtype or (oshape != cat and oshape != (n,) + shape):
        raise ShapeError(
            f"{what}: {arg} is {oshape} {out.dtype}; expected {cat} or {(n,) + shape} "
            f"{t.dtype} for {n} ranks' tensors of shape {shape}"
        )


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Every rank's ``input_tensor`` concatenated (dim 0) or stacked into ``output_tensor``."""
    what = "all_gather_into_tensor"
    t = check_tensor(input_tensor, what, "input_tensor")
    pg = _group(group, what)
    if pg is None:
        return None
    _stacked(output_tensor, t, pg.size(), what, "output_tensor")
    _pg.check_same(pg, what, signature(what, [t, output_tensor]))
    s, so = stage(t, reduce=False), stage(output_tensor, reduce=False)
    req = pg.comm.Iallgather(s.array, so.array)
    return run([req], pg, what, async_op, so.write_back, [output_tensor], keep=(s, so))


def reduce_scatter_tensor(output, input, op: ReduceOp = ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input`` (every rank's, of ``world_size`` blocks along dim 0) and leave block
    ``rank`` of the result in ``output``."""
    what = "reduce_scatter_tensor"
    t = check_tensor(input, what, "input")
    out = check_tensor(output, what, "output")
    pg = _group(group, what)
    if pg is None:
        return None
    _stacked(t, out, pg.size(), what, "input")
    check_reducible(t, getattr(op, "name", ""), what)
    mop = _mpi_op(op, t.dtype, what)
    _pg.check_same(pg, what, signature(what, [out, t], op=op.name))
    s, so = stage(t, reduce=True), stage(out, reduce=True)
    req = pg.comm.Ireduce_scatter_block(s.array, so.array, op=mop)
    finish = _average_then_write(so, op, pg.size())
    return run([req], pg, what, async_op, finish, [out], keep=(s, so))


def gather(tensor, gather_list=None, dst: int = 0, group=None, async_op: bool = False):
    """Every rank's ``tensor`` into ``gather_list`` on rank ``dst`` (None elsewhere)."""
    what = "gather"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    root = pg.group_rank(dst, what, "dst")
    me = pg.rank()
    outs = _like(gather_list, t, what, "gather_list", pg.size()) if me == root else []
    if me != root and gather_list:
        raise DistError(f"gather: gather_list must be None on ranks other than dst={dst}")
    _pg.check_same(pg, what, signature(what, [t], dst=dst))
    s = stage(t, reduce=False)
    buf = np.empty((pg.size(),) + s.array.shape, dtype=s.array.dtype) if me == root else None
    req = pg.comm.Igather(s.array, buf, root=root)
    finish = (lambda: _scatter_rows(buf, outs)) if me == root else None
    return run([req], pg, what, async_op, finish, outs, keep=(s, buf))


def scatter(tensor, scatter_list=None, src: int = 0, group=None, async_op: bool = False):
    """``scatter_list[rank]`` of rank ``src`` into ``tensor`` on every rank."""
    what = "scatter"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    root = pg.group_rank(src, what, "src")
    me = pg.rank()
    if me == root:
        ins = _like(scatter_list, t, what, "scatter_list", pg.size())
        buf = np.stack([stage(i, reduce=False).array for i in ins])
    elif scatter_list:
        raise DistError(f"scatter: scatter_list must be None on ranks other than src={src}")
    else:
        buf = None
    _pg.check_same(pg, what, signature(what, [t], src=src))
    s = stage(t, reduce=False)
    req = pg.comm.Iscatter(buf, s.array, root=root)
    return run([req], pg, what, async_op, s.write_back, [t], keep=(s, buf))


def barrier(group=None, async_op: bool = False, device_ids=None):
    """Wait until every rank of ``group`` has reached this call."""
    pg = _group(group, "barrier")
    if pg is None:
        return None
    return run([pg.comm.Ibarrier()], pg, "barrier", async_op)


def isend(tensor, dst: int, group=None, tag: int = 0):
    """Start sending ``tensor`` to rank ``dst``; returns a Work (keep ``tensor`` unchanged until
    ``wait()``)."""
    what = "isend"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    peer = pg.group_rank(dst, what, "dst")
    s = stage(t, reduce=False)
    req = pg.comm.Isend(s.array, dest=peer, tag=tag)
    return run([req], pg, what, True, None, [t], keep=(s,))


def irecv(tensor, src: int | None = None, group=None, tag: int = 0):
    """Start receiving into ``tensor`` from rank ``src`` (any rank when None); returns a Work."""
    what = "irecv"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return None
    MPI = _pg._World.mpi
    peer = MPI.ANY_SOURCE if src is None else pg.group_rank(src, what, "src")
    s = stage(t, reduce=False)
    req = pg.comm.Irecv(s.array, source=peer, tag=tag)
    return run([req], pg, what, True, s.write_back, [t], keep=(s,))


def send(tensor, dst: int, group=None, tag: int = 0) -> None:
    """Send ``tensor`` to rank ``dst`` (which must ``recv`` a tensor of the same size)."""
    work = isend(tensor, dst, group, tag)
    if work is not None:
        work.wait()


def recv(tensor, src: int | None = None, group=None, tag: int = 0) -> int:
    """Receive into ``tensor`` from rank ``src`` (any rank when None); returns the sender's rank.
    A message of another size raises DistError."""
    what = "recv"
    t = check_tensor(tensor, what)
    pg = _group(group, what)
    if pg is None:
        return -1
    MPI = _pg._World.mpi
    peer = MPI.ANY_SOURCE if src is None else pg.group_rank(src, what, "src")
    s = stage(t, reduce=False)
    status = MPI.Status()
    # probe first: a larger message would be an MPI truncation error, a smaller one would leave
    # part of the tensor stale without any error
    _wait_probe(pg, peer, tag, status, what)
    nbytes = status.Get_count(MPI.BYTE)
    if nbytes != s.array.nbytes:
        raise DistError(
            f"recv: rank {pg.ranks[status.Get_source()]} sent {nbytes} bytes but the tensor "
            f"{tuple(t.shape)} {t.dtype} holds {s.array.nbytes}; send and recv tensors of the "
            "same size and dtype"
        )
    peer = status.Get_source()
    run([pg.comm.Irecv(s.array, source=peer, tag=tag)], pg, what, False, s.write_back)
    return pg.ranks[peer]


def _wait_probe(pg, peer, tag, status, what: str) -> None:
    deadline = time.monotonic() + pg.timeout
    while not pg.comm.Iprobe(source=peer, tag=tag, status=status):
        faults.check(what)
        if time.monotonic() > deadline:
            raise DistBackendError(
                f"{what}: no message arrived within {pg.timeout:g} s; the sending rank failed "
                "or did not send"
            )
        time.sleep(0.0001)
