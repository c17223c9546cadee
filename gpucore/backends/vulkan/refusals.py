"""Errors for work a capture for replay cannot hold (capture.py; gpucore.vulkan.graph): host
reads and writes of device data in the middle of a capture, host-only ops, sampling ops with no
captured form (dropout, rand, randn and rand_like are captured: gpucore/graphs/rng.py).
``host_sync_error`` names the culprit from the Python stack, so the message says which op or
method the user must move out of the captured region."""

from __future__ import annotations

import sys

from ...errors import DeviceError

_PRINTING = {"__repr__", "__str__", "__format__"}
_PYTHON_VALUE = {"__bool__", "__float__", "__int__", "__index__", "__complex__", "__len__"}


def refusal(what: str) -> DeviceError:
    """The error for ``what`` (an op or a method) attempted inside a capture for replay."""
    return DeviceError(
        f"{what} cannot be captured for replay: it needs the host to read or write device data "
        "(or to decide something from its values) in the middle of a graph being captured "
        "(gpucore.vulkan.graph, make_graphed_callables, or a model compiled for Vulkan), so a "
        "replay would not repeat it. Move it out of the captured region (read the captured "
        "output tensors after g.replay()), or give it a Vulkan kernel"
    )


def host_sync_error() -> DeviceError:
    """``refusal`` naming the culprit, found on the Python stack: the innermost registry op
    being run (an op with no Vulkan kernel for its inputs runs on the host), else the outermost
    gpucore function the user called (``Tensor.item``, ``Tensor.numpy``, printing...)."""
    f = sys._getframe(1)
    op_name = outer = None
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if not mod.startswith("gpucore"):
            break
        name = f.f_code.co_name
        if op_name is None and mod in ("gpucore.ops.registry", "gpucore.ops.optim"):
            op = f.f_locals.get("op")
            op_name = getattr(op, "name", None)
        if not name.startswith("_") or name in _PRINTING or name in _PYTHON_VALUE:
            outer = name if mod != "gpucore.tensor" else f"Tensor.{name}"
        f = f.f_back
    if op_name is not None:
        what = f"the op '{op_name}' (no Vulkan kernel for these inputs: it would run on the host)"
    elif outer is not None and outer.split(".")[-1] in _PRINTING:
        what = f"printing a device tensor ({outer})"
    elif outer is not None and outer.split(".")[-1] in _PYTHON_VALUE:
        what = f"using a device tensor as a Python value ({outer}: an `if` or a loop on it)"
    elif outer is not None:
        what = f"{outer}()"
    else:
        what = "reading device data on the host"
    return refusal(what)
