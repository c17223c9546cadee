"""max_pool2d / max_pool2d_backward on the Vulkan device (shaders/pool.comp) against the CPU.

Values and indices must equal the CPU's exactly (a max is exact; ties, NaN and -inf follow the
same rule). Gradients are exact where windows do not overlap; where they do, the device sums in
float32 and the CPU in float64 (np.bincount), so they agree to rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import on_cpu

import gpucore
import gpucore.nn.functional as F

RNG = np.random.default_rng(17)

# (input shape, F.max_pool2d keyword arguments, windows overlap)
GEOMETRIES = [
    ((2, 3, 8, 8), dict(kernel_size=2), False),
    ((64, 16, 28, 28), dict(kernel_size=2), False),  # the CNN's first pool
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1), True),
    ((1, 2, 10, 11), dict(kernel_size=3, stride=1, padding=1), True),
    (
        (2, 2, 10, 11),
        dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1)),
        True,
    ),
    ((2, 3, 8, 7), dict(kernel_size=3, stride=2, ceil_mode=True), True),
    ((2, 3, 7, 6), dict(kernel_size=2, stride=2, padding=1, ceil_mode=True), False),
    ((1, 1, 4097, 3), dict(kernel_size=(2, 3), stride=(2, 1)), False),  # long column
]


def _ids(g):
    return "x".join(map(str, g[0])) + "-" + "-".join(f"{k}{v}" for k, v in g[1].items())


def _values(shape, special: bool):
    if not special:
        return RNG.standard_normal(shape).astype(np.float32)
    x = RNG.integers(-2, 3, size=shape).astype(np.float32)  # ties
    x[RNG.random(shape) < 0.1] = np.nan
    x[RNG.random(shape) < 0.1] = -np.inf
    return x


def _run(x: np.ndarray, g: np.ndarray, kw: dict, device: str):
    t = gpucore.tensor(x)
    if device == "vulkan":
        t = t.to("vulkan")
    t.requires_grad_()
    with gpucore.dispatch.trace_ops() as ops:
        out, idx = F.max_pool2d(t, return_indices=True, **kw)
        out.backward(gpucore.tensor(g).to(device) if device == "vulkan" else gpucore.tensor(g))
    return out.detach().numpy(force=True), idx.numpy(force=True), t.grad.numpy(force=True), ops


@pytest.mark.parametrize("special", [False, True], ids=["random", "ties_nan_inf"])
@pytest.mark.parametrize("geom", GEOMETRIES, ids=_ids)
def test_matches_cpu(vulkan, geom, special):
    shape, kw, overlap = geom
    x = _values(shape, special)
    oshape = tuple(F.max_pool2d(gpucore.zeros(1, 1, *shape[2:]), **kw).shape[2:])
    g = RNG.standard_normal(shape[:2] + oshape).astype(np.float32)
    v, i, gx, ops = _run(x, g, kw, "vulkan")
    ran = {(n, b) for n, b, _ in ops}
    assert {("max_pool2d", "vulkan"), ("max_pool2d_backward", "vulkan")} <= ran, ops
    rv, ri, rgx, _ = on_cpu(_run, x, g, kw, "cpu")
    np.testing.assert_array_equal(v, rv)
    np.testing.assert_array_equal(i, ri)
    if overlap:
        np.testing.assert_allclose(gx, rgx, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(gx, rgx)


def test_forward_backward_makes_no_host_transfer(vulkan):
    x = gpucore.tensor(RNG.standard_normal((8, 4, 12, 12)).astype(np.float32)).to("vulkan")
    x.requires_grad_()
    g = gpucore.tensor(RNG.standard_normal((8, 4, 6, 6)).astype(np.float32)).to("vulkan")
    gpucore.vulkan.synchronize()
    s0 = gpucore.vulkan.stats()
    with gpucore.dispatch.trace_ops() as ops:
        out = F.max_pool2d(x, 3, stride=2, padding=1)
        out.backward(g)
    gpucore.vulkan.synchronize()
    s1 = gpucore.vulkan.stats()
    assert {b for _, b, _ in ops} == {"vulkan"}, ops
    assert s1["bytes_downloaded"] == s0["bytes_downloaded"]
    assert s1["bytes_uploaded"] == s0["bytes_uploaded"]
    assert x.grad.device.type == "vulkan"


def test_double_backward_on_device_inputs(vulkan):
    x = gpucore.tensor(RNG.standard_normal((2, 2, 6, 6)).astype(np.float32)).to("vulkan")
    x.requires_grad_()
    out, idx = F.max_pool2d(x, 3, stride=1, padding=1, return_indices=True)
    g = gpucore.tensor(RNG.standard_normal(out.shape).astype(np.float32)).to("vulkan")
    g.requires_grad_()
    (gx,) = gpucore.autograd.grad(out, x, g, create_graph=True)
    v = RNG.standard_normal(x.shape).astype(np.float32)
    (gg,) = gpucore.autograd.grad(gx, g, gpucore.tensor(v).to("vulkan"))
    want = np.take_along_axis(v.reshape(2, 2, 36), idx.numpy(force=True).reshape(2, 2, 36), 2)
    np.testing.assert_array_equal(gg.numpy(force=True), want.reshape(out.shape))
