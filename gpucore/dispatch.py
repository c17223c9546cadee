"""Dispatch policy: which backend runs an op. This module is the one place that decides.

- 'auto' (default): an op runs on the Vulkan device when a usable one exists, the device has a
  kernel for it, and its largest tensor (inputs or outputs) has at least GPUCORE_GPU_THRESHOLD
  elements (default 4096); otherwise in the C extension. A CPU-type Vulkan device (lavapipe) is
  usable only when asked for (GPUCORE_VULKAN_ALLOW_CPU=1): the C extension is faster there. On
  Linux without a GPU device node (GPU_DEVICE_NODES) 'auto' does not look for a device unless
  GPUCORE_VULKAN_ALLOW_CPU or GPUCORE_VULKAN_DEVICE asks it to (``auto_vulkan_backend``, which
  ``compile`` / ``gpucore.onnx.load``'s device='auto' ask too).
- 'cpu': everything in the C extension.
- 'vulkan': every op with a Vulkan kernel on the device, whatever its size (a CPU-type device
  counts as asked for); raises DeviceError when there is no device.

Tensors stay where they were last written; a backend moves an input only when it needs it. A
host tensor that device ops keep reading is uploaded once per version, and under 'auto' the
parameters and optimizer state such ops read move to the device at their next update
(``place_update``; see backends/vulkan/residency.py).

Once the device refuses work (lost, or inherited by a forked child: see backends/vulkan/
context.py), 'auto' runs new tensors on the CPU, 'vulkan' raises the fault's DeviceError, and ops
on tensors still on the device raise it too.
GPUCORE_DEVICE sets the default policy; ``set_device_policy`` and ``device_policy(...)`` change it.
``trace_ops()`` records which backend ran each op.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

from . import _cpu
from .backends import cpu as _cpu_backend
from .backends.vulkan import device as _vk_device
from .errors import DeviceError

CPU = _cpu_backend.BACKEND
POLICIES = ("auto", "cpu", "vulkan")


def _env_policy() -> str:
    p = os.environ.get("GPUCORE_DEVICE", "auto").strip().lower() or "auto"
    if p not in POLICIES:
        raise DeviceError(f"GPUCORE_DEVICE={p!r} is not one of {', '.join(POLICIES)}")
    return p


def _env_threshold() -> int:
    v = os.environ.get("GPUCORE_GPU_THRESHOLD", "4096")
    try:
        return max(0, int(v))
    except ValueError:
        raise DeviceError(f"GPUCORE_GPU_THRESHOLD={v!r} is not an integer") from None


class _State(threading.local):
    override = None  # policy set by a device_policy() block in this thread


_state = _State()
_default = {"policy": _env_policy(), "threshold": _env_threshold()}
_vulkan_cache: dict = {}
_vulkan_lock = threading.Lock()
_UNSET = object()
_unusable = [""]  # why the Vulkan device may no longer be used ('' while it may)
_fault: list = [None]  # the context's Fault behind it, when there is one


def get_device_policy() -> str:
    """The policy in force in this thread: 'auto', 'cpu' or 'vulkan'."""
    return _state.override or _default["policy"]


def set_device_policy(policy: str) -> None:
    """Set the process-wide policy: 'auto', 'cpu' or 'vulkan'."""
    if policy not in POLICIES:
        raise ValueError(f"set_device_policy: policy must be one of {POLICIES}, got {policy!r}")
    if policy == "vulkan":
        vulkan_backend(required=True)
    _default["policy"] = policy
    _update_fast()


class device_policy:
    """Context manager (and decorator) running its block under a policy in this thread."""

    def __init__(self, policy: str):
        if policy not in POLICIES:
            raise ValueError(f"device_policy: policy must be one of {POLICIES}, got {policy!r}")
        self.policy = policy

    def __enter__(self):
        if self.policy == "vulkan":
            vulkan_backend(required=True)
        self._prev = _state.override
        _state.override = self.policy
        _block_entered(1)
        return self

    def __exit__(self, *exc):
        _state.override = self._prev
        _block_entered(-1)
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*a, **k):
            with device_policy(self.policy):
                return fn(*a, **k)

        return wrapper


def get_threshold() -> int:
    """Elements from which an op goes to the Vulkan device under 'auto'."""
    return _default["threshold"]


def set_threshold(n: int) -> None:
    """Elements from which an op goes to the Vulkan device under 'auto'."""
    _default["threshold"] = max(0, int(n))
    _update_fast()


def vulkan_backend(required: bool = False, allow_cpu: bool | None = None):
    """The Vulkan backend, or None. ``required`` raises DeviceError (with the fix) instead."""
    if allow_cpu is None:
        allow_cpu = required or _vk_device.allow_cpu_device()
    key = bool(allow_cpu)
    be = _vulkan_cache.get(key, _UNSET)
    if be is _UNSET:
        be = _make_vulkan_backend(key)
    if be is None and required:
        if _fault[0] is not None:
            _fault[0].refuse()  # raises (at exit, blocks threads other than the closing one)
        if _unusable[0]:
            raise DeviceError(_unusable[0])
        why = _vk_device.reason() or "no usable Vulkan device was found"
        raise DeviceError(
            f"the 'vulkan' device was requested but {why}. On a machine without a GPU, Mesa's "
            "CPU driver provides one: apt-get install mesa-vulkan-drivers"
        )
    return be


def auto_vulkan_backend():
    """The Vulkan backend the 'auto' policy uses (None: the CPU), looked for once per process:
    what eager ops under 'auto' and ``compile`` / ``gpucore.onnx.load``'s device='auto' ask.
    Without a GPU device node (``gpu_may_exist``) it answers None without loading Vulkan."""
    vb = _vulkan_cache.get("auto", _UNSET)
    if vb is _UNSET:
        vb = vulkan_backend() if gpu_may_exist() else None
        _vulkan_cache["auto"] = vb
        _update_fast()
    return vb


# Device nodes through which a Linux GPU's Vulkan driver reaches it: DRM (Mesa's radv / anv /
# nvk / v3dv, virtio-gpu's venus), NVIDIA's own driver (desktop, and Tegra's nvgpu), WSL's
# paravirtualized GPU, the Adreno, Mali, Vivante and PowerVR drivers (Android, embedded boards).
GPU_DEVICE_NODES = (
    "/dev/dri",
    "/dev/nvidiactl",
    "/dev/nvidia0",
    "/dev/nvhost-ctrl-gpu",
    "/dev/dxg",
    "/dev/kgsl-3d0",
    "/dev/mali0",
    "/dev/galcore",
    "/dev/pvrsrvkm",
)


def gpu_may_exist() -> bool:
    """False when the 'auto' policy can tell without Vulkan that it would find no device: on
    Linux with none of GPU_DEVICE_NODES, only a CPU driver (lavapipe) could answer a probe,
    which 'auto' does not use unless GPUCORE_VULKAN_ALLOW_CPU / GPUCORE_DEVICE=vulkan allow it.
    A set GPUCORE_VULKAN_DEVICE asks Vulkan too (it names a device, or raises saying it names
    none). Skipping the probe saves a fresh process ~0.1 s (importing the Vulkan bindings,
    creating an instance)."""
    if not sys.platform.startswith("linux") or _vk_device.allow_cpu_device():
        return True
    if os.environ.get("GPUCORE_VULKAN_DEVICE", "") != "":
        return True
    if any(os.path.exists(p) for p in GPU_DEVICE_NODES):
        return True
    logging.getLogger("gpucore.vulkan").debug(
        "gpucore: no Vulkan probe for 'auto': none of %s exists (only a CPU driver could answer; "
        "GPUCORE_VULKAN_ALLOW_CPU=1 asks it)",
        ", ".join(GPU_DEVICE_NODES),
    )
    return False


def _make_vulkan_backend(allow_cpu: bool):
    """Create (once, under a lock: threads racing on the first op must share one backend
    object, since residency is ``t._dev is backend``) and cache the backend for ``allow_cpu``."""
    with _vulkan_lock:
        if allow_cpu in _vulkan_cache:
            return _vulkan_cache[allow_cpu]
        from .backends.vulkan import context  # our own modules: import errors must surface
        from .backends.vulkan.backend import VulkanBackend

        be = None
        try:
            ctx = context.get(allow_cpu=allow_cpu)
        except DeviceError:
            raise
        except Exception as e:  # a driver failure means "no device", never a crash
            logging.getLogger("gpucore.vulkan").debug("gpucore: Vulkan unusable: %s", e)
            ctx = None
        if ctx is not None:
            be = _vulkan_cache.get("instance")
            if be is None or be.ctx is not ctx:
                be = VulkanBackend(ctx)
                _vulkan_cache["instance"] = be
                ctx.on_fault.append(_on_device_fault)
        elif context.unusable_reason():
            _unusable[0] = context.unusable_reason()
        _vulkan_cache[allow_cpu] = be
    _update_fast()
    return be


def unusable_reason() -> str:
    """Why the Vulkan device may no longer be used in this process ('' while it may)."""
    return _unusable[0]


def _on_device_fault(ctx, fault) -> None:
    """The context refuses device work: new tensors go to the CPU from now on. Takes no lock
    but the fast-lane gate (re-created in a forked child before this runs)."""
    _unusable[0] = fault.message
    _fault[0] = fault
    for key in (True, False, "auto"):
        _vulkan_cache[key] = None
    if fault.kind == "forked":  # the child never used it: gpucore.vulkan.stats() starts at 0
        _vulkan_cache.pop("instance", None)
    _update_fast()


def _after_fork_in_child() -> None:
    # Locks a parent thread held at fork() stay held in the child for good: replace them.
    global _vulkan_lock, _gate_lock
    _vulkan_lock = threading.Lock()
    _gate_lock = threading.Lock()
    be = _vulkan_cache.get("instance")
    if be is not None:
        be.ctx.mark_forked()  # calls _on_device_fault


os.register_at_fork(after_in_child=_after_fork_in_child)


def backend_for(op, inputs, specs):
    """The backend that runs ``op`` on ``inputs`` producing outputs described by ``specs``."""
    policy = _state.override or _default["policy"]
    if policy == "cpu":
        return CPU
    if policy == "vulkan":
        vb = vulkan_backend(required=True)
        return vb if vb.supports(op, inputs, specs) else CPU
    vb = _vulkan_cache.get("auto", _UNSET)
    if vb is _UNSET:
        vb = auto_vulkan_backend()
    if vb is None:
        # No device for 'auto'; tensors moved there explicitly (.to('vulkan')) still run there.
        for t in inputs:
            if t._dev is not None:
                vb = t._dev
                break
        else:
            return CPU
    largest = 0
    for t in inputs:
        n = t._data.size
        if n > largest:
            largest = n
    for shape, _ in specs if isinstance(specs, list) else (specs,):
        n = 1
        for s in shape:
            n *= s
        if n > largest:
            largest = n
    if largest >= _default["threshold"]:
        if vb.supports(op, inputs, specs):
            return vb
    elif op.name == "clone" and inputs[0]._dev is vb and vb.supports(op, inputs, specs):
        return vb  # a copy of device data stays there: the same bits, no download and upload
    return CPU


def place_update(op, tensors, attrs: dict) -> None:
    """Before an in-place optimizer update ``op`` of ``tensors`` (param, grad, *state): under
    'auto', when device ops have read the host parameter since its last write and the device
    runs this update, move the parameter and its state onto the device (all or none, see
    residency.migrate) so that the update runs there and later reads upload nothing."""
    param = tensors[0]
    if param._dev is not None or (_state.override or _default["policy"]) != "auto":
        return
    vb = _vulkan_cache.get("auto")
    if vb is None or vb is _UNSET:
        return
    from .backends.vulkan import residency  # the device's modules load with the device

    if not residency.enabled or not residency.current_copy(vb, param):
        return
    if vb.supports(op, tensors, op.infer(*tensors, **attrs)):
        residency.migrate(vb, (param,) + tuple(tensors[2:]))


# The small-op fast lane (gpucore.ops.registry and cpu/fastpath.c) skips backend selection for
# ops whose tensors have fewer than _fast_limit[0] elements. The limit is recomputed whenever
# something it depends on changes, and is 0 (lane closed) while any thread is inside a
# device_policy() or trace_ops() block or a profiler runs: those are per-thread or per-op
# decisions the lane does not make.
_FAST_ALL = 1 << 62
_fast_limit = [0]
_blocks = [0]
_gate_lock = threading.Lock()


def _update_fast() -> None:
    with _gate_lock:
        if profiling[0] or _blocks[0]:
            n = 0
        else:
            policy = _default["policy"]
            vb = _vulkan_cache.get("auto", _UNSET)
            if policy == "cpu" or (policy == "auto" and vb is None):
                n = _FAST_ALL
            elif policy == "auto" and vb is not _UNSET:
                n = _default["threshold"]
            else:  # 'vulkan', or 'auto' before its first op has looked for a device
                n = 0
        _fast_limit[0] = n
        _cpu.set_fast_limit(n)


def _block_entered(delta: int) -> None:
    with _gate_lock:
        _blocks[0] += delta
    _update_fast()


def cpu_fast(n: int) -> bool:
    """True when an op whose largest tensor has ``n`` elements runs in the C extension under the
    policy in force and no trace or profiler is watching: the registry's fast lane may then
    skip backend selection."""
    return n < _fast_limit[0]


class _Trace(threading.local):
    records = None


_trace = _Trace()


class trace_ops:
    """Context manager collecting ``(op name, backend name, output shape)`` for each op run in
    this thread::

        with gpucore.dispatch.trace_ops() as ops:
            y = model(x)
        print(ops)
    """

    def __enter__(self) -> list:
        self._prev = _trace.records
        self.records = []
        _trace.records = self.records
        _block_entered(1)
        return self.records

    def __exit__(self, *exc):
        _trace.records = self._prev
        _block_entered(-1)
        return False


def record(op_name: str, backend: str, shape) -> None:
    """Note an op run for an active ``trace_ops()`` block of this thread."""
    recs = _trace.records
    if recs is not None:
        recs.append((op_name, backend, tuple(shape)))


# Profiling (gpucore.profiler): a flag checked once per op, and the active profilers.
profiling = [False]
_profilers: list = []


def profile_event(op_name: str, backend: str, seconds: float) -> None:
    for p in _profilers:
        p._cpu_event(op_name, backend, seconds)


_update_fast()
