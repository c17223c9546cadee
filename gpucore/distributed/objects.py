"""Collectives of picklable Python objects (metrics, configs, small state), as PyTorch's
``broadcast_object_list`` / ``all_gather_object`` / ``gather_object``.

Objects travel pickled, so only use them with ranks you trust (unpickling runs code). Each call
exchanges the pickles' lengths first, then the bytes, both bounded by the group's timeout.
"""

from __future__ import annotations

import pickle

import numpy as np

from ..errors import DistError
from . import process_group as _pg


def _pickles(pg, what: str, mine: bytes) -> list:
    sizes = np.zeros(pg.size(), dtype=np.int64)
    _pg.wait([pg.comm.Iallgather(np.array([len(mine)], dtype=np.int64), sizes)], pg, what)
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    send = np.frombuffer(mine, dtype=np.uint8)
    _pg.wait([pg.comm.Iallgatherv(send, [out, sizes, displs, _pg._World.mpi.BYTE])], pg, what)
    return [out[d : d + n].tobytes() for d, n in zip(displs, sizes)]


def all_gather_object(object_list: list, obj, group=None) -> None:
    """Every rank's ``obj`` into ``object_list[rank]``, on every rank."""
    pg = _pg.resolve(group, "all_gather_object")
    if pg is None:
        return
    if not isinstance(object_list, list) or len(object_list) != pg.size():
        raise DistError(f"all_gather_object: object_list must be a list of {pg.size()} entries")
    for i, p in enumerate(_pickles(pg, "all_gather_object", pickle.dumps(obj))):
        object_list[i] = pickle.loads(p)


def gather_object(obj, object_gather_list=None, dst: int = 0, group=None) -> None:
    """Every rank's ``obj`` into ``object_gather_list`` on rank ``dst``."""
    pg = _pg.resolve(group, "gather_object")
    if pg is None:
        return
    root = pg.group_rank(dst, "gather_object", "dst")
    if pg.rank() == root and (
        not isinstance(object_gather_list, list) or len(object_gather_list) != pg.size()
    ):
        raise DistError(f"gather_object: object_gather_list must be a list of {pg.size()} entries")
    got = _pickles(pg, "gather_object", pickle.dumps(obj))
    if pg.rank() == root:
        for i, p in enumerate(got):
            object_gather_list[i] = pickle.loads(p)


def broadcast_object_list(object_list: list, src: int = 0, group=None, device=None) -> None:
    """Replace ``object_list``'s entries on every rank by those of rank ``src``."""
    pg = _pg.resolve(group, "broadcast_object_list")
    if pg is None:
        return
    root = pg.group_rank(src, "broadcast_object_list", "src")
    if not isinstance(object_list, list):
        raise DistError("broadcast_object_list: object_list must be a list")
    mine = pickle.dumps(object_list) if pg.rank() == root else b""
    got = pickle.loads(_pickles(pg, "broadcast_object_list", mine)[root])
    if len(got) != len(object_list):
        raise DistError(
            f"broadcast_object_list: rank {src} sent {len(got)} objects but this rank's list "
            f"has {len(object_list)}; pass lists of the same length"
        )
    object_list[:] = got
