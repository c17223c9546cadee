"""dtype objects, creation and conversion in every dtype, bfloat16 rounding, comparisons and
promotion."""

import copy
import pickle

import numpy as np
import pytest

import gpucore
from gpucore import dtypes as D

ALL = [
    gpucore.float32,
    gpucore.float64,
    gpucore.float16,
    gpucore.bfloat16,
    gpucore.int8,
    gpucore.uint8,
    gpucore.int32,
    gpucore.int64,
    gpucore.bool,
    gpucore.int16,
    gpucore.uint16,
    gpucore.uint32,
    gpucore.uint64,
]
NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": np.float32,  # compared through float32
    "int8": np.int8,
    "uint8": np.uint8,
    "int32": np.int32,
    "int64": np.int64,
    "bool": np.bool_,
    "int16": np.int16,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
}
ITEMSIZE = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
}


def vals(t):
    return t.detach().numpy(force=True)


def bf16_bits(values):
    t = gpucore.tensor(np.asarray(values, np.float32)).bfloat16()
    return t._data.tolist()


# ----------------------------------------------------------------------------- dtype objects
def test_top_level_dtypes_and_aliases():
    assert [d.name for d in ALL] == list(NP)
    assert gpucore.float is gpucore.float32 and gpucore.double is gpucore.float64
    assert gpucore.half is gpucore.float16 and gpucore.long is gpucore.int64
    assert gpucore.int is gpucore.int32
    assert isinstance(gpucore.float32, gpucore.dtype)
    assert str(gpucore.float32) == "gpucore.float32" and repr(gpucore.bool) == "gpucore.bool"


@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_dtype_attributes(dt):
    assert dt.itemsize == ITEMSIZE[dt.name]
    assert dt.is_floating_point == (dt.name.startswith("float") or dt.name == "bfloat16")
    assert gpucore.ones(3, dtype=dt).element_size() == dt.itemsize
    # no complex dtypes: False for all, as torch's real dtypes answer
    assert dt.is_complex is False and gpucore.ones(1, dtype=dt).is_complex() is False


@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_dtype_pickle_and_copy_keep_identity(dt):
    assert pickle.loads(pickle.dumps(dt)) is dt
    assert copy.deepcopy(dt) is dt
    assert copy.copy(dt) is dt


def test_as_dtype_accepts_names_numpy_and_python_types():
    assert D.as_dtype("float32") is gpucore.float32
    assert D.as_dtype("double") is gpucore.float64
    assert D.as_dtype(np.int32) is gpucore.int32
    assert D.as_dtype(np.dtype("uint8")) is gpucore.uint8
    assert D.as_dtype(float) is gpucore.float64  # as torch: dtype=float is torch.float64
    assert D.as_dtype(int) is gpucore.int64
    assert D.as_dtype(bool) is gpucore.bool
    assert D.as_dtype(np.int16) is gpucore.int16 and D.as_dtype("short") is gpucore.int16
    assert D.as_dtype(np.uint64) is gpucore.uint64
    for bad in ("floaty", np.complex64, "float128"):
        with pytest.raises(gpucore.DTypeError):
            D.as_dtype(bad)


# ----------------------------------------------------------------------------- creation per dtype
@pytest.mark.parametrize("dt", ALL, ids=lambda d: d.name)
def test_creation_in_each_dtype(dt):
    npd = NP[dt.name]
    checks = [
        (gpucore.zeros(2, 3, dtype=dt), np.zeros((2, 3), npd)),
        (gpucore.ones(4, dtype=dt), np.ones(4, npd)),
        (gpucore.full((2,), 1, dtype=dt), np.ones(2, npd)),
        (gpucore.tensor([1, 0, 1], dtype=dt), np.array([1, 0, 1], npd)),
        (gpucore.eye(3, dtype=dt), np.eye(3, dtype=npd)),
        (gpucore.zeros_like(gpucore.ones(2), dtype=dt), np.zeros(2, npd)),
        (
            gpucore.from_numpy(np.array([1, 0], npd))
            if dt is not gpucore.bfloat16
            else gpucore.tensor([1.0, 0.0], dtype=dt),
            np.array([1, 0], npd),
        ),
    ]
    if dt is not gpucore.bool:
        checks.append((gpucore.arange(4, dtype=dt), np.arange(4).astype(npd)))
    for t, ref in checks:
        assert t.dtype is dt
        got = vals(t)
        assert got.dtype == ref.dtype
        np.testing.assert_array_equal(got, ref)
    assert gpucore.empty(5, dtype=dt).dtype is dt
    assert gpucore.empty(5, dtype=dt)._data.dtype == dt.np


# ----------------------------------------------------------------------------- conversion
SRC = [1.5, -2.0, 0.0, 3.0, 100.25]
CONVERSIONS = [
    ("float", gpucore.float32),
    ("double", gpucore.float64),
    ("half", gpucore.float16),
    ("bfloat16", gpucore.bfloat16),
    ("long", gpucore.int64),
    ("int", gpucore.int32),
    ("bool", gpucore.bool),
    ("byte", gpucore.uint8),
    ("char", gpucore.int8),
]


@pytest.mark.parametrize("src", [d for d in ALL if d is not gpucore.bool], ids=lambda d: d.name)
@pytest.mark.parametrize("method,target", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
def test_conversion_methods(src, method, target):
    data = np.array(SRC if src.is_floating_point else [1, 2, 0, 3, 100], np.float64)
    if target is gpucore.uint8 or src is gpucore.uint8:
        data = np.abs(data)
    x = gpucore.tensor(data, dtype=src)
    y = getattr(x, method)()
    assert y.dtype is target and y.shape == x.shape
    # Reference: the source's values (exact in every dtype here) cast with numpy.
    src_vals = vals(x).astype(np.float64)
    ref = src_vals.astype(NP[target.name])
    if target is gpucore.bfloat16:
        ref = D.bf16_to_f32(D.f32_to_bf16(src_vals.astype(np.float32)))
    np.testing.assert_array_equal(vals(y), ref)
    z = x.to(target)
    assert z.dtype is target
    np.testing.assert_array_equal(vals(z), vals(y))


def test_bool_conversions():
    b = gpucore.tensor([True, False, True])
    assert b.float().tolist() == [1.0, 0.0, 1.0]
    assert b.long().tolist() == [1, 0, 1]
    assert b.bfloat16().float().tolist() == [1.0, 0.0, 1.0]
    f = gpucore.tensor([0.0, -0.0, 0.5, float("nan"), float("inf")])
    assert f.bool().tolist() == [False, False, True, True, True]
    assert f.bfloat16().bool().tolist() == [False, False, True, True, True]


def test_float_to_int_truncates_toward_zero():
    x = gpucore.tensor([1.9, -1.9, 2.5, -0.5])
    assert x.long().tolist() == [1, -1, 2, 0]
    assert x.int().dtype is gpucore.int32


def test_to_accepts_strings_numpy_types_tensor_and_device():
    x = gpucore.ones(2)
    assert x.to("float64").dtype is gpucore.float64
    assert x.to(np.int32).dtype is gpucore.int32
    assert x.to(gpucore.zeros(1, dtype=gpucore.int8)).dtype is gpucore.int8
    assert x.to("cpu", gpucore.float16).dtype is gpucore.float16
    assert x.to(dtype=gpucore.bool).dtype is gpucore.bool
    assert x.to(gpucore.float32) is x
    c = x.to(gpucore.float32, copy=True)
    assert c is not x and not np.shares_memory(c.numpy(), x.numpy())
    assert x.to(np.int16).dtype is gpucore.int16
    with pytest.raises(gpucore.DTypeError):
        x.to(np.complex64)
    with pytest.raises(gpucore.DeviceError):
        x.to("cuda")


def test_conversion_copies():
    x = gpucore.tensor([1.0, 2.0])
    y = x.double()
    y[0] = 5.0
    assert x.tolist() == [1.0, 2.0]


def test_float16_overflow_to_inf_and_rounding():
    with np.errstate(over="ignore"):
        h = gpucore.tensor([70000.0, 1.0 + 2**-11, 1.0 + 3 * 2**-11]).half()
    assert vals(h).tolist() == [float("inf"), 1.0, 1.0 + 2**-9]


# ----------------------------------------------------------------------------- bfloat16
@pytest.mark.parametrize(
    "value,bits",
    [
        (1.0, 0x3F80),
        (1.00390625, 0x3F80),  # exactly half an ulp above 1.0: tie -> even (1.0)
        (1.01171875, 0x3F82),  # tie between 1.0078125 (odd) and 1.015625 (even) -> 1.015625
        (1.0 + 2**-8 + 2**-20, 0x3F81),  # just above the tie: rounds up
        (1.0 + 2**-8 - 2**-20, 0x3F80),  # just below: rounds down
        (-1.01171875, 0xBF82),
        (-0.0, 0x8000),
        (float("inf"), 0x7F80),
        (float("-inf"), 0xFF80),
        (3.4e38, 0x7F80),  # rounds past the largest bfloat16 to inf
        (2**-133, 0x0001),  # the smallest bfloat16 subnormal
        (2**-134, 0x0000),  # half of it: tie -> even (0)
        (1.5 * 2**-133, 0x0002),  # tie between 1 and 2 subnormal steps -> 2
        (1.25 * 2**-133, 0x0001),
    ],
)
def test_bfloat16_round_to_nearest_even(value, bits):
    assert bf16_bits([value]) == [bits]


def test_bfloat16_values_roundtrip():
    assert gpucore.tensor([1.00390625, 1.01171875]).bfloat16().float().tolist() == [1.0, 1.015625]
    assert gpucore.tensor([1.01171875], dtype=gpucore.bfloat16).float().tolist() == [1.015625]
    # Integers above 256 lose low bits (8 significant bits), ties to even.
    assert gpucore.tensor([257, 259, 384]).bfloat16().float().tolist() == [256.0, 260.0, 384.0]


@pytest.mark.parametrize("nan_bits", [0x7FC00000, 0x7F800001, 0xFFC00000, 0x7FFFFFFF])
def test_bfloat16_nan_stays_nan(nan_bits):
    f = np.array([nan_bits], np.uint32).view(np.float32)
    b = gpucore.tensor(f).bfloat16()
    assert (b._data[0] & 0x7F80) == 0x7F80 and (b._data[0] & 0x007F) != 0
    assert np.isnan(vals(b.float())[0])
    assert np.isnan(b.item())


def test_bfloat16_storage_and_numpy():
    b = gpucore.tensor([1.5, -2.0], dtype=gpucore.bfloat16)
    assert b._data.dtype == np.uint16 and b.element_size() == 2
    with pytest.raises(gpucore.DTypeError, match="float"):
        b.numpy()
    assert b.numpy(force=True).tolist() == [1.5, -2.0]
    assert b.tolist() == [1.5, -2.0]
    assert np.asarray(b).dtype == np.float32
    assert "bfloat16" in repr(b)


def test_bfloat16_arithmetic_rounds_result():
    a = gpucore.tensor([1.0, 1.0], dtype=gpucore.bfloat16)
    b = gpucore.tensor([2**-8, 3 * 2**-8], dtype=gpucore.bfloat16)
    s = a + b
    assert s.dtype is gpucore.bfloat16
    assert s.float().tolist() == [1.0, 1.015625]  # 1 + 2**-8 ties to even; 1 + 3*2**-8 too


# ----------------------------------------------------------------------------- comparisons
# (uint16 / uint32 / uint64 have only == and != , as in PyTorch: tests/test_int16.py)
@pytest.mark.parametrize("dt", [d for d in ALL if d not in D.LIMITED], ids=lambda d: d.name)
def test_comparisons_give_bool(dt):
    a_np = np.array([0, 1, 2, 1]) if dt is not gpucore.bool else np.array([0, 1, 1, 0])
    b_np = np.array([1, 1, 0, 2]) if dt is not gpucore.bool else np.array([1, 1, 0, 0])
    a, b = gpucore.tensor(a_np, dtype=dt), gpucore.tensor(b_np, dtype=dt)
    av, bv = vals(a), vals(b)
    for op, ref in [
        (a == b, av == bv),
        (a != b, av != bv),
        (a < b, av < bv),
        (a <= b, av <= bv),
        (a > b, av > bv),
        (a >= b, av >= bv),
        (a.eq(b), av == bv),
        (gpucore.lt(a, b), av < bv),
    ]:
        assert op.dtype is gpucore.bool
        np.testing.assert_array_equal(vals(op), ref)
    s = a == 1
    assert s.dtype is gpucore.bool and vals(s).tolist() == (av == 1).tolist()


def test_float_comparisons_with_nan():
    a = gpucore.tensor([float("nan"), 1.0])
    assert (a == a).tolist() == [False, True]
    assert (a != a).tolist() == [True, False]
    assert (a < 2).tolist() == [False, True]


# ----------------------------------------------------------------------------- promotion
@pytest.mark.parametrize(
    "a,b,expected",
    [
        (gpucore.int8, gpucore.uint8, gpucore.int16),
        (gpucore.int16, gpucore.uint8, gpucore.int16),
        (gpucore.int16, gpucore.int32, gpucore.int32),
        (gpucore.int32, gpucore.int64, gpucore.int64),
        (gpucore.int64, gpucore.float16, gpucore.float16),
        (gpucore.float16, gpucore.bfloat16, gpucore.float32),
        (gpucore.float32, gpucore.float64, gpucore.float64),
        (gpucore.bool, gpucore.int8, gpucore.int8),
        (gpucore.bool, gpucore.bool, gpucore.bool),
        (gpucore.bool, gpucore.float32, gpucore.float32),
    ],
)
def test_promotion(a, b, expected):
    assert D.promote(a, b) is expected and D.promote(b, a) is expected
    x, y = gpucore.ones(2, dtype=a), gpucore.ones(2, dtype=b)
    if a is not gpucore.bool or b is not gpucore.bool:
        assert (x + y).dtype is expected


def test_scalar_promotion():
    assert (gpucore.ones(2, dtype=gpucore.int64) * 1.5).dtype is gpucore.float32
    assert (gpucore.ones(2, dtype=gpucore.int32) + 1).dtype is gpucore.int32
    assert (gpucore.ones(2, dtype=gpucore.float16) + 1.0).dtype is gpucore.float16
    assert (gpucore.ones(2, dtype=gpucore.uint8) + True).dtype is gpucore.uint8
    # a 0-d tensor of the same category acts like a scalar
    assert (gpucore.ones(2) + gpucore.tensor(1.0, dtype=gpucore.float64)).dtype is gpucore.float32
    assert (gpucore.ones(2, dtype=gpucore.int32) + gpucore.tensor(5)).dtype is gpucore.int32


# ----------------------------------------------------------------------------- indices
@pytest.mark.parametrize(
    "dt", [gpucore.int8, gpucore.uint8, gpucore.int32, gpucore.int64], ids=lambda d: d.name
)
def test_integer_dtypes_as_indices(dt):
    x = gpucore.arange(10) * 10
    idx = gpucore.tensor([1, 3, 3], dtype=dt)
    assert x[idx].tolist() == [10, 30, 30]
    assert x[gpucore.tensor(4, dtype=dt)].item() == 40
    assert [5, 6, 7][gpucore.tensor(2, dtype=dt)] == 7  # __index__
    assert x[1 : gpucore.tensor(3, dtype=dt)].tolist() == [10, 20]


def test_float_and_bool_tensors_are_not_integer_indices():
    with pytest.raises(IndexError, match="long, int or bool"):
        gpucore.arange(4)[gpucore.tensor([1.0])]
    with pytest.raises(TypeError):
        [1, 2][gpucore.tensor(1.0)]
    m = gpucore.tensor([True, False, True, False])
    assert gpucore.arange(4)[m].tolist() == [0, 2]


def test_numpy_scalars_promote_like_python_scalars():
    assert (gpucore.ones(2, dtype=gpucore.int64) + np.float32(1.5)).tolist() == [2.5, 2.5]
    assert (gpucore.ones(2, dtype=gpucore.int64) + np.float32(1.5)).dtype is gpucore.float32
    assert (gpucore.ones(2, dtype=gpucore.bool) + np.int8(1)).dtype is gpucore.int64
    assert (gpucore.ones(2, dtype=gpucore.float16) * np.float64(2)).dtype is gpucore.float16
    with pytest.raises(TypeError):
        gpucore.ones(2) + np.complex64(1j)
    with pytest.raises(gpucore.DTypeError, match="complex"):
        D.scalar_result(gpucore.float32, 1j)


def test_python_types_as_dtypes_match_torch():
    torch = pytest.importorskip("torch")
    for py in (float, int, bool):
        ours, theirs = gpucore.zeros(1, dtype=py), torch.zeros(1, dtype=py)
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], py
        assert str(gpucore.ones(1).to(py).dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
