"""The worker side of multi-process loading (PyTorch's ``torch.utils.data._utils.worker``):
``get_worker_info``, the per-worker seeding, the loop each worker process runs, and the
wrapper that carries a worker's exception, with its traceback, to the main process.

Seeding, as PyTorch: worker ``i`` of a loader whose iterator drew ``base_seed`` seeds Python's
``random`` and gpucore's default generator with ``base_seed + i``, and numpy's global generator
with a SeedSequence-style state derived from both (``_generate_state``, PyTorch's function, so
numpy draws in workers match PyTorch's for the same base seed).

Tensors cross process boundaries by value, through ``Tensor.__reduce_ex__`` (their values,
dtype, device and ``requires_grad``, rebuilt as fresh leaves in aligned storage), so batches,
datasets sent to spawned workers and tensors on any ``multiprocessing`` queue need nothing here.
"""

from __future__ import annotations

import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from ..._cpu import set_num_threads
from ...random import manual_seed
from .fetch import create_fetcher

__all__ = ["WorkerInfo", "get_worker_info"]

STATUS_CHECK_INTERVAL = 0.5  # seconds between checks that the other side is still alive


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: its ``id`` (0 .. num_workers - 1),
    ``num_workers``, the ``seed`` it was seeded with and its own copy of the ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: object
    worker_method: str = "multiprocessing"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The WorkerInfo of the DataLoader worker process calling it; None in the main process.
    An IterableDataset uses it to give each worker its own share of the stream."""
    return _worker_info


@dataclass(frozen=True)
class IterableDatasetStopIteration:
    """A worker's message: its copy of the IterableDataset is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """To persistent workers: a new pass begins (iterable datasets restart)."""


class KeyErrorMessage(str):
    """A KeyError's message that prints its newlines (KeyError shows ``repr`` of its arg)."""

    def __repr__(self) -> str:
        return self


class ExceptionWrapper:
    """An exception caught in a worker, with its formatted traceback, to re-raise in the main
    process: ``Caught ValueError in DataLoader worker process 1.`` then the original traceback."""

    def __init__(self, exc_info=None, where: str = "in background"):
        exc_type, exc, tb = exc_info if exc_info is not None else sys.exc_info()
        self.exc_type = exc_type
        self.exc_name = exc_type.__name__
        self.exc_msg = "".join(traceback.format_exception(exc_type, exc, tb))
        self.where = where
        try:
            pickle.loads(pickle.dumps(exc_type))
        except Exception:  # a class the main process could not rebuild
            self.exc_type = RuntimeError

    def reraise(self):
        """Raise the exception's type with the worker's traceback in the message (RuntimeError
        when the type cannot be built from one message)."""
        msg = f"Caught {self.exc_name} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


# ------------------------------------------------------------------------------------ seeding
def _generate_state(base_seed: int, worker_id: int) -> list[int]:
    """numpy's seed for worker ``worker_id`` (a SeedSequence-style hash of both; the same
    four words as PyTorch's ``torch.utils.data._utils.worker._generate_state``)."""
    init_a, mult_a, init_b, mult_b = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
    mix_l, mix_r, xshift, mask = 0xCA01F9DD, 0x4973F715, 16, 0xFFFFFFFF
    entropy = [worker_id, base_seed & mask, base_seed >> 32, 0]
    const_a = [init_a]

    def hash_(value: int) -> int:
        value = (value ^ const_a[0]) & mask
        const_a[0] = (const_a[0] * mult_a) & mask
        value = (value * const_a[0]) & mask
        return (value ^ (value >> xshift)) & mask

    def mix(x: int, y: int) -> int:
        r = (((mix_l * x) & mask) - ((mix_r * y) & mask)) & mask
        return (r ^ (r >> xshift)) & mask

    pool = [hash_(e) for e in entropy]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hash_(pool[src]))
    const_b, state = init_b, []
    for value in pool:
        value = (value ^ const_b) & mask
        const_b = (const_b * mult_b) & mask
        value = (value * const_b) & mask
        state.append((value ^ (value >> xshift)) & mask)
    return state


def seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed this process's ``random``, gpucore and numpy generators for ``worker_id``; returns
    the seed (``base_seed + worker_id``)."""
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(_generate_state(base_seed, worker_id))
    return seed


# --------------------------------------------------------------------------------- the loop
def _encode(idx, data, worker_id: int) -> bytes:
    """Pickle a result here, so that a batch that cannot be pickled becomes an error the main
    process sees instead of a message lost in the queue's feeder thread."""
    try:
        return bytes(ForkingPickler.dumps((idx, data)))
    except Exception:
        err = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
        return bytes(ForkingPickler.dumps((idx, err)))


def worker_loop(
    iterable: bool,
    dataset,
    index_queue,
    data_queue,
    done_event,
    auto_collation: bool,
    collate_fn,
    drop_last: bool,
    base_seed: int,
    init_fn,
    worker_id: int,
    num_workers: int,
    parent_pid: int,
) -> None:
    """What worker ``worker_id`` runs: take ``(task index, batch indices)`` from
    ``index_queue``, put ``(task index, pickled batch or ExceptionWrapper)`` on ``data_queue``,
    until it gets None or the parent process is gone."""
    global _worker_info
    try:
        set_num_threads(1)  # the workers share the machine's cores
        seed = seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error, fetcher = None, None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=where)
        iteration_end = False
        while os.getppid() == parent_pid:
            try:
                r = index_queue.get(timeout=STATUS_CHECK_INTERVAL)
            except queue.Empty:
                continue
            if isinstance(r, ResumeIteration):
                data_queue.put(_encode(r, None, worker_id))
                iteration_end = False
                if init_error is None:
                    try:
                        fetcher = create_fetcher(
                            iterable, dataset, auto_collation, collate_fn, drop_last
                        )
                    except Exception:
                        init_error = ExceptionWrapper(where=where)
                continue
            if r is None:
                break
            if done_event.is_set() or iteration_end:
                continue
            idx, index = r
            if init_error is not None:
                data, init_error = init_error, None
            else:
                try:
                    data = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        data = ExceptionWrapper(where=where)
                    else:
                        data, iteration_end = IterableDatasetStopIteration(worker_id), True
                except Exception:
                    data = ExceptionWrapper(where=where)
            data_queue.put(_encode(idx, data, worker_id))
            del data, idx, index, r
    except KeyboardInterrupt:
        pass
    if done_event.is_set():
        data_queue.cancel_join_thread()
        data_queue.close()
