"""Helpers for device tests: run a function on the CPU path and compare (import device_helpers)."""

from __future__ import annotations

import numpy as np

import gpucore


def on_cpu(fn, *args, **kwargs):
    """Run fn under the 'cpu' policy (the reference path)."""
    with gpucore.device_policy("cpu"):
        return fn(*args, **kwargs)


def assert_close_to_cpu(fn, inputs, rtol=1e-5, atol=1e-6):
    """fn(*inputs) on the device equals fn on the CPU; also checks it actually ran there."""
    with gpucore.dispatch.trace_ops() as ops:
        out = fn(*inputs)
    ref = on_cpu(fn, *[t.cpu() if isinstance(t, gpucore.Tensor) else t for t in inputs])
    outs = out if isinstance(out, (tuple, list)) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(
            o.detach().cpu().numpy().astype(np.float64),
            r.detach().numpy().astype(np.float64),
            rtol=rtol,
            atol=atol,
        )
    return ops
