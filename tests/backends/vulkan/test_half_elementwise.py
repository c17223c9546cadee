"""float16 / bfloat16 on the Vulkan device, elementwise: casts (half.glsl's integer rounding) bit
for bit against the CPU path (numpy's float16 conversion, gpucore.dtypes' bfloat16 rounding) over
every float16 and bfloat16 pattern and random / edge float32 patterns (NaN payloads, infinities,
subnormals, overflow to inf, ties); binary.comp's arithmetic and comparisons, clamp and log1p
bit for bit (the float32 result rounded once, as the CPU); unary.comp's HALF variant within one
half-precision step (its float32 functions differ from the C ones by an ulp or so); 16-bit
copies (contiguous, cat) exactly."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, assert_same_floats, dev_view, ran_on_device

import gpucore
import gpucore.nn.functional as F

HALF = {"float16": gpucore.float16, "bfloat16": gpucore.bfloat16}


def bits(t: gpucore.Tensor) -> np.ndarray:
    """The stored 16-bit patterns of a float16 / bfloat16 tensor (any device)."""
    return np.array(t._host()).view(np.uint16)


def half_tensor(a: np.ndarray, dtype) -> gpucore.Tensor:
    """float32 array ``a`` rounded to ``dtype`` on the CPU path (a host tensor)."""
    with gpucore.device_policy("cpu"):
        return gpucore.tensor(a).to(dtype)


def on_cpu(fn, *ts):
    with gpucore.device_policy("cpu"):
        return fn(*[t.cpu() for t in ts])


def edge_floats(n: int) -> np.ndarray:
    """Random float32 bit patterns plus the edges of the half formats' rounding."""
    special = [
        0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFF812345, 0x7FBFE000,  # inf, NaNs
        0x477FE000, 0x477FF000, 0x477FEFFF, 0x477FF001, 0x7F7FFFFF,  # 65504, overflow edges
        0x33000000, 0x33000001, 0x32FFFFFF, 0x33C00000, 0x38800000, 0x387FFFFF, 0x38000000,
        0x00000001, 0x80000001, 0x00800000, 0x80000000, 0x00000000,  # subnormals, zeros
        0x3F801000, 0x3F803000, 0x3F808000, 0x3F818000, 0x3F7FFFFF,  # round-to-even ties
    ]  # fmt: skip
    r = RNG.integers(0, 2**32, n - len(special), dtype=np.uint64).astype(np.uint32)
    # half of them in the float16 range, where the rounding matters most
    r[::2] = (r[::2] % (0x47800000 - 0x33000000)) + 0x33000000
    return np.concatenate([np.array(special, np.uint32), r]).view(np.float32)


def test_float16_to_float32_is_exact_for_every_pattern(vulkan):
    h = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.tensor(h).to("vulkan").float().cpu().numpy()
    ran_on_device(ops, "to_dtype")
    np.testing.assert_array_equal(got.view(np.uint32), h.astype(np.float32).view(np.uint32))


def test_bfloat16_to_float32_and_float16_match_the_cpu_for_every_pattern(vulkan):
    pattern = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256)
    host = gpucore.tensor(pattern)
    b = host.to("vulkan")  # reinterpret the patterns as bfloat16 on both paths
    b = gpucore.Tensor._wrap(b._data.view(np.uint16), gpucore.bfloat16, dev=b._dev)
    hb = gpucore.Tensor._wrap(host._data.view(np.uint16), gpucore.bfloat16)
    for dst in (gpucore.float32, gpucore.float16):
        got, want = b.to(dst), on_cpu(lambda t, d=dst: t.to(d), hb)
        np.testing.assert_array_equal(
            np.array(got._host()).view(np.uint8), np.array(want._host()).view(np.uint8)
        )


@pytest.mark.parametrize("name", sorted(HALF))
def test_float32_to_half_rounds_as_the_cpu_bit_for_bit(vulkan, name):
    x = edge_floats(66000).reshape(-1, 66)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.tensor(x).to("vulkan").to(HALF[name])
    ran_on_device(ops, "to_dtype")
    want = half_tensor(x, HALF[name])
    np.testing.assert_array_equal(bits(got), bits(want))
    if name == "float16":  # the CPU reference is numpy's conversion; overflow gives inf
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(bits(got), x.astype(np.float16).view(np.uint16))
        assert np.isinf(got.float().cpu().numpy()[0, [7, 9, 10]]).all()


@pytest.mark.parametrize("name", sorted(HALF))
@pytest.mark.parametrize("other", ["int32", "bool", "int8", "uint8", "int64", "half"])
def test_casts_between_half_and_other_types_match_the_cpu(vulkan, name, other):
    dt = HALF[name]
    x = (RNG.standard_normal(4200) * 300).astype(np.float32)
    x[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 70000.0]
    h = half_tensor(x, dt)
    odt = {"half": gpucore.bfloat16 if name == "float16" else gpucore.float16}.get(other)
    odt = odt or getattr(gpucore, other)
    with gpucore.dispatch.trace_ops() as ops:
        got = h.to("vulkan").to(odt)
    ran_on_device(ops, "to_dtype")
    want = on_cpu(lambda t: t.to(odt), h)
    assert got.dtype is want.dtype
    np.testing.assert_array_equal(np.array(got._host()), np.array(want._host()))
    if other != "half":  # and back
        back, want_back = got.to(dt), on_cpu(lambda t: t.to(dt), want)
        np.testing.assert_array_equal(bits(back), bits(want_back))


BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "ge"]


@pytest.mark.parametrize("name", sorted(HALF))
def test_binary_ops_round_the_float32_result_once(vulkan, name):
    dt = HALF[name]
    a = (RNG.standard_normal((67, 65)) * 200).astype(np.float32)
    b = (RNG.standard_normal((67, 65)) * 2).astype(np.float32)
    a[0, :8] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 6e-8, 60000.0, 2.0]
    b[0, :8] = [1.0, np.inf, np.nan, -0.0, 0.0, 0.5, 4.0, -np.inf]
    ha, hb = half_tensor(a, dt), half_tensor(b, dt)
    va, vb = ha.to("vulkan"), hb.to("vulkan")
    for op in BINARY:
        fn = getattr(gpucore, op)
        with gpucore.dispatch.trace_ops() as ops:
            got = fn(va, vb)
            got_bc = fn(va, vb[5])  # a broadcast row
        ran_on_device(ops, op)
        want, want_bc = on_cpu(fn, ha, hb), on_cpu(lambda x, y, f=fn: f(x, y[5]), ha, hb)
        for g, w in ((got, want), (got_bc, want_bc)):
            assert g.dtype is w.dtype, op
            assert_same_floats(g.float().cpu().numpy(), w.float().numpy())


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_binary_on_strided_half_views(vulkan, view):
    a = RNG.standard_normal((64, 90)).astype(np.float16)
    b = RNG.standard_normal((64, 90)).astype(np.float16)
    with gpucore.dispatch.trace_ops() as ops:
        got = gpucore.mul(dev_view(a, VIEWS[view]), dev_view(b, VIEWS[view])).cpu().numpy()
    ran_on_device(ops, "mul")
    want = (VIEWS[view](a).astype(np.float32) * VIEWS[view](b).astype(np.float32)).astype(
        np.float16
    )
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("name", sorted(HALF))
def test_clamp_log1p_and_scalars_match_the_cpu(vulkan, name):
    dt = HALF[name]
    a = (RNG.standard_normal((67, 65)) * 3).astype(np.float32)
    a[0, :4] = [np.nan, np.inf, -np.inf, -1.5]
    h = half_tensor(a, dt)
    fns = {
        "clamp": lambda t: t.clamp(-1.0, 2.0),
        "log1p": gpucore.log1p,
        "scalar": lambda t: t * 3.5 + 1.0,
    }
    for op, fn in fns.items():
        with gpucore.dispatch.trace_ops() as ops:
            got = fn(h.to("vulkan"))
        ran_on_device(ops, {"scalar": "mul"}.get(op, op))
        assert_same_floats(got.float().cpu().numpy(), on_cpu(fn, h).float().numpy())


UNARY = {
    "relu": F.relu, "abs": gpucore.abs, "neg": gpucore.neg, "sqrt": gpucore.sqrt,
    "exp": gpucore.exp, "tanh": gpucore.tanh, "sigmoid": gpucore.sigmoid, "gelu": F.gelu,
    "log": gpucore.log, "sin": gpucore.sin,
}  # fmt: skip
EXACT = {"relu", "abs", "neg", "sqrt"}  # correctly rounded in float32 on both paths


@pytest.mark.parametrize("name", sorted(HALF))
def test_unary_ops_on_half_match_the_cpu(vulkan, name):
    dt = HALF[name]
    a = (RNG.standard_normal((67, 65)) * 3).astype(np.float32)
    a[0, :5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    h = half_tensor(a, dt)
    v = h.to("vulkan")
    step = 2.0**-10 if dt is gpucore.float16 else 2.0**-7  # one rounding step, relative
    for op, fn in UNARY.items():
        with gpucore.dispatch.trace_ops() as ops:
            got = fn(v[1:])  # an odd element offset into the input's words
        ran_on_device(ops, op)
        assert got.dtype is dt
        want = on_cpu(lambda t, f=fn: f(t[1:]), h).float().numpy()
        assert_same_floats(got.float().cpu().numpy(), want, rtol=0.0 if op in EXACT else step)


@pytest.mark.parametrize("name", sorted(HALF))
def test_activation_backward_on_half(vulkan, name):
    dt = HALF[name]
    a = half_tensor(RNG.standard_normal((67, 65)).astype(np.float32) * 2, dt)

    def grad(x):
        x = x.detach().requires_grad_()
        y = F.gelu(x)
        y.backward(gpucore.ones_like(y))
        return x.grad

    with gpucore.dispatch.trace_ops() as ops:
        got = grad(a.to("vulkan"))
    ran_on_device(ops, "gelu_backward")
    assert got.dtype is dt
    step = 2.0**-10 if dt is gpucore.float16 else 2.0**-7
    assert_same_floats(got.float().cpu().numpy(), on_cpu(grad, a).float().numpy(), rtol=step)


@pytest.mark.parametrize("name", sorted(HALF))
def test_copies_of_half_stay_on_the_device(vulkan, name):
    dt = HALF[name]
    a = half_tensor(RNG.standard_normal((67, 65)).astype(np.float32), dt)
    b = half_tensor(RNG.standard_normal((67, 3)).astype(np.float32), dt)
    va, vb = a.to("vulkan"), b.to("vulkan")
    with gpucore.dispatch.trace_ops() as ops:
        t = va.T.contiguous()
        c = gpucore.cat([vb[:, 1:], va[:, ::3], vb], dim=1)  # slices sharing 32-bit words
    ran_on_device(ops, "cat")
    assert t.device.type == "vulkan" and c.device.type == "vulkan"
    np.testing.assert_array_equal(bits(t), bits(a).T)
    want = np.concatenate([bits(b)[:, 1:], bits(a)[:, ::3], bits(b)], axis=1)
    np.testing.assert_array_equal(bits(c), want)
