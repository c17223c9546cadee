"""The capture hooks' router: while any thread traces, ``registry.CAPTURE`` and
``HOST_READ_HOOK`` hold one ``_Router`` that hands each thread's op applications and host reads
to that thread's own Tracer (trace.py), and a thread tracing nothing runs eagerly."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from ...ops import registry
from ...tensor import HOST_READ_HOOK, Tensor
from .errors import CaptureError

if TYPE_CHECKING:
    from .trace import Tracer


class _Router:
    """What ``registry.CAPTURE`` and ``HOST_READ_HOOK`` hold while any thread traces: each
    thread's calls go to its own Tracer (``here``), and a thread tracing nothing runs its ops
    eagerly, fast lanes included, as with no capture. So captures in several threads at once
    (two lazily compiled models, or one model's two signatures, served by a thread pool) each
    record only their own thread's ops; a capture nested in another on one thread is refused.
    The hooks stay None while no thread traces, so eager ops pay one ``is None`` test as
    before."""

    def __init__(self):
        self.tracers: dict[int, Tracer] = {}  # thread ident -> its Tracer
        # reentrant: a module's eval() / train() (user code, run under it) that starts a
        # capture gets the nested-capture CaptureError from enter(), not a deadlock
        self.lock = threading.RLock()
        self.modules: dict[int, _ModuleMode] = {}  # id(module) -> its captures and mode

    def eval_module(self, module) -> None:
        """Put ``module`` in eval mode for the calling thread's capture (see _ModuleMode)."""
        with self.lock:
            mode = self.modules.get(id(module))
            first = mode is None
            training = module.training if first else mode.training
            try:
                module.eval()
            except BaseException:
                if first and training:  # nothing recorded: the flag goes back now
                    module.train()
                raise
            if first:
                mode = self.modules[id(module)] = _ModuleMode(training)
            mode.threads.add(threading.get_ident())

    def restore_module(self, module) -> None:
        """The calling thread's capture of ``module`` ended: the last one restores its
        training flag."""
        with self.lock:
            mode = self.modules[id(module)]
            mode.threads.discard(threading.get_ident())
            if not mode.threads:
                del self.modules[id(module)]
                if mode.training:
                    module.train()

    def here(self) -> Tracer | None:
        """The Tracer of the calling thread, or None (``registry.capturing``)."""
        return self.tracers.get(threading.get_ident())

    def enter(self, tracer: Tracer) -> None:
        """Start routing ``tracer.thread``'s ops to ``tracer`` (the hooks set for the first
        capture); CaptureError when that thread already traces."""
        with self.lock:
            if tracer.thread in self.tracers:
                raise CaptureError(
                    "capture: this thread is already capturing a model (captures do not nest "
                    "in one thread)"
                )
            self.tracers[tracer.thread] = tracer
            registry.CAPTURE[0] = self
            HOST_READ_HOOK[0] = self.host_read

    def leave(self, tracer: Tracer) -> None:
        """``tracer``'s capture ended: the hooks go back to None when it was the last."""
        with self.lock:
            self.tracers.pop(tracer.thread, None)
            if not self.tracers:
                registry.CAPTURE[0] = None
                HOST_READ_HOOK[0] = None

    def host_read(self, t: Tensor, quiet: bool = False) -> None:
        """HOST_READ_HOOK: the calling thread's Tracer's ``host_read``; another thread's host
        reads are not a model's."""
        tracer = self.tracers.get(threading.get_ident())
        if tracer is not None:
            tracer.host_read(t, quiet)

    def after_fork_in_child(self) -> None:
        """A forked child holds only the forking thread: the other threads' captures never end
        there, so only that thread's Tracer (and its module's mode) stays, the hooks go back
        to None when none is left, and the lock (which another thread may have held at the
        fork) is a new one. Modules only vanished threads were tracing stay in eval mode."""
        self.lock = threading.RLock()
        me = threading.get_ident()
        self.tracers = {k: t for k, t in self.tracers.items() if k == me}
        modules = {}
        for key, mode in self.modules.items():
            if me in mode.threads:
                mode.threads = {me}
                modules[key] = mode
        self.modules = modules
        if not self.tracers:
            registry.CAPTURE[0] = None
            HOST_READ_HOOK[0] = None


class _ModuleMode:
    """A module some captures run in eval mode: two threads tracing one module put it in eval
    mode once and restore it once, after both."""

    __slots__ = ("threads", "training")

    def __init__(self, training: bool):
        self.training = training  # its training flag before the first capture
        self.threads: set[int] = set()  # the threads whose captures of it run


_ROUTER = _Router()
os.register_at_fork(after_in_child=_ROUTER.after_fork_in_child)


def active_tracer() -> Tracer | None:
    """The Tracer recording the calling thread's ops, or None."""
    return _ROUTER.here()
