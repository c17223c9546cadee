"""int16, uint16, uint32 and uint64 on the Vulkan device: storage (a uint16 tensor is never read as
bfloat16), casts to and from every dtype, int16 arithmetic wrapping to 16 bits and its integer
division, comparisons, where, gather, cat and topk, bit for bit with the CPU path and numpy;
the unsigned kernels' own order and division (which the registry reaches for uint16 / uint32 /
uint64 only through the ops PyTorch allows them, and the runtime through its graphs) called
directly against numpy, uint64 division exact at the edges."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, ints, ran_on_device, run_exact

import gpucore
from gpucore.backends.vulkan.kernels import KERNELS

NARROW = [np.int16, np.uint16, np.uint32, np.uint64]
ALL = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
       "float16", "bfloat16", "float32", "float64"]  # fmt: skip


def values(name: str, n: int) -> np.ndarray:
    """Values of dtype ``name`` with its edges; floats with NaN, infinities and out-of-range
    values for every integer type."""
    if name == "bool":
        return RNG.random(n) > 0.5
    if name in ("float16", "bfloat16", "float32", "float64"):
        x = (RNG.standard_normal(n) * 10.0 ** RNG.integers(0, 20, n)).astype(np.float32)
        x[:12] = [np.nan, np.inf, -np.inf, -1.0, -1.5, 65535.7, -32769.0, 2.0**31, 2.0**32,
                  3.5e9, 2.0**63, 2.0**64]  # fmt: skip
        return x
    return ints(np.dtype(name), n)


def dt(name: str):
    return getattr(gpucore, "bool" if name == "bool" else name)


@pytest.mark.parametrize("dtype", NARROW)
def test_storage_round_trip_keeps_the_dtype(vulkan, dtype):
    a = ints(dtype, 3, 517)
    t = gpucore.tensor(a).to("vulkan")
    assert t.dtype is gpucore.tensor(a).dtype
    np.testing.assert_array_equal(t.numpy(), a)
    c = t.clone()
    np.testing.assert_array_equal(c.cpu().numpy(), a)
    assert gpucore.dtypes.is_uint16(t._data) == (dtype == np.uint16)


NEW = ["int16", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("src, dst", [(s, d) for s in ALL for d in NEW if s != d])
def test_casts_to_the_new_dtypes(vulkan, src, dst):
    if src == "float64" and not vulkan.ctx.float64:
        pytest.skip("no shaderFloat64 (test_device_without_float64_casts_them_on_the_host)")
    x = gpucore.tensor(values(src, 4103)).to(dt(src))
    with gpucore.dispatch.trace_ops() as ops:
        got = x.to("vulkan").to(dt(dst)).cpu()
    ran_on_device(ops, "to_dtype")
    want = x.to(dt(dst))
    assert got.dtype is want.dtype is dt(dst)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("src, dst", [(s, d) for s in NEW for d in ALL if s != d])
def test_casts_from_the_new_dtypes(vulkan, src, dst):
    if dst == "float64" and not vulkan.ctx.float64:
        pytest.skip("no shaderFloat64 (test_device_without_float64_casts_them_on_the_host)")
    x = gpucore.tensor(values(src, 4103))
    with gpucore.dispatch.trace_ops() as ops:
        got = x.to("vulkan").to(dt(dst)).cpu()
    ran_on_device(ops, "to_dtype")
    want = x.to(dt(dst))
    assert got.dtype is want.dtype
    g = got.float().numpy() if dst == "bfloat16" else got.numpy()
    w = want.float().numpy() if dst == "bfloat16" else want.numpy()
    np.testing.assert_array_equal(g, w)


def test_uint64_to_float_rounds_to_nearest_even(vulkan):
    u = np.array([2**64 - 1, 2**63, 2**63 + 2**39, 2**63 + 2**39 + 1, 2**24 + 1, 2**53 + 1,
                  (2**23 + 1) << 40, 3 << 62], np.uint64)  # fmt: skip
    got = gpucore.tensor(u).to("vulkan").float().numpy()
    np.testing.assert_array_equal(got, u.astype(np.float32))


INT16_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
             "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
             "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


@pytest.mark.parametrize("name", sorted(INT16_OPS))
def test_int16_wraps_and_compares_as_numpy(vulkan, name):
    a, b = ints(np.int16, 5003), ints(np.int16, 5003)
    b[::4] = a[::4]
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, INT16_OPS[name](a, b))
    a, b = ints(np.int16, 7, 1, 13), ints(np.int16, 5, 1)
    got = run_exact(getattr(gpucore, name), a, b, name=name)
    np.testing.assert_array_equal(got, INT16_OPS[name](a, b))


@pytest.mark.parametrize(
    "fn, name",
    [
        (lambda a, b: gpucore.div(a, b, rounding_mode="floor"), "div_rounded"),
        (lambda a, b: gpucore.div(a, b, rounding_mode="trunc"), "div_rounded"),
        (gpucore.remainder, "remainder"),
        (gpucore.fmod, "fmod"),
    ],
)
def test_int16_division_as_the_cpu(vulkan, fn, name):
    a, b = ints(np.int16, 4099), ints(np.int16, 4099)
    b[b == 0] = 3
    a[:2], b[:2] = -(2**15), -1  # INT16_MIN / -1 wraps
    got = run_exact(fn, a, b, name=name)
    assert got.dtype == np.int16


def _kernel(name, out_dtype, *arrays, out_shape=None, **attrs):
    """Kernel ``name`` of the Vulkan table on device copies of the arrays (of gpucore dtype
    taken from each array), the result (of ``out_shape``, default the arrays' broadcast shape; a
    list of (shape, dtype) for several) read back."""
    be = gpucore.dispatch.vulkan_backend(allow_cpu=True)
    ins = [be.upload(np.ascontiguousarray(a), gpucore.tensor(a[:0]).dtype) for a in arrays]
    if isinstance(out_dtype, list):
        outs = [be.empty_array(sh, d.np) for sh, d in out_dtype]
        KERNELS[name](be, outs, *ins, **attrs)
        return [np.array(be.host_view(o)) for o in outs]
    shape = out_shape or np.broadcast_shapes(*[a.shape for a in arrays])
    out = be.empty_array(shape, out_dtype.np)
    KERNELS[name](be, out, *ins, **attrs)
    return np.array(be.host_view(out))


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_kernels_order_and_wrap_as_numpy(vulkan, dtype):
    a, b = ints(dtype, 2053), ints(dtype, 2053)
    b[::5] = a[::5]
    u = gpucore.tensor(a[:0]).dtype
    for name, ref in INT16_OPS.items():
        out = gpucore.bool if ref(a[:1], b[:1]).dtype == np.bool_ else u
        np.testing.assert_array_equal(_kernel(name, out, a, b), ref(a, b), err_msg=name)


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_division_is_exact(vulkan, dtype):
    info = np.iinfo(dtype)
    a, b = ints(dtype, 2053), ints(dtype, 2053)
    b[:8] = [1, info.max, info.max - 1, 2, 3, 1 << (info.bits - 1), 7, (1 << (info.bits - 1)) + 1]
    a[:8] = info.max
    b[b == 0] = 5
    b[100:300] >>= RNG.integers(0, info.bits - 1, 200).astype(dtype)
    b[b == 0] = 1
    u = gpucore.tensor(a[:0]).dtype
    np.testing.assert_array_equal(_kernel("div_rounded", u, a, b, rounding_mode="floor"), a // b)
    np.testing.assert_array_equal(_kernel("remainder", u, a, b), a % b)


@pytest.mark.parametrize("dtype", NARROW)
def test_where_gather_and_cat_move_the_bits(vulkan, dtype):
    a, b = ints(dtype, 61, 33), ints(dtype, 61, 33)
    c = RNG.random((61, 1)) > 0.5
    got = run_exact(gpucore.where, c, a, b, name="where")
    np.testing.assert_array_equal(got, np.where(c, a, b))
    idx = RNG.integers(0, 33, (61, 7))
    if dtype == np.int16:
        got = run_exact(lambda x, i: gpucore.gather(x, 1, i), a, idx, name="gather")
    else:  # the registry's gather refuses the unsigned types, as PyTorch; the runtime's does not
        u = gpucore.tensor(a[:0]).dtype
        got = _kernel("gather", u, a, idx, out_shape=idx.shape, dim=1, src=a.shape)
    np.testing.assert_array_equal(got, np.take_along_axis(a, idx, 1))
    got = run_exact(lambda x, y: gpucore.cat([x, y[:, 1:]], 1), a, b, name="cat")
    np.testing.assert_array_equal(got, np.concatenate([a, b[:, 1:]], 1))


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_topk_orders_unsigned_values(vulkan, dtype):
    a = ints(dtype, 6, 40)
    u = gpucore.tensor(a[:0]).dtype
    for largest in (True, False):  # the kernel itself: the registry's topk refuses them
        specs = [((6, 5), u), ((6, 5), gpucore.int64)]
        v, i = _kernel("topk", specs, a, k=5, dim=1, largest=largest, shape=(6, 40))
        s = np.sort(a, axis=1)
        want = s[:, ::-1][:, :5] if largest else s[:, :5]
        np.testing.assert_array_equal(v, want)
        np.testing.assert_array_equal(np.take_along_axis(a, i, 1), want)


def test_device_without_float64_casts_them_on_the_host(vulkan, monkeypatch):
    monkeypatch.setattr(vulkan.ctx, "float64", False)
    u = ints(np.uint64, 101)
    with gpucore.dispatch.trace_ops() as ops:
        d = gpucore.tensor(u).to("vulkan").to(gpucore.float64).cpu().numpy()
        f = gpucore.tensor(u).to("vulkan").to(gpucore.float32).cpu().numpy()
    assert [b for n, b, _ in ops if n == "to_dtype"] == ["cpu", "vulkan"]
    np.testing.assert_array_equal(d, u.astype(np.float64))
    np.testing.assert_array_equal(f, u.astype(np.float32))


def test_compiled_model_runs_them_on_the_device(vulkan):
    """A model compiled for Vulkan takes uint16 (not read as bfloat16) and int16 inputs: casts,
    int16 arithmetic, bitwise ops and comparisons in one recorded graph, the CPU's answer."""
    from gpucore import runtime

    def f(x, y):
        z = (y * 3 - (x.to(gpucore.int16) ^ y)) >> 2
        w = gpucore.where(z > 0, x, (z & 0x7F).to(gpucore.uint16))
        return w, (x.to(gpucore.float32) + 0.5), z.to(gpucore.uint64)

    x, y = ints(np.uint16, 5, 300), ints(np.int16, 1, 300)
    cm = runtime.compile(f, [x, y], device="vulkan")
    got = cm.run_arrays([x, y])
    want = [t.numpy() for t in on_cpu_tensors(f, x, y)]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def on_cpu_tensors(f, *arrays):
    with gpucore.device_policy("cpu"):
        return f(*[gpucore.tensor(a) for a in arrays])


@pytest.mark.parametrize("dim", [0, 1, None])
def test_int16_extremes_and_truth_reductions(vulkan, dim):
    a = ints(np.int16, 37, 129)
    for name, ref in (("amax", np.max), ("amin", np.min)):
        fn = (
            (lambda t, n=name: getattr(t, n)())
            if dim is None
            else (lambda t, n=name: getattr(t, n)(dim))
        )
        np.testing.assert_array_equal(run_exact(fn, a, name=name), ref(a, axis=dim))
    for dtype in NARROW:
        x = ints(dtype, 37, 129)
        x[::3] = 0
        for name in ("any", "all"):
            fn = (
                (lambda t, n=name: getattr(t, n)())
                if dim is None
                else (lambda t, n=name: getattr(t, n)(dim))
            )
            want = getattr(np, name)(x, axis=dim)
            np.testing.assert_array_equal(run_exact(fn, x, name=name), want)
