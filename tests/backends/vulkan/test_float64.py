"""float64 on the Vulkan device (shaders/binaryf64.comp, gemm64.comp; devices with shaderFloat64
and shaderInt64, which lavapipe has): arithmetic, comparisons, clamp, the exact unary ops and
casts to and from float32 / int64 / int32 / int8 / uint8 / bool, bit for bit with the CPU path on
NaN, +-inf, -0.0, subnormals, halves and out-of-range values; matmul within rounding of the
CPU's (exact on integers); and a device without the features keeps float64 on the host."""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import RNG, VIEWS, dev, dev_view, on_cpu, ran_on_device, run_exact

import gpucore
from gpucore import dispatch

SPECIALS = np.array(
    [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, -5e-324, 2.2250738585072014e-308,
     0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3e9, -3e9, 2.0**31, -(2.0**31), 1e19, 2.0**63, -(2.0**63),
     2.0**53 + 2, 300.7, -129.9, 1 / 3, 3.4028235677973366e38, 3.4028235e38 * 1.0000001,
     1.401298464324817e-45, 7e-46],
    np.float64,
)  # fmt: skip


@pytest.fixture(autouse=True)
def _needs_float64(vulkan):
    if not vulkan.ctx.float64:
        pytest.skip("the device has no shaderFloat64 / shaderInt64")


def doubles(n: int = 6001, seed: int = 0) -> np.ndarray:
    """SPECIALS, then values of every magnitude (both signs, 1e-30 .. 1e30), the same for a seed."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    x[: SPECIALS.size] = SPECIALS
    return x


BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]
UNARY = [
    "neg",
    "abs",
    "sqrt",
    "sign",
    "reciprocal",
    "floor",
    "ceil",
    "trunc",
    "round",
    "logical_not",
]


@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_cpu_bit_for_bit(name):
    x, y = doubles(), doubles(seed=1)[::-1].copy()
    y[::5] = x[::5]  # ties for the comparisons
    got = run_exact(getattr(gpucore, name), x, y, name=name)
    with np.errstate(all="ignore"):
        ref = {"maximum": np.maximum, "minimum": np.minimum}.get(name)
        if ref is not None:  # NaN propagates
            np.testing.assert_array_equal(got, ref(x, y))


@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_cpu_bit_for_bit(name):
    x = doubles()
    got = run_exact(lambda t: getattr(t, name)(), x, name=name)
    want = {"trunc": np.trunc, "round": np.round, "floor": np.floor, "sqrt": np.sqrt}.get(name)
    if want is not None:
        with np.errstate(all="ignore"):
            w = want(x)
        np.testing.assert_array_equal(np.signbit(got[~np.isnan(w)]), np.signbit(w[~np.isnan(w)]))


def test_clamp_bounds_are_doubles():
    x = doubles()
    got = run_exact(lambda t: t.clamp(-0.1, 1 / 3), x, name="clamp")
    assert (got[np.isfinite(x)] <= 1 / 3).all() and 1 / 3 in got  # not float32's 1/3


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "int8", "uint8", "bool"])
def test_casts_from_float64(dtype):
    got = run_exact(lambda t: t.to(getattr(gpucore, dtype)), doubles(), name="to_dtype")
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, doubles().astype(got.dtype))


def test_casts_to_float64():
    i64 = RNG.integers(-(2**63), 2**63 - 1, 4001, dtype=np.int64)
    i64[:5] = [2**63 - 1, -(2**63), 2**53 + 1, 2**53 + 3, -(2**60) + 7]  # rounding ties
    with np.errstate(over="ignore"):
        f32 = doubles().astype(np.float32)
    for x in (
        i64,
        i64.astype(np.int32),
        i64.astype(np.int8),
        i64.astype(np.uint8),
        i64 % 3 == 0,
        f32,
    ):
        got = run_exact(lambda t: t.to(gpucore.float64), x, name="to_dtype")
        np.testing.assert_array_equal(got, x.astype(np.float64))


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_half_casts_go_through_float32_as_on_the_cpu(half):
    dt = getattr(gpucore, half)
    got = run_exact(lambda t: t.to(dt).float(), doubles(), name="to_dtype")  # float64 -> half
    with np.errstate(over="ignore"):
        f32 = doubles().astype(np.float32)
        if half == "float16":  # float64 -> float32 -> float16, each rounded to nearest even
            np.testing.assert_array_equal(got, f32.astype(np.float16).astype(np.float32))
    wide = run_exact(lambda t: t.to(dt).double(), f32, name="to_dtype")  # half -> float64
    np.testing.assert_array_equal(wide, run_exact(lambda t: t.to(dt).float(), f32, name="to_dtype"))


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_strided_and_broadcast_operands(view):
    a, b = RNG.standard_normal((40, 60)), RNG.standard_normal((40, 60))
    fn = VIEWS[view]
    got = gpucore.sub(dev_view(a, fn), dev_view(b, fn)).cpu().numpy()
    np.testing.assert_array_equal(got, fn(a) - fn(b))
    got = run_exact(
        gpucore.mul, RNG.standard_normal((7, 1, 13)), RNG.standard_normal((5, 1)), name="mul"
    )
    assert got.shape == (7, 5, 13)


@pytest.mark.parametrize(
    "shapes",
    [((5, 7), (7, 3)), ((2, 3, 4, 5), (5, 6)), ((4, 1, 6, 3), (5, 3, 2)), ((3, 0), (0, 2))],
)
def test_matmul_float64(shapes):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    with dispatch.trace_ops() as ops:
        got = gpucore.matmul(dev(a), dev(b)).cpu().numpy()
    ran_on_device(ops, "matmul")
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-13, atol=1e-13)
    ints = [RNG.integers(-255, 256, s).astype(np.float64) for s in shapes]  # exact products
    got = gpucore.matmul(dev(ints[0]), dev(ints[1]))
    np.testing.assert_array_equal(
        got.cpu().numpy(), on_cpu(gpucore.matmul, *map(gpucore.tensor, ints)).numpy()
    )


@pytest.mark.parametrize("name", ["exp", "log"])
def test_exp_and_log_within_one_ulp(name):
    rng = np.random.default_rng(3)
    if name == "exp":
        x = np.concatenate([rng.uniform(-750, 710, 20000), rng.standard_normal(5000)])
    else:
        x = np.abs(rng.standard_normal(20000)) * 10.0 ** rng.integers(-320, 300, 20000)
    x[:12] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 709.78, 709.79, -745.1, -745.2, 5e-324, 1.0, -1.0]
    with dispatch.trace_ops() as ops:
        got = getattr(dev(x), name)().cpu().numpy()
    ran_on_device(ops, name)
    with np.errstate(all="ignore"):
        want = getattr(np, name)(x)
    finite = np.isfinite(want) & (want != 0)
    np.testing.assert_array_equal(got[~finite], want[~finite])  # specials, overflow, underflow
    ulps = np.abs(got[finite] - want[finite]) / np.spacing(np.abs(want[finite]))
    assert ulps.max() <= 1.0, ulps.max()


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("dims", [(1,), (0, 2), (0, 1, 2)])
def test_reductions(name, dims):
    x = RNG.standard_normal((9, 301, 7)) * 1e3
    x[3, 5, :] = np.nan  # max / min propagate NaN
    with dispatch.trace_ops() as ops:
        got = getattr(dev(x), name)(dims).cpu().numpy()
    ran_on_device(ops, name)
    ref = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[name]
    np.testing.assert_allclose(got, ref(x, axis=dims), rtol=1e-14, atol=1e-9)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dim):
    x = RNG.standard_normal((6, 40, 5)) * 30
    with dispatch.trace_ops() as ops:
        got = gpucore.softmax(dev(x), dim=dim).cpu().numpy()
    ran_on_device(ops, "softmax")
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=dim, keepdims=True), rtol=1e-14, atol=1e-300)


def test_device_without_float64_keeps_it_on_the_host(vulkan, monkeypatch):
    monkeypatch.setattr(vulkan.ctx, "float64", False)
    x = doubles(100)
    with dispatch.trace_ops() as ops:
        got = gpucore.add(dev(x), dev(x)).cpu().numpy()
        ints = gpucore.add(dev(np.arange(5)), dev(np.arange(5))).cpu().numpy()
    assert [b for n, b, _ in ops if n == "add"] == ["cpu", "vulkan"]  # float64 ran on the host
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, x + x)
    np.testing.assert_array_equal(ints, 2 * np.arange(5))


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dim", [0, 1])
def test_scans_bit_for_bit(name, dim):
    x = RNG.standard_normal((50, 37)) * 1.5  # products stay finite over 50 steps
    got = run_exact(lambda t: getattr(t, name)(dim), x, name=name)
    np.testing.assert_array_equal(got, getattr(np, name)(x, axis=dim))


def test_compiled_model_float64(vulkan, monkeypatch):
    """A model compiled for Vulkan runs its float64 nodes there (the CPU's answer); on a device
    without shaderFloat64 the compile refuses them, naming the node."""
    from gpucore import runtime
    from gpucore.errors import DeviceError

    def f(x, w):
        return (x.matmul(w) * 0.5 - x.sum(-1, keepdim=True)).exp().to(gpucore.float32)

    x, w = RNG.standard_normal((4, 6)) * 0.1, RNG.standard_normal((6, 6)) * 0.1
    cm = runtime.compile(f, [x, w], device="vulkan")
    got = cm.run_arrays([x, w])[0]
    want = on_cpu(f, gpucore.tensor(x), gpucore.tensor(w)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    monkeypatch.setattr(vulkan.ctx, "float64", False)
    with pytest.raises(DeviceError, match="of float64.*no Vulkan shader.*no shaderFloat64.*='cpu'"):
        runtime.compile(f, [x, w], device="vulkan")


@pytest.mark.parametrize("padding", [0, 1])
def test_compiled_conv2d_float64(vulkan, padding):
    """conv2d of float64 in a model compiled for Vulkan: im2col.comp's word pairs, then gemm64;
    integer-valued data (ONNX ConvInteger's exact composition) gives the CPU's bits."""
    import gpucore.nn.functional as F
    from gpucore import runtime

    def f(x, w, b):
        return F.conv2d(x, w, b, stride=(2, 1), padding=padding)

    x = RNG.integers(-128, 128, (2, 3, 9, 8)).astype(np.float64)
    w = RNG.integers(-128, 128, (4, 3, 3, 2)).astype(np.float64)
    b = RNG.integers(-1000, 1000, 4).astype(np.float64)
    cm = runtime.compile(f, [x, w, b], device="vulkan")
    got = cm.run_arrays([x, w, b])[0]
    want = on_cpu(f, gpucore.tensor(x), gpucore.tensor(w), gpucore.tensor(b)).numpy()
    np.testing.assert_array_equal(got, want)
    xr, wr = RNG.standard_normal(x.shape), RNG.standard_normal(w.shape)
    got = cm.run_arrays([xr, wr, b])[0]
    want = on_cpu(f, gpucore.tensor(xr), gpucore.tensor(wr), gpucore.tensor(b)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize("mask", ["none", "bool", "float", "dead_rows"])
def test_compiled_attention_float64(vulkan, mask):
    """The runtime's attention node on float64 (non-causal; reduce64.attention64): the CPU's
    values within rounding, rows with every key masked 0 as on the CPU (PyTorch's SDPA)."""
    import gpucore.nn.functional as F
    from gpucore import runtime

    q, k, v = (RNG.standard_normal((2, 3, 5, 8)) for _ in range(3))
    m = None
    if mask != "none":
        m = RNG.random((5, 5)) < 0.6
        m[:, 0] = True
        if mask == "dead_rows":
            m[2] = False
        if mask == "float":
            m = np.where(m, 0.0, -1e9) + RNG.standard_normal((5, 5))

    def f(q, k, v, *mm):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mm[0] if mm else None)

    args = [q, k, v] + ([m] if m is not None else [])
    cm = runtime.compile(f, args, device="vulkan")
    if mask == "none":  # the fused node (masked float64 SDPA stays gemm / softmax / where)
        assert "attention" in {n.op for n in cm.graph.nodes}
    got = cm.run_arrays(args)[0]
    want = on_cpu(f, *map(gpucore.tensor, args)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("mask", ["bool", "float"])
def test_attention64_against_the_runtime_reference(vulkan, mask):
    """reduce64.attention64 with a mask (what the executor records for a fused float64 attention
    node), rows with every key masked included, against the node's reference (_att_eval)."""
    from gpucore.backends.vulkan.kernels import reduce64
    from gpucore.runtime.ir.fused import _att_eval

    q, k, v = (RNG.standard_normal((2, 3, 5, 8)) for _ in range(3))
    m = RNG.random((5, 6)) < 0.6
    m[2] = False  # a dead row: 0
    if mask == "float":
        m = np.where(m, 0.0, -np.inf) + RNG.standard_normal((5, 6))
    k, v = (
        k[:, :, :1].repeat(6, 2) + RNG.standard_normal((2, 3, 6, 8)),
        RNG.standard_normal((2, 3, 6, 8)),
    )
    t = [dev(a) for a in (q, k, v, m)]
    out = dev(np.zeros((2, 3, 5, 8)))
    reduce64.attention64(vulkan, out._data, *(x._data for x in t), 0.3)
    want = _att_eval([q, k, v, m], {"scale": 0.3, "causal": 0})
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-12, atol=1e-13)
    assert (out.cpu().numpy()[:, :, 2] == 0).all()
