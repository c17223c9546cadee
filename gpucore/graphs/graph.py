"""``VulkanGraph`` and ``graph``: a training step (or any device work) captured once into Vulkan
command buffers and replayed with one submit, as ``torch.cuda.CUDAGraph`` / ``torch.cuda.graph``.

::

    model, opt = ..., gpucore.optim.Adam(model.parameters(), capturable=True)
    static_x = gpucore.zeros(64, 784, device="vulkan")    # the graph's inputs: device tensors
    static_y = gpucore.zeros(64, dtype=gpucore.int64, device="vulkan")
    with gpucore.device_policy("vulkan"):                 # warm-up: optimizer state, pipelines
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(static_x), static_y).backward()
            opt.step()
    g = gpucore.vulkan.VulkanGraph()
    opt.zero_grad(set_to_none=True)                       # backward allocates the graph's grads
    with gpucore.vulkan.graph(g):
        static_loss = F.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    for x, y in loader:
        static_x.copy_(x); static_y.copy_(y)              # new data into the captured inputs
        g.replay()                                        # one submit; static_loss is overwritten

How it works: between ``capture_begin`` and ``capture_end`` the Vulkan stream records every
dispatch, copy and barrier into a command buffer of its own (backends/vulkan/capture.py, the
mechanism the inference runtime's executor replays) instead of submitting it; every op runs on
the device (the block runs under ``device_policy('vulkan')``). Push constants and descriptor
bindings are recorded with the commands, so a replay reads and writes exactly the memory of the
capture: the capture keeps every device array its commands use alive until ``reset()`` (the
graph's memory, reserved for its lifetime), and the tensors the block created (its outputs, the
gradients ``backward`` allocated) stay valid and are overwritten by each replay, as in PyTorch.

Host tensors the block reads become constants of the graph: every replay copies in their values
at capture time (so a tensor made from host data inside the block, ``zeros(...).to('vulkan')``,
starts from those values at each replay even when the graph writes it), and ``replay()`` raises
when the host has written such a tensor since the capture.

Random sampling on the device (``dropout``, ``rand``, ``randn``, ``rand_like``... with any
generator) is captured as in PyTorch: the generator's seed and offset live in a device buffer
that each replay fills with the generator's current position before it runs, advancing the
generator by what the graph draws (rng.py), so each replay draws fresh numbers and N replays
draw exactly what N eager steps would have; the capture itself draws nothing (it leaves the
generator where it found it).

What a capture refuses (DeviceError naming the op): anything that needs the host in the middle
(``.item()``, ``.numpy()``, ``print``, ``bool(t)``, ops with data-dependent shapes, ops with no
Vulkan kernel, which would run on the host), sampling ops with no captured form (multinomial,
randperm, random host tensors), an optimizer whose step counts live on the host
(``capturable=False``) and optimizer state created inside the capture (warm up first).

Warm-up: PyTorch runs a few eager steps on a side stream before capturing, to create lazy state
outside the graph. gpucore has one command stream and needs no side stream, but the warm-up is
still needed: optimizer state (momentum buffers, Adam moments and device step counts) must exist
before the capture, and ``zero_grad(set_to_none=True)`` right before it lets ``backward``
allocate the gradients inside the graph (gradients that already exist are accumulated into,
at every replay, as in PyTorch). Pipelines created during the warm-up make the capture fast.
"""

from __future__ import annotations

import itertools

from .. import dispatch
from . import rng, state

_pool_ids = itertools.count(1)


class VulkanGraph:
    """A captured sequence of device work, replayable with one submit (``torch.cuda.CUDAGraph``).

    Capture with ``with gpucore.vulkan.graph(g): ...`` (or ``capture_begin`` / ``capture_end``);
    ``replay()`` runs the recorded commands again on the same memory; ``reset()`` frees the
    recorded commands and the memory the graph reserved. ``keep_graph`` is accepted as in
    PyTorch (the commands are always kept until ``reset``)."""

    def __init__(self, keep_graph: bool = False):
        self._be = None
        self._cap = None
        self._policy = None
        self._pool = (next(_pool_ids),)
        self._rng = rng.Streams()
        self._was_reset = False
        self.keep_graph = bool(keep_graph)

    # ----------------------------------------------------------------------------- capture
    def capture_begin(self, pool=None, capture_error_mode: str = "global") -> None:
        """Start capturing the device work of this thread (see the module docstring)."""
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(
                "capture_begin: capture_error_mode must be 'global', 'thread_local' or "
                f"'relaxed', got {capture_error_mode!r}"
            )
        if self._cap is not None:
            raise RuntimeError(
                "VulkanGraph.capture_begin: this graph already holds a capture; call reset() "
                "before capturing into it again"
            )
        if state.capturing():
            raise RuntimeError(
                "VulkanGraph.capture_begin: another graph is being captured; graphs are "
                "captured one at a time"
            )
        from ..backends.vulkan import capture  # the device's modules load with the device

        be = dispatch.vulkan_backend(required=True)
        policy = dispatch.device_policy("vulkan")
        policy.__enter__()
        try:
            self._cap = capture.begin(be.ctx)
        except BaseException:
            policy.__exit__(None, None, None)
            raise
        self._be, self._policy = be, policy
        self._was_reset = False
        self._rng = rng.Streams()
        state.CAPTURING[0] = self

    def capture_end(self) -> None:
        """Finish the capture begun by ``capture_begin``."""
        self._finish(abort=False)

    def _finish(self, abort: bool) -> None:
        if state.CAPTURING[0] is not self:
            raise RuntimeError("VulkanGraph.capture_end: this graph is not being captured")
        from ..backends.vulkan import capture  # the device's modules load with the device

        state.CAPTURING[0] = None
        failed = abort
        try:
            if abort:
                capture.abort(self._be.ctx, self._cap)
                self._cap = None
            else:
                try:
                    capture.end(self._be.ctx, self._cap)
                except BaseException:
                    self._cap = None
                    failed = True
                    raise
        finally:
            self._rng.end(failed)
            self._policy.__exit__(None, None, None)
            self._policy = None

    # ----------------------------------------------------------------------------- replay
    def replay(self) -> None:
        """Run the captured work again: one submit, queued behind the device work recorded
        before it (the copies of new data into the captured inputs). It does not wait: reading
        an output on the host (``.item()``, ``.numpy()``) or ``gpucore.vulkan.synchronize()``
        waits for it."""
        cap = self._cap
        if cap is None or state.CAPTURING[0] is self:
            if self._was_reset:
                why = "it was reset (reset() frees the captured commands and memory)"
            elif state.CAPTURING[0] is self:
                why = "its capture has not ended"
            else:
                why = "nothing was captured into it"
            raise RuntimeError(f"VulkanGraph.replay: cannot replay this graph: {why}")
        for box, version, shape in cap.host_inputs:
            if box[0] != version:
                raise RuntimeError(
                    f"VulkanGraph.replay: a host tensor of shape {shape} that the captured work "
                    "read was modified after the capture; the graph holds its values at capture "
                    "time as a constant. Make such inputs device tensors (.to('vulkan')) and "
                    "copy_ new values into them, or capture again"
                )
        from ..backends.vulkan import capture  # the device's modules load with the device

        self._rng.before_replay(self._be, cap)  # the generators' positions, for captured sampling
        capture.enqueue(self._be.ctx, cap)

    def reset(self) -> None:
        """Free the captured commands and the device memory reserved for them (waits for a
        replay in flight). Tensors created during the capture stay valid as plain tensors but
        are no longer written by any replay; ``replay()`` raises until the graph is captured
        again."""
        if state.CAPTURING[0] is self:
            raise RuntimeError("VulkanGraph.reset: the graph is being captured")
        cap = self._cap
        if cap is None:
            return
        self._cap = None
        self._was_reset = True
        if self._be.ctx.fault is not None:
            return  # device lost or closed at exit: its commands and memory go to the OS
        stream = self._be.ctx.stream
        with stream.lock:
            cap.wait()
            if cap in stream.graphs:
                stream.graphs.remove(cap)
            cap.destroy()

    def pool(self) -> tuple:
        """A handle naming this graph's memory, for ``graph(..., pool=...)`` as in PyTorch
        (accepted there; each capture reserves its own memory)."""
        return self._pool

    @property
    def dispatches(self) -> int:
        """Dispatches and copies one replay submits (0 before a capture)."""
        return 0 if self._cap is None else self._cap.count

    def __del__(self):
        cap = getattr(self, "_cap", None)
        if cap is not None and state.CAPTURING[0] is not self:
            try:
                self.reset()
            except Exception:  # at exit or after a device fault: leave it to the OS
                pass


class graph:
    """Context manager capturing its block into ``vulkan_graph`` (``torch.cuda.graph``).

    ``pool``, ``stream`` and ``capture_error_mode`` are accepted as in PyTorch (gpucore has one
    command stream and each capture reserves its own memory). An exception inside the block
    abandons the capture (nothing it recorded ever runs) and propagates."""

    def __init__(
        self,
        vulkan_graph: VulkanGraph,
        pool=None,
        stream=None,
        capture_error_mode: str = "global",
    ):
        if not isinstance(vulkan_graph, VulkanGraph):
            raise TypeError(
                f"graph: expected a gpucore.vulkan.VulkanGraph, got {type(vulkan_graph).__name__}"
            )
        self.vulkan_graph = vulkan_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        self.vulkan_graph.capture_begin(self.pool, self.capture_error_mode)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.vulkan_graph._finish(abort=exc_type is not None)
        return False


def graph_pool_handle() -> tuple:
    """A memory-pool handle for ``graph(..., pool=...)`` (``torch.cuda.graph_pool_handle``;
    accepted there: each capture reserves its own memory)."""
    return (next(_pool_ids),)


def is_current_stream_capturing() -> bool:
    """True while a graph is being captured (``torch.cuda.is_current_stream_capturing``)."""
    return state.capturing()
