"""Work: the handle of a collective started with ``async_op=True``."""

from __future__ import annotations

from collections.abc import Callable

from . import process_group as _pg


class Work:
    """A collective in flight. ``wait()`` blocks until it is done (bounded by the group's timeout,
    or ``timeout`` seconds) and then makes its results visible in the tensors; read them only
    after ``wait()`` (or once ``is_completed()`` is True), as with PyTorch's Work."""

    def __init__(
        self, requests: list, pg, what: str, finish: Callable | None = None, result=(), keep=()
    ):
        self._requests = requests
        self._keep = keep  # the buffers MPI reads or writes: alive until the requests complete
        self._pg = pg
        self._what = what
        self._finish = finish
        self._result = list(result)
        self._done = False
        self._error: BaseException | None = None

    def _complete(self) -> None:
        self._done = True
        self._keep = ()
        finish, self._finish = self._finish, None
        if finish is not None:
            finish()

    def wait(self, timeout=None) -> bool:
        """Block until the collective has finished; True. DistBackendError when another rank
        failed or the timeout passed (the same error again on every later call)."""
        if self._error is not None:
            raise self._error
        if not self._done:
            seconds = None if timeout is None else _pg._seconds(timeout, f"{self._what} wait")
            try:
                _pg.wait(self._requests, self._pg, self._what, seconds)
            except BaseException as e:
                self._error = e
                raise
            self._complete()
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished (never blocks; progresses MPI)."""
        if not self._done and self._error is None:
            if _pg._World.mpi.Request.Testall(self._requests):
                self._complete()
        return self._done

    def is_success(self) -> bool:
        """Whether the collective finished without error."""
        return self.is_completed() and self._error is None

    def exception(self) -> BaseException | None:
        """The error the collective ended with, if any."""
        return self._error

    def result(self) -> list:
        """The output tensors (after ``wait()``)."""
        self.wait()
        return self._result

    def __repr__(self) -> str:
        state = "done" if self._done else "failed" if self._error else "pending"
        return f"<Work {self._what} {state}>"


def run(requests: list, pg, what: str, async_op: bool, finish=None, result=(), keep=()):
    """Return the Work of a started collective (holding ``keep``, the buffers MPI uses, until it
    completes), or wait for it when not ``async_op``."""
    work = Work(requests, pg, what, finish, result, keep)
    if async_op:
        return work
    work.wait()
    return None
