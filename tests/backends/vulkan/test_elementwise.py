"""Binary elementwise Vulkan kernels (shaders/binary.comp, where.comp, fused.comp) against the CPU
path: arithmetic and comparisons with broadcasting and strided inputs, float semantics, packed bool
outputs, logical ops, where, int32 arithmetic, gradients and the push-constant layouts. The unary
family (clamp, casts, log1p, unary.comp's functions) is in test_unary.py.

Every test runs the op on the device (the ``vulkan`` fixture) and on the CPU and compares; where
the CPU kernel and the shader must agree bit for bit (comparisons, where, the special cases of pow,
NaN propagation) the tolerance is zero. Each test runs twice: with elementwise fusion (contiguous
float32 ops go through fused.comp programs) and without (each op its own kernel).
"""

from __future__ import annotations

import numpy as np
import pytest
from device_helpers import (
    VIEWS,
    assert_close_to_cpu,
    assert_same_floats,
    dev,
    dev_view,
    fusion_mode,  # noqa: F401  (a fixture, used by name)
    on_cpu,
    ran_on_device,
)

import gpucore
from gpucore import _cpu
from gpucore import dtypes as D
from gpucore.backends.vulkan.kernels import elementwise as E

# every test here runs with elementwise fusion on and off (device_helpers.fusion_mode)
pytestmark = pytest.mark.usefixtures("fusion_mode")
RNG = np.random.default_rng(1234)  # this module's own stream: its tolerances were set on it


def rand(*shape, lo=-2.0, hi=2.0, dtype=np.float32):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# the binary codes of cpu/opcodes.def: arithmetic (the fused programs' set) and comparisons
ARITH = list(_cpu.OPCODES["fused_binary"])
CMP = [n for n in _cpu.OPCODES["binary"] if n not in ARITH]


def binop(name):
    """The op as a function of two tensors (gpucore.add, or the method where there is none)."""
    fn = getattr(gpucore, name, None)
    return fn if fn is not None else (lambda a, b: getattr(a, name)(b))


def pow_inputs(shape_a, shape_b):
    # positive bases and moderate exponents: no NaNs from negative bases in the generic tests
    return rand(*shape_a, lo=0.1, hi=3.0), rand(*shape_b, lo=-3.0, hi=3.0)


def inputs_for(name, shape_a, shape_b):
    if name == "pow":
        return pow_inputs(shape_a, shape_b)
    a, b = rand(*shape_a), rand(*shape_b)
    if name == "div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    if name in CMP:
        # equal values too, so eq/le/ge see ties
        if a.shape == b.shape:
            flat = a.reshape(-1)
            flat[::3] = b.reshape(-1)[::3]
    return a, b


# ----------------------------------------------------------------------------- binary, broadcast
SHAPES = [
    ((1,), (1,)),
    ((4095,), (4095,)),
    ((4096,), (4096,)),
    ((4097,), (4097,)),
    ((7, 1, 13), (5, 1)),  # odd-shaped broadcast both ways
    ((3, 1, 5), (1, 4, 1)),
    ((), (33,)),  # 0-d tensor against a vector
    ((17, 9), ()),
    ((2, 1, 3, 1, 2, 1, 3, 1), (2, 1, 3, 1, 2, 1, 3)),  # 8 dims, none merge
]


@pytest.mark.parametrize("name", ARITH + CMP)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_binary_against_cpu(vulkan, name, shapes):
    a, b = inputs_for(name, *shapes)
    tol = dict(rtol=3e-7, atol=0) if name in ("div", "pow") else dict(rtol=0, atol=0)
    ops = assert_close_to_cpu(binop(name), [dev(a), dev(b)], **tol)
    ran_on_device(ops, name)


@pytest.mark.parametrize("name", ["add", "mul", "maximum", "gt", "ne"])
def test_binary_large_and_odd_size(vulkan, name):
    a, b = rand(1000003), rand(1000003)
    ops = assert_close_to_cpu(binop(name), [dev(a), dev(b)], rtol=0, atol=0)
    ran_on_device(ops, name)


def test_results_match_numpy_float64(vulkan):
    a, b = rand(6, 1, 11), rand(5, 1)
    x, y = dev(a), dev(b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose((x + y).numpy(), a64 + b64, rtol=1e-6)
    np.testing.assert_allclose((x * y).numpy(), a64 * b64, rtol=1e-6)
    np.testing.assert_allclose((x / y).numpy(), a64 / b64, rtol=1e-6)
    np.testing.assert_array_equal((x < y).numpy(), a64 < b64)


def test_result_dtypes_and_devices(vulkan):
    x, y = dev(rand(10, 10)), dev(rand(10))
    s = x + y
    c = x > y
    assert s.dtype is D.float32 and s.device.type == "vulkan"
    assert c.dtype is D.bool_ and c.device.type == "vulkan" and c.shape == (10, 10)


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("name", ["sub", "div", "pow", "minimum", "lt", "eq"])
def test_binary_strided_inputs(vulkan, name, view):
    fn = VIEWS[view]
    rows, cols = fn(np.empty((40, 41))).shape
    a, b = inputs_for(name, (40, 41), (cols, rows))
    x = dev_view(a, fn)
    y = dev_view(b, lambda t: t.T)  # the second operand transposed
    assert not x._data.flags.c_contiguous and x.shape == y.shape
    tol = dict(rtol=3e-7, atol=0) if name in ("div", "pow") else dict(rtol=0, atol=0)
    ops = assert_close_to_cpu(binop(name), [x, y], **tol)
    ran_on_device(ops, name)
    ops = assert_close_to_cpu(binop(name), [y, x], **tol)
    ran_on_device(ops, name)


def test_strided_views_through_the_api(vulkan):
    a = rand(6, 8, 10)
    x = dev(a)
    views = [x.transpose(0, 2), x[:, 1::3, :], x.permute(2, 0, 1)[..., 2:], x[1].t()]
    for v in views:
        w = dev(rand(*v.shape))
        assert_close_to_cpu(lambda p, q: p * q + p, [v, w])
        assert_close_to_cpu(lambda p, q: gpucore.where(p > q, p, q), [v, w], rtol=0, atol=0)
    e = dev(rand(1, 10)).expand(8, 10)
    assert_close_to_cpu(lambda p, q: p - q, [e, x[0]], rtol=0, atol=0)


def test_strides_byte_offsets_of_bools(vulkan):
    # bool views whose elements sit at every byte position of a 32-bit word
    c = dev(rand(9, 13) > 0)
    for v in (c[1:, 3:], c[:, 1::3], c.t(), c[2:7, 1:2].expand(5, 13)):
        a, b = dev(rand(*v.shape)), dev(rand(*v.shape))
        ops = assert_close_to_cpu(lambda m, p, q: gpucore.where(m, p, q), [v, a, b], rtol=0, atol=0)
        ran_on_device(ops, "where")
        assert_close_to_cpu(lambda m: m.logical_not(), [v], rtol=0, atol=0)
        assert_close_to_cpu(lambda m: m.float(), [v], rtol=0, atol=0)


def test_eight_dims_merged_or_not(vulkan):
    a = rand(*([2] * 8))
    ops = assert_close_to_cpu(lambda p, q: p + q, [dev(a), dev(a)], rtol=0, atol=0)
    ran_on_device(ops, "add")
    perm = (1, 0, 3, 2, 5, 4, 7, 6)  # no two neighbouring dims merge
    x = dev_view(a, lambda t: t.transpose(perm))
    b = rand(2, 1, 2, 1, 2, 1, 2, 1)
    ops = assert_close_to_cpu(lambda p, q: p * q, [x, dev(b)], rtol=0, atol=0)
    ran_on_device(ops, "mul")
    c = rand(1, 2, 1, 2, 1, 2, 1, 2) > 0
    ops = assert_close_to_cpu(
        lambda m, p, q: gpucore.where(m, p, q), [dev(c), x, dev(b)], rtol=0, atol=0
    )
    assert ops[-1][:2] == ("where", "cpu")  # 8 dims left after merging: where takes 6


def test_empty_tensors(vulkan):
    x, y = dev(rand(0, 5)), dev(rand(5))
    assert (x + y).shape == (0, 5)
    assert (x > y).numpy().shape == (0, 5)
    assert gpucore.where(x > 0, x, y).shape == (0, 5)
    assert x.clamp(0, 1).shape == (0, 5)


# ----------------------------------------------------------------------------- float semantics
SPECIAL = np.array(
    [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        -2.0,
        3.0,
        -3.0,
        2.5,
        -2.5,
        np.inf,
        -np.inf,
        np.nan,
        1e-30,
        -1e-30,
        1e30,
        -1e30,
        17.0,
        -17.0,
        1 / 3,
        1e10,
        -1e10,
        64.0,
        -64.0,
        33.0,
        2.0**24,
        2.0**24 + 2,
        1.0000001,
        0.9999999,
        88.0,
        -104.0,
        0.1,
        -0.1,
    ],
    np.float32,
)


def grid():
    x, y = np.meshgrid(SPECIAL, SPECIAL, indexing="ij")
    return x.reshape(-1).copy(), y.reshape(-1).copy()


@pytest.mark.parametrize("name", ARITH + CMP)
def test_special_values(vulkan, name):
    a, b = grid()
    x, y = dev(a), dev(b)
    got = binop(name)(x, y).numpy()
    want = on_cpu(binop(name), x.cpu(), y.cpu()).numpy()
    assert got.dtype == want.dtype
    # pow: special cases exact; the finite results within 2 ulp of C's powf
    assert_same_floats(
        got.astype(np.float32), want.astype(np.float32), rtol=2.5e-7 if name == "pow" else 0.0
    )


def test_maximum_minimum_propagate_nan_from_either_side(vulkan):
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0, -0.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, np.nan, -0.0, 0.0], np.float32)
    x, y = dev(a), dev(b)
    for fn in (gpucore.maximum, gpucore.minimum):
        got = fn(x, y).numpy()
        assert np.isnan(got[:4]).all()
        assert_same_floats(got, on_cpu(fn, x.cpu(), y.cpu()).numpy())


def test_pow_accuracy(vulkan):
    n = 200_000
    a = np.abs(RNG.standard_normal(n)).astype(np.float32) * 4
    b = (RNG.standard_normal(n) * 6).astype(np.float32)
    b[::2] = np.round(b[::2])  # integer exponents, incl. negative bases
    a[1::4] *= -1
    a[1::4][np.mod(b[1::4], 1) != 0] *= -1
    got = (dev(a) ** dev(b)).numpy().astype(np.float64)
    ref = np.power(a.astype(np.float64), b.astype(np.float64))
    ok = np.isfinite(ref) & (np.abs(ref) > 1e-37) & (np.abs(ref) < 1e37)
    rel = np.abs(got[ok] - ref[ok]) / np.abs(ref[ok])
    assert rel.max() < 2.5e-7, rel.max()
    # near-1 bases to large powers: exp2(y * log2(x)) in float would be off by ~30% here
    got = (dev(np.float32([0.9999999, 1.0000001])) ** dev(np.float32([2**24, 2**23]))).numpy()
    np.testing.assert_allclose(
        got,
        np.power(
            np.float64([0.9999999, 1.0000001]).astype(np.float32).astype(np.float64),
            [2.0**24, 2.0**23],
        ),
        rtol=1e-6,
    )


def test_div_by_zero_and_signed_zeros(vulkan):
    a = np.float32([1.0, -1.0, 0.0, np.nan, np.inf, -0.0, 3.0])
    b = np.float32([0.0, 0.0, 0.0, 1.0, np.inf, 2.0, -0.0])
    x, y = dev(a), dev(b)
    assert_same_floats((x / y).numpy(), on_cpu(lambda p, q: p / q, x.cpu(), y.cpu()).numpy())


# ----------------------------------------------------------------------------- bool outputs
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 4095, 4097])
def test_comparison_word_packing(vulkan, n):
    a, b = rand(n), rand(n)
    b[::2] = a[::2]
    x, y = dev(a), dev(b)
    outs = [
        fn(x, y) for fn in (gpucore.eq, gpucore.ne, gpucore.lt, gpucore.le, gpucore.gt, gpucore.ge)
    ]
    # outputs are neighbours in device memory: each must survive the others' whole-word writes
    for o, want in zip(outs, (a == b, a != b, a < b, a <= b, a > b, a >= b)):
        np.testing.assert_array_equal(o.numpy(), want)


def test_comparison_results_feed_other_device_ops(vulkan):
    a, b = rand(37, 5), rand(5)
    x, y = dev(a), dev(b)
    m = x > y
    assert m.device.type == "vulkan"
    np.testing.assert_array_equal((m & (x < 1.0)).numpy(), (a > b) & (a < 1.0))
    np.testing.assert_array_equal(gpucore.where(m, x, y).numpy(), np.where(a > b, a, b))
    np.testing.assert_array_equal(m.float().numpy(), (a > b).astype(np.float32))


def test_comparison_as_python_bool_syncs(vulkan):
    x = dev(np.float32([1.0, 2.0]))
    assert bool((x > 0).all()) is True
    assert bool(x[0] == 1.0) is True


# ----------------------------------------------------------------------------- logical
@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_binary(vulkan, name):
    p, q = dev(rand(7, 1, 13) > 0), dev(rand(5, 1) > 0)
    ops = assert_close_to_cpu(lambda a, b: getattr(a, name)(b), [p, q], rtol=0, atol=0)
    ran_on_device(ops, name)


# ----------------------------------------------------------------------------- where
@pytest.mark.parametrize(
    "shapes",
    [
        ((4097,), (4097,), (4097,)),
        ((7, 1, 13), (5, 1), (13,)),
        ((3, 1), (), (1, 4)),
        ((1,), (6, 6), (6, 1)),
    ],
)
def test_where_broadcast(vulkan, shapes):
    c = rand(*shapes[0]) > 0
    a, b = rand(*shapes[1]), rand(*shapes[2])
    ops = assert_close_to_cpu(
        lambda m, p, q: gpucore.where(m, p, q), [dev(c), dev(a), dev(b)], rtol=0, atol=0
    )
    ran_on_device(ops, "where")


def test_where_int32_and_nan_payloads(vulkan):
    c = rand(100) > 0
    a = RNG.integers(-(2**31), 2**31 - 1, 100, dtype=np.int32)
    b = RNG.integers(-5, 5, 100, dtype=np.int32)
    ops = assert_close_to_cpu(
        lambda m, p, q: gpucore.where(m, p, q), [dev(c), dev(a), dev(b)], rtol=0, atol=0
    )
    ran_on_device(ops, "where")
    # float bits are copied as they are
    f = np.float32([np.nan, -0.0, np.inf, 1.5])
    out = gpucore.where(dev(np.ones(4, bool)), dev(f), dev(np.zeros(4, np.float32))).numpy()
    assert out.view(np.uint32).tolist() == f.view(np.uint32).tolist()


def test_where_with_a_cpu_condition_and_scalars(vulkan):
    c = gpucore.tensor(rand(50) > 0)  # host tensor: uploaded by the device op
    x = dev(rand(50))
    ops = assert_close_to_cpu(lambda m, p: gpucore.where(m, p, 0.0), [c, x], rtol=0, atol=0)
    ran_on_device(ops, "where")


def test_where_with_seven_dims_that_do_not_merge_runs_on_cpu(vulkan):
    c = rand(2, 1, 2, 1, 2, 1, 2) > 0
    a = rand(2, 3, 1, 3, 1, 3, 1)
    b = rand(1, 3, 2, 1, 2, 3, 2)
    with gpucore.dispatch.trace_ops() as ops:
        out = gpucore.where(dev(c), dev(a), dev(b))
    assert ops[-1][:2] == ("where", "cpu")
    np.testing.assert_array_equal(out.numpy(), np.where(c, a, b))


# ----------------------------------------------------------------------------- int32 arithmetic
@pytest.mark.parametrize("name", ["add", "sub", "mul", "maximum", "minimum"] + CMP)
def test_int32_ops(vulkan, name):
    a = RNG.integers(-(2**31), 2**31 - 1, (9, 17), dtype=np.int32)  # overflow wraps, as numpy
    b = RNG.integers(-(2**31), 2**31 - 1, (17,), dtype=np.int32)
    a[0, :] = b
    ops = assert_close_to_cpu(binop(name), [dev(a), dev(b)], rtol=0, atol=0)
    ran_on_device(ops, name)


def test_dtypes_without_a_shader_run_on_cpu(vulkan):
    a = rand(10, lo=0.5, hi=2.0).astype(np.float64)
    x64 = gpucore.tensor(a)  # float64 pow: no shader (binaryf64.comp has no pow)
    with gpucore.dispatch.trace_ops() as ops:
        r1 = x64**x64
        r3 = dev(np.arange(10, dtype=np.int32)) / dev(np.arange(1, 11, dtype=np.int32))
    assert [o[1] for o in ops if o[0] in ("pow", "div")] == ["cpu", "cpu"]
    np.testing.assert_allclose(r1.numpy(), a**a, rtol=1e-15)
    np.testing.assert_allclose(r3.numpy(), np.arange(10) / np.arange(1, 11), rtol=1e-7)


# ----------------------------------------------------------------------------- autograd
def test_binary_gradients_match_cpu(vulkan):
    a, b = rand(5, 1, 7, lo=0.5, hi=2.0), rand(6, 1, lo=0.5, hi=2.0)

    def f(p, q):
        p = p.detach().requires_grad_()
        q = q.detach().requires_grad_()
        y = (p * q + p / q - q) ** 2 + gpucore.maximum(p, q) - gpucore.minimum(p, 1.0)
        y = gpucore.where(p > q, y, y * 0.5) + p.pow(q)
        y.backward(gpucore.ones(*y.shape).to(p.device.type))
        return p.grad, q.grad

    assert_close_to_cpu(f, [dev(a), dev(b)], rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- layout
def test_push_constant_layouts_fit(vulkan):
    limit = vulkan.ctx.limits["maxPushConstantsSize"]
    for lay in (E._BIN_PUSH, E._WHERE_PUSH):
        assert 4 * lay.words <= min(128, limit)
    # the shader's block: 7 scalars + 3 arrays of 8; where's: 6 scalars + 4 arrays of 6
    assert (E._BIN_PUSH.words, E._WHERE_PUSH.words) == (31, 30)


def test_collapse_merges_contiguous_dims_and_drops_ones():
    sh, st = E._collapse((4, 1, 5, 6), [[30, 0, 6, 1], [0, 0, 6, 1]])
    assert sh == [4, 30] and st == [[30, 1], [0, 1]]
    sh, st = E._collapse((1, 1), [[0, 0]])
    assert sh == [1] and st == [[0]]
    sh, st = E._collapse((3, 4), [[-4, -1]])
    assert sh == [12] and st == [[-1]]
