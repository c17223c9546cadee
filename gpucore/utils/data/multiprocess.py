"""The main-process side of multi-process loading (PyTorch's ``_MultiProcessingDataLoaderIter``).

Tasks ``(task index, batch indices)`` go round-robin to the workers' index queues, at most
``prefetch_factor * num_workers`` in flight; results come back on one queue and are handed out
in task order (early arrivals wait in ``_task_info``). Nothing waits without bound: every wait
for a result is cut into ``STATUS_CHECK_INTERVAL`` slices, between which the workers' liveness
is checked (a dead worker raises RuntimeError naming its pid and exit code), and ``timeout``
turns a long wait into RuntimeError. A worker's exception comes back as an ExceptionWrapper and
is re-raised by ``__next__``; the iterator stays usable after it, as in PyTorch. Workers are
daemons and stop when the iterator is exhausted (unless persistent), collected, or the process
exits; a worker whose parent is gone stops on its own (``worker.worker_loop``).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import queue
import signal

from .iterator import BaseIter
from .worker import (
    STATUS_CHECK_INTERVAL,
    ExceptionWrapper,
    IterableDatasetStopIteration,
    ResumeIteration,
    worker_loop,
)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class MultiProcessingIter(BaseIter):
    """Loads batches in ``loader.num_workers`` worker processes."""

    def __init__(self, loader):
        super().__init__(loader)
        self._shutdown = True  # until the workers exist: nothing to shut down
        self._timeout = loader.timeout
        self._prefetch = max(1, loader.prefetch_factor)  # 0 would send nothing
        self._persistent = loader.persistent_workers
        ctx = loader.multiprocessing_context or multiprocessing.get_context()
        self._data_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        try:
            for i in range(self._num_workers):
                index_queue = ctx.Queue()
                index_queue.cancel_join_thread()  # exiting never waits on tasks not taken
                w = ctx.Process(
                    target=worker_loop,
                    args=(
                        self._iterable,
                        self._dataset,
                        index_queue,
                        self._data_queue,
                        self._done_event,
                        self._auto_collation,
                        self._collate_fn,
                        self._drop_last,
                        self._base_seed,
                        loader.worker_init_fn,
                        i,
                        self._num_workers,
                        os.getpid(),
                    ),
                    daemon=True,
                )
                w.start()
                self._index_queues.append(index_queue)
                self._workers.append(w)
        finally:
            self._shutdown = False
            if len(self._workers) < self._num_workers:
                self._shutdown_workers()
        self._reset(loader, first=True)

    # ------------------------------------------------------------------------ pass bookkeeping
    def reset(self, loader) -> None:
        """Start a new pass with the same (persistent) workers."""
        self._reset(loader, first=False)

    def _reset(self, loader, first: bool) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._send_idx = 0  # next task index to send
        self._rcvd_idx = 0  # next task index to hand out
        self._task_info: dict = {}  # task -> (worker,) sent, or (worker, data) arrived early
        self._tasks_outstanding = 0
        self._active = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first:  # persistent workers: drop the last pass's leftovers, restart streams
            for q in self._index_queues:
                q.put(ResumeIteration())
            pending = self._num_workers
            while pending > 0:
                idx, _ = self._get_data()
                if isinstance(idx, ResumeIteration):
                    pending -= 1
        for _ in range(self._prefetch * self._num_workers):
            self._try_put_index()

    def _try_put_index(self) -> None:
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            w = next(self._worker_cycle)
            if self._active[w]:
                break
        else:  # every worker's stream has ended
            return
        self._index_queues[w].put((self._send_idx, index))
        self._task_info[self._send_idx] = (w,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    # ----------------------------------------------------------------------------- receiving
    def _try_get_data(self, timeout: float):
        """(True, message) or (False, None) after ``timeout`` seconds; RuntimeError when a
        worker has died."""
        try:
            return True, pickle.loads(self._data_queue.get(timeout=timeout))
        except queue.Empty:
            pass
        dead = [w for i, w in enumerate(self._workers) if self._active[i] and not w.is_alive()]
        if dead:
            self._shutdown_workers()
            detail = ", ".join(f"{w.pid} ({_describe_exit(w.exitcode)})" for w in dead)
            raise RuntimeError(
                f"DataLoader worker (pid(s) {detail}) exited unexpectedly. A worker killed by "
                "the OS (e.g. out of memory) or calling os._exit ends this way; try "
                "num_workers=0 to see the error in this process."
            )
        return False, None

    def _get_data(self):
        if self._timeout > 0:
            ok, data = self._try_get_data(self._timeout)
            if not ok:
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            return data
        while True:
            ok, data = self._try_get_data(STATUS_CHECK_INTERVAL)
            if ok:
                return data

    def _next_data(self):
        while True:
            # Skip tasks sent to workers whose stream has ended since: they never answer.
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._active[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process_data(data)
            if self._shutdown:
                raise RuntimeError("this DataLoader iterator's workers were shut down")
            idx, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, IterableDatasetStopIteration):
                self._active[data.worker_id] = False
                if not self._persistent:
                    self._index_queues[data.worker_id].put(None)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
                continue
            del self._task_info[idx]
            self._rcvd_idx += 1
            return self._process_data(data)

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    # ------------------------------------------------------------------------------ shutdown
    def _shutdown_workers(self) -> None:
        """Stop the workers (asked first, terminated when they do not stop in time) and close
        the queues; safe to call twice and from ``__del__``."""
        if getattr(self, "_shutdown", True):
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for q in self._index_queues:
                q.put(None)
            for w in self._workers:
                w.join(timeout=STATUS_CHECK_INTERVAL)
                if w.is_alive():
                    w.terminate()
                    w.join(timeout=STATUS_CHECK_INTERVAL)
            for q in self._index_queues:
                q.close()
            self._data_queue.cancel_join_thread()
            self._data_queue.close()
        except Exception:  # at interpreter exit parts of multiprocessing may be gone
            pass

    def __del__(self):
        self._shutdown_workers()
