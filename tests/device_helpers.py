"""Helpers for device tests (import device_helpers): run a function on the CPU path and compare,
make device tensors and strided device views, compare special floats exactly, run a test
module both with and without elementwise fusion (``fusion_mode``), and run a program in a fresh
interpreter (``run_code``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gpucore

RNG = np.random.default_rng(1234)
ROOT = Path(__file__).resolve().parents[1]  # the repository: a program's working directory

# strided views: the kernels see every kind of stride (0, negative, offsets, steps)
VIEWS = {
    "transpose": lambda a: a.T,
    "slice_step": lambda a: a[1::2, ::3],
    "offset": lambda a: a[3:, 5:],
    "negative": lambda a: a[::-1, ::-2],
    "expand": lambda a: np.broadcast_to(a[:1], a.shape),
    "expand_col": lambda a: np.broadcast_to(a[:, :1], a.shape),
}


@pytest.fixture(params=["fused", "unfused"])
def fusion_mode(request, vulkan, monkeypatch):
    """Run a test with the stream fusing elementwise ops and without (import it into a test
    module, wrapped in an autouse fixture, to run the whole module both ways)."""
    stream = vulkan.ctx.stream
    stream.flush_program()
    monkeypatch.setattr(stream, "fuse", request.param == "fused")
    yield request.param
    stream.flush_program()


def ints(dtype, *shape) -> np.ndarray:
    """Random integers over the whole range of ``dtype``, the first ones its edges (min, max, 0,
    1, max - 1, min + 1)."""
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    flat = a.reshape(-1)
    edges = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], dtype)
    flat[: min(flat.size, edges.size)] = edges[: flat.size]
    return a


def rand(*shape, lo=-2.0, hi=2.0, dtype=np.float32):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def dev(a) -> gpucore.Tensor:
    """A device tensor holding numpy array ``a``."""
    return gpucore.tensor(np.ascontiguousarray(a)).to("vulkan")


def dev_view(a: np.ndarray, view) -> gpucore.Tensor:
    """A device tensor that is ``view`` (a function of a numpy array) of a device copy of ``a``:
    strides the API cannot make (negative ones) reach the kernels this way."""
    base = dev(a)
    return gpucore.Tensor._wrap(view(base._data), base.dtype, dev=base._dev)


def ran_on_device(ops, name):
    assert any(n == name and b == "vulkan" for n, b, _ in ops), ops


def assert_same_floats(got: np.ndarray, want: np.ndarray, rtol: float = 0.0):
    """Equal values (NaN matches NaN, signed zeros and infinities must match exactly)."""
    gn, wn = np.isnan(got), np.isnan(want)
    np.testing.assert_array_equal(gn, wn)
    g, w = got[~gn], want[~wn]
    exact = (g == w) & (np.signbit(g) == np.signbit(w))
    with np.errstate(all="ignore"):
        close = np.isfinite(w) & np.isfinite(g) & (np.abs(g - w) <= rtol * np.abs(w))
    bad = ~(exact | close)
    assert not bad.any(), list(zip(g[bad][:10], w[bad][:10]))


def on_cpu(fn, *args, **kwargs):
    """Run fn under the 'cpu' policy (the reference path)."""
    with gpucore.device_policy("cpu"):
        return fn(*args, **kwargs)


def run_exact(fn, *arrays, name):
    """fn of the arrays as device tensors: it ran op ``name`` on the device, and its result equals
    the CPU path's bit for bit (same dtype and shape). Returns the result as numpy."""
    with gpucore.dispatch.trace_ops() as ops:
        got = fn(*[dev(a) for a in arrays]).cpu().numpy()
    ran_on_device(ops, name)
    want = on_cpu(fn, *[gpucore.tensor(a) for a in arrays]).numpy()
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    return got


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


def run_code(code: str, timeout: float = 60, **env) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter on the CPU-type Vulkan device; fails (instead of
    hanging CI) when it runs past ``timeout``."""
    e = dict(os.environ, GPUCORE_VULKAN_ALLOW_CPU="1")
    e.update(env)
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            env=e,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as ex:
        pytest.fail(f"the program hung (killed after {timeout} s); output so far: {ex.stdout}")
