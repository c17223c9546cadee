"""Shared by the CPU convolution path tests (tests/backends/cpu/test_conv_pointwise.py,
test_conv_pointwise_pixels.py, test_conv_direct_lanes.py): 1x1 geometries (n, c, h, w, o,
stride) and their inputs, the float64 reference with bias / residual / relu, one forward call of
``_cpu.conv2d_forward``, the closeness check, whether this CPU has the pixels x channels tile,
and the run of a test module's script under one forced ISA (also test_conv_epilogue.py's)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from gpucore import _cpu


def pw_geom(g):
    """(n, c, h, w, o, stride, oh, ow) of a 1x1 geometry (n, c, h, w, o, stride)."""
    n, c, h, w, o, s = g
    return n, c, h, w, o, s, (h - 1) // s[0] + 1, (w - 1) // s[1] + 1


def pw_args(g, n=None):
    """conv2d_forward's geometry arguments for a 1x1 geometry (batch n, default g's)."""
    n0, c, h, w, o, s, _, _ = pw_geom(g)
    return (n0 if n is None else n, c, h, w, 1, 1, *s, 0, 0, 1, 1, o)


def pw_inputs(g, seed):
    """x, weight, bias and residual of a 1x1 geometry."""
    n, c, h, w, o, s, oh, ow = pw_geom(g)
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (r.standard_normal((o, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
    b = r.standard_normal(o).astype(np.float32)
    res = r.standard_normal((n, o, oh, ow)).astype(np.float32)
    return x, wt, b, res


def epilogue(out, b, res, relu):
    """out (float64) + bias + residual, then relu."""
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    if res is not None:
        out += res
    return np.maximum(out, 0.0) if relu else out


def pw_reference(g, x, wt, b, res=None, relu=False):
    """The 1x1 convolution in float64 with its epilogue."""
    n, c, h, w, o, s, oh, ow = pw_geom(g)
    xs = x.astype(np.float64)[:, :, :: s[0], :: s[1]][:, :, :oh, :ow]
    out = np.einsum("nchw,oc->nohw", xs, wt[:, :, 0, 0].astype(np.float64))
    return epilogue(out, b, res, relu)


def forward(x, w, b, o, oh, ow, args, res=None, relu=False):
    """conv2d_forward into a NaN-filled output (every element must be written)."""
    out = np.full((x.shape[0], o, oh, ow), np.nan, np.float32)
    tail = (res, _cpu.UNARY_RELU if relu else -1) if res is not None or relu else ()
    _cpu.conv2d_forward(x, w, b, out, *args, *tail)
    return out


def close(got, ref, what):
    err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
    assert err <= 2e-6, f"{what}: relative error {err:.3g}"


def has_pixel_tiles():
    """AVX-512 (the float32 GEMM's 14 x 32 tile) has the pixels x channels tile."""
    g = _cpu.info()["gemm"]["float32"]
    return _cpu.info()["isa"] == "avx512" and (g["mr"], g["nr"]) == (14, 32)


def isa_run(script, test_file, isa, tmp_path, **env):
    """Runs ``script`` (python -c; argv: test_file's folder, isa, the .npz path it writes) with
    GPUCORE_CPU_ISA=isa and ``env`` set, tests/ on PYTHONPATH, and returns that .npz loaded."""
    out = tmp_path / "r.npz"
    tests = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])
    e = dict(os.environ, GPUCORE_CPU_ISA=isa, PYTHONPATH=path, **env)
    here = os.path.dirname(os.path.abspath(test_file))
    subprocess.run([sys.executable, "-c", script, here, isa, str(out)], env=e, check=True,
                   timeout=300)  # fmt: skip
    return np.load(out)
