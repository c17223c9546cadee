"""Shared by the CPU convolution path tests (tests/backends/cpu/test_conv_pointwise.py,
test_conv_pointwise_pixels.py, test_conv_direct_lanes.py, test_conv_direct.py ...): 1x1
geometries (n, c, h, w, o, stride) and their inputs, the float64 reference with bias / residual /
relu, one forward call of ``_cpu.conv2d_forward`` and one backward call of
``_cpu.conv2d_backward``, the backward's float64 reference, the closeness check, whether this CPU
has the pixels x channels tile, the run of a test module's script under one forced ISA (also
test_conv_epilogue.py's) and the script those three run there (same_bits_under_isa)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

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


def backward(x, wt, g, args, gx=True):
    """conv2d_backward into NaN-filled gradients (every element must be written): (gx, or None
    when not gx, gw, gb)."""
    out = (
        np.full(x.shape, np.nan, np.float32) if gx else None,
        np.full(wt.shape, np.nan, np.float32),
        np.full(wt.shape[0], np.nan, np.float32),
    )
    _cpu.conv2d_backward(x, wt, g, *out, *args)
    return out


def close(got, ref, what):
    err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
    assert err <= 2e-6, f"{what}: relative error {err:.3g}"


def has_pixel_tiles():
    """AVX-512 (the float32 GEMM's 14 x 32 tile) has the pixels x channels tile."""
    g = _cpu.info()["gemm"]["float32"]
    return _cpu.info()["isa"] == "avx512" and (g["mr"], g["nr"]) == (14, 32)


def conv_geom(g):
    """A (n, c, h, w, o, kernel, stride, padding, dilation) geometry with its output size:
    (n, c, h, w, o, k, s, p, d, oh, ow)."""
    n, c, h, w, o, k, s, p, d = g
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    return n, c, h, w, o, k, s, p, d, oh, ow


def conv_args(g, n=None):
    """The 13 geometry ints of the conv2d bindings (n images: all of them by default)."""
    n0, c, h, w, o, k, s, p, d, _, _ = conv_geom(g)
    return (n0 if n is None else n, c, h, w, *k, *s, *p, *d, o)


def conv_inputs(g, seed):
    """float32 x, weight (scaled by 1 / sqrt(fan-in)), bias and residual for geometry g."""
    n, c, h, w, o, k, s, p, d, oh, ow = conv_geom(g)
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (r.standard_normal((o, c, *k)) / np.sqrt(c * k[0] * k[1])).astype(np.float32)
    b = r.standard_normal(o).astype(np.float32)
    res = r.standard_normal((n, o, oh, ow)).astype(np.float32)
    return x, wt, b, res


def conv_reference(g, x, wt, b, res=None, relu=False):
    """The convolution of geometry g in float64, tap by tap, then the epilogue."""
    n, c, h, w, o, k, s, p, d, oh, ow = conv_geom(g)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    out = np.zeros((n, o, oh, ow))
    for ki in range(k[0]):
        for kj in range(k[1]):
            y0, x0 = ki * d[0], kj * d[1]
            patch = xp[
                :, :, y0 : y0 + s[0] * (oh - 1) + 1 : s[0], x0 : x0 + s[1] * (ow - 1) + 1 : s[1]
            ]
            out += np.einsum("nchw,oc->nohw", patch, wt[:, :, ki, kj].astype(np.float64))
    return epilogue(out, b, res, relu)


def conv_reference_backward(g, x, wt, gy):
    """float64 (gx, gw, gb) of the convolution of geometry g for the incoming gradient gy, per
    kernel tap (windows of the padded input)."""
    n, c, h, w, o, k, s, p, d, oh, ow = conv_geom(g)
    xp = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    xp[:, :, p[0] : p[0] + h, p[1] : p[1] + w] = x
    gxp = np.zeros_like(xp)
    g64, w64 = gy.astype(np.float64), wt.astype(np.float64)
    gw = np.zeros(wt.shape)
    for ki in range(k[0]):
        for kj in range(k[1]):
            y0, x0 = ki * d[0], kj * d[1]
            sl = (
                slice(None),
                slice(None),
                slice(y0, y0 + s[0] * (oh - 1) + 1, s[0]),
                slice(x0, x0 + s[1] * (ow - 1) + 1, s[1]),
            )
            gw[:, :, ki, kj] = np.einsum("nohw,nchw->oc", g64, xp[sl])
            gxp[sl] += np.einsum("nohw,oc->nchw", g64, w64[:, :, ki, kj])
    return gxp[:, :, p[0] : p[0] + h, p[1] : p[1] + w], gw, g64.sum((0, 2, 3))


def same_bits_on_threads_and_images(run, x, res):
    """``run(x, res, n)`` (n images, None for all of them) on 1, 2, 3 and 8 threads gives the
    same bits, and each image alone gives its slice of them: the first run's result."""
    import gpucore

    before = gpucore.get_num_threads()
    try:
        runs = []
        for nt in (1, 2, 3, 8):
            gpucore.set_num_threads(nt)
            runs.append(run(x, res, None))
    finally:
        gpucore.set_num_threads(before)
    for r in runs[1:]:
        assert np.array_equal(r, runs[0])
    for i in range(x.shape[0]):
        one = run(x[i : i + 1].copy(), res[i : i + 1].copy(), 1)
        assert np.array_equal(one, runs[0][i : i + 1]), f"image {i}"
    return runs[0]


def isa_run(script, test_file, isa, tmp_path, *args, **env):
    """Runs ``script`` (python -c; argv: test_file's folder, isa, the .npz path it writes, then
    ``args``) with GPUCORE_CPU_ISA=isa and ``env`` set, tests/ on PYTHONPATH, and returns that
    .npz loaded."""
    out = tmp_path / "r.npz"
    tests = os.path.dirname(os.path.abspath(__file__))
    path = os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])
    e = dict(os.environ, GPUCORE_CPU_ISA=isa, PYTHONPATH=path, **env)
    here = os.path.dirname(os.path.abspath(test_file))
    cmd = [sys.executable, "-c", script, here, isa, str(out), *args]
    subprocess.run(cmd, env=e, check=True, timeout=300)
    return np.load(out)


# Under the forced ISA, for each of the test module's GEOMS with GPUCORE_CONV=mode: the forward
# with bias, residual and relu (and without any, ``plain``) on 1 thread, the path probe's answer,
# the same bits on 8 threads and, beyond 24 output channels, as the im2col GEMM path.
_SAME_BITS = textwrap.dedent(
    """
    import importlib, os, sys, numpy as np
    sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "..", "..")]  # conv_cases: tests/
    import gpucore
    from gpucore import _cpu
    t = importlib.import_module(sys.argv[4])
    mode, probe, plain = sys.argv[5], getattr(_cpu, sys.argv[6]), sys.argv[7] == "1"
    assert _cpu.info()["isa"] == sys.argv[2]
    res = {}
    for case in t.GEOMS:
        x, wt, b, r = t._inputs(case)
        os.environ["GPUCORE_CONV"] = mode
        gpucore.set_num_threads(1)
        res[case] = t._forward(case, x, wt, b, r, True)
        if plain:
            res[case + ".plain"] = t._forward(case, x, wt, None)
        res[case + ".path"] = np.array(probe(*t._args(case)))
        gpucore.set_num_threads(8)
        assert np.array_equal(t._forward(case, x, wt, b, r, True), res[case]), case
        os.environ["GPUCORE_CONV"] = "im2col"  # the GEMM path's bits (its blocked kernel)
        if t.GEOMS[case][4] > 24:
            assert np.array_equal(t._forward(case, x, wt, b, r, True), res[case]), case
            if plain:
                assert np.array_equal(t._forward(case, x, wt, None), res[case + ".plain"]), case
    np.savez(sys.argv[3], **res)
    """
)


def same_bits_under_isa(test_file, isa, tmp_path, mode: str, probe: str, plain: bool):
    """_SAME_BITS run for test_file's module under ``isa``: the .npz of its forwards and path
    answers (``probe``: the _cpu function saying whether the path applies)."""
    module = os.path.splitext(os.path.basename(test_file))[0]
    return isa_run(_SAME_BITS, test_file, isa, tmp_path, module, mode, probe, "1" if plain else "0")
