"""int16 (a full dtype) and PyTorch's limited unsigned dtypes uint16 / uint32 / uint64 against
PyTorch: promotion of every pair and with Python scalars, casts both ways with every dtype (NaN,
inf, out-of-range floats), int16 arithmetic's wrap-around, bitwise ops and shifts, reductions'
result dtypes, the ops the unsigned dtypes support and those they refuse, printing, numpy,
save/load, and Vulkan tensors agreeing with the CPU."""

import math

import numpy as np
import pytest

import gpucore

torch = pytest.importorskip("torch")

from helpers import same_as_torch as same  # noqa: E402

NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
)  # fmt: skip
NEW = ("int16", "uint16", "uint32", "uint64")
LIMITED = ("uint16", "uint32", "uint64")


def g(name):
    return getattr(gpucore, name)


def t(name):
    return getattr(torch, name)


def outcome(fn):
    """fn's result, or the kind of failure (PyTorch and gpucore raise different classes)."""
    try:
        return fn()
    except (RuntimeError, TypeError, NotImplementedError):
        return "raises"


# ----------------------------------------------------------------------------- names
def test_names_aliases_and_attributes():
    assert gpucore.short is gpucore.int16
    assert gpucore.int16.itemsize == 2 and gpucore.int16.is_signed
    for name, bits in (("uint16", 16), ("uint32", 32), ("uint64", 64)):
        d = g(name)
        assert d.itemsize * 8 == bits and not d.is_signed and not d.is_floating_point
    x = gpucore.tensor([1.7, -2.2])
    assert x.short().dtype is gpucore.int16 and x.short().tolist() == [1, -2]
    s = gpucore.ShortTensor([3, -4])
    assert s.dtype is gpucore.int16 and isinstance(s, gpucore.ShortTensor)
    assert x.type("torch.ShortTensor").dtype is gpucore.int16
    for name in NEW:
        ours, theirs = gpucore.ones(1, dtype=g(name)).type(), torch.ones(1, dtype=t(name)).type()
        assert ours.split(".")[1] == theirs.split(".")[1]
    for name in NEW:
        ii, ti = gpucore.iinfo(g(name)), torch.iinfo(t(name))
        assert (ii.bits, ii.min, ii.max) == (ti.bits, ti.min, ti.max)


@pytest.mark.parametrize("name", NEW)
def test_numpy_round_trip_and_repr(name):
    npd = np.dtype(name)
    a = np.array([[0, 1, 7], [np.iinfo(npd).max, 5, 3]], npd)
    ours = gpucore.from_numpy(a)
    assert ours.dtype is g(name) and gpucore.tensor(a).dtype is g(name)
    assert ours.numpy().dtype == npd and ours.tolist() == a.tolist()
    assert ours[1, 0].item() == int(np.iinfo(npd).max)
    # (whitespace aside: "gpucore." is longer than "torch.", so the dtype may wrap elsewhere)
    ours_r, theirs_r = repr(ours).replace("gpucore.", ""), repr(torch.from_numpy(a))
    assert ours_r.split() == theirs_r.replace("torch.", "").split()


# ----------------------------------------------------------------------------- promotion
def test_promote_types_every_pair_as_torch():
    for a in NAMES:
        for b in NAMES:
            want = outcome(lambda a=a, b=b: torch.promote_types(t(a), t(b)))
            got = outcome(lambda a=a, b=b: gpucore.promote_types(g(a), g(b)))
            want = want if isinstance(want, str) else str(want).split(".")[-1]
            got = got if isinstance(got, str) else got.name
            assert got == want, (a, b)


@pytest.mark.parametrize("name", NEW)
def test_result_type_with_scalars_and_0d_tensors_as_torch(name):
    ours, theirs = gpucore.ones(3, dtype=g(name)), torch.ones(3, dtype=t(name))
    for s in (1, -1, True, 2.5, 300):
        assert gpucore.result_type(ours, s).name == str(torch.result_type(theirs, s))[6:]
        assert (ours * s).dtype.name == str((theirs * s).dtype)[6:], s
    for other in NAMES:
        z, tz = gpucore.ones((), dtype=g(other)), torch.ones((), dtype=t(other))
        want = outcome(lambda tz=tz: str(torch.result_type(theirs, tz))[6:])
        got = outcome(lambda z=z: gpucore.result_type(ours, z).name)
        assert got == want, other
        if want != "raises":  # mul is implemented for every dtype
            same(ours * z, theirs * tz)


# ----------------------------------------------------------------------------- casts
FLOATS = [0.0, -0.0, 1.9, -1.9, 127.5, -128.5, 255.5, 32767.9, -32768.9, 40000.7, -40000.7,
          70000.5, 3e9, -3e9, 1e19, 2.0**63, -(2.0**63), 1e30, math.inf, -math.inf,
          math.nan]  # fmt: skip
INTS = [0, 1, -1, 127, -128, 255, 256, 32767, -32768, 32768, 65535, 65536, 2**31 - 1, -(2**31),
        2**32 + 5, 2**62, -(2**63)]  # fmt: skip


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("src", ["float32", "float64", "float16", "bfloat16"])
def test_float_to_new_dtype_as_torch(src, name):
    vals = [v for v in FLOATS if src not in ("float16", "bfloat16") or abs(v) < 6e4 or v != v]
    ours = gpucore.tensor(vals, dtype=g(src)).to(g(name))
    same(ours, torch.tensor(vals, dtype=t(src)).to(t(name)))


@pytest.mark.parametrize("name", NEW)
def test_integer_casts_both_ways_wrap_as_torch(name):
    src = torch.tensor(INTS, dtype=torch.int64)
    ours = gpucore.tensor(INTS).to(g(name))
    same(ours, src.to(t(name)))
    for other in NAMES:  # from the new dtype to every dtype
        same(ours.to(g(other)), src.to(t(name)).to(t(other)))
        if other != "bool":  # and from every dtype to it
            vals = src.to(t(other))
            mine = (
                gpucore.from_numpy(vals.numpy())
                if other != "bfloat16"
                else gpucore.from_numpy(vals.float().numpy()).bfloat16()
            )
            same(mine.to(g(name)), vals.to(t(name)))


# ----------------------------------------------------------------------------- int16 arithmetic
def _pair():
    rng = np.random.default_rng(0)
    a = rng.integers(-32768, 32768, 64).astype(np.int16)
    b = rng.integers(-32768, 32768, 64).astype(np.int16)
    a[:4] = [32767, -32768, -32768, 0]
    b[:4] = [1, -1, 1, 5]
    b[b == 0] = 3
    return a, b


@pytest.mark.parametrize(
    "op",
    [
        lambda x, y: x + y, lambda x, y: x - y, lambda x, y: x * y, lambda x, y: x // y,
        lambda x, y: x % y, lambda x, y: x / y, lambda x, y: x == y, lambda x, y: x < y,
        lambda x, y: x >= y, lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y,
        lambda x, y: -x, lambda x, y: abs(x), lambda x, y: ~x, lambda x, y: x + 40000,
        lambda x, y: x * 3, lambda x, y: x - 1.5, lambda x, y: x**2, lambda x, y: 7 - x,
        lambda x, y: x.maximum(y), lambda x, y: x.minimum(y), lambda x, y: x.clamp(-100, 100),
        lambda x, y: x.sign(), lambda x, y: x.where(x > y, y), lambda x, y: x.fmod(y),
        lambda x, y: x.exp(), lambda x, y: x.to(torch.uint8 if
        isinstance(x, torch.Tensor) else gpucore.uint8) + y,
    ],
)  # fmt: skip
def test_int16_arithmetic_wraps_as_torch(op):
    a, b = _pair()
    with np.errstate(all="ignore"):
        same(op(gpucore.from_numpy(a), gpucore.from_numpy(b)),
             op(torch.from_numpy(a), torch.from_numpy(b)))  # fmt: skip


# ----------------------------------------------------------------------------- reductions
@pytest.mark.parametrize(
    "red",
    [
        lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.prod(), lambda x: x.cumsum(0),
        lambda x: x.amax(0), lambda x: x.amin(), lambda x: x.max(0)[0], lambda x: x.max(0)[1],
        lambda x: x.argmax(), lambda x: x.argmin(1), lambda x: x.sort(1)[0],
        lambda x: x.sort(1)[1], lambda x: x.all(), lambda x: x.any(0), lambda x: x.float().mean(),
        lambda x: x.count_nonzero(), lambda x: x.unique(), lambda x: x.topk(2, 1)[0],
        lambda x: x.median(), lambda x: x.flip(0), lambda x: x.nonzero(),
    ],
)  # fmt: skip
def test_int16_reductions_and_result_dtypes_as_torch(red):
    a = np.array([[30000, -7, 0, 12], [20000, 5, -32768, 3], [1, 1, 2, 32767]], np.int16)
    same(red(gpucore.from_numpy(a)), red(torch.from_numpy(a)))


def _setitem(x, index, value):
    y = x.clone()
    y[index] = value
    return y


@pytest.mark.parametrize(
    "op",
    [
        lambda x, m: x.gather(1, m.tensor([[0, 2], [1, 1], [3, 0]])),
        lambda x, m: x.scatter_add(1, m.tensor([[0], [1], [2]]), x[:, :1]),
        lambda x, m: x.index_select(0, m.tensor([2, 0])), lambda x, m: x.masked_fill(x > 0, 99),
        lambda x, m: m.stack([x, x], 1), lambda x, m: m.cat([x, x[:1]]),
        lambda x, m: x.repeat(2, 1), lambda x, m: x.roll(1, 0), lambda x, m: x.tril(),
        lambda x, m: x.kthvalue(2, 1)[0], lambda x, m: x.abs()[2].bincount(),
        lambda x, m: x.cumprod(1), lambda x, m: x.diff(dim=1), lambda x, m: x.sum(dtype=m.int16),
        lambda x, m: _setitem(x, (0, 1), 5), lambda x, m: _setitem(x, x < 0, 0),
        lambda x, m: x.t().contiguous(), lambda x, m: x.unique(return_counts=True)[1],
        lambda x, m: m.where(x > 0, x, 1), lambda x, m: x.clone().mul_(3),
    ],
)  # fmt: skip
def test_int16_indexing_joining_and_in_place_as_torch(op):
    a = np.array([[300, -7, 0, 12], [-32768, 5, 32767, 3], [1, 1, 2, -9]], np.int16)
    same(op(gpucore.from_numpy(a), gpucore), op(torch.from_numpy(a), torch))


# ----------------------------------------------------------------------------- the unsigned dtypes
LIMITED_OPS = [
    lambda x: x * x, lambda x: x * 3, lambda x: x == x, lambda x: x != 2, lambda x: x & x,
    lambda x: x | 1, lambda x: x ^ x, lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.cumsum(0),
    lambda x: x.sort()[0], lambda x: x.unique(), lambda x: x / x, lambda x: x * 1.5,
    lambda x: x.float(), lambda x: x[1:], lambda x: x.reshape(1, -1).t().contiguous(),
    lambda x: x.all(), lambda x: x.any(), lambda x: x.floor(), lambda x: x.trunc(),
    lambda x: x.where(x == x, x), lambda x: x + x, lambda x: x - 1, lambda x: x < x,
    lambda x: -x, lambda x: ~x, lambda x: x << 1, lambda x: x >> 1, lambda x: x.max(),
    lambda x: x.argmax(), lambda x: x // x, lambda x: x % x, lambda x: x.abs(),
    lambda x: x.maximum(x), lambda x: x.clamp(0, 2), lambda x: x.topk(1)[0],
    lambda x: x.nonzero(), lambda x: x.gather(0, x[:1].long() * 0),
]  # fmt: skip


@pytest.mark.parametrize("name", LIMITED)
@pytest.mark.parametrize("i", range(len(LIMITED_OPS)))
def test_unsigned_ops_as_torch_supports_or_refuses_them(name, i):
    op = LIMITED_OPS[i]
    vals = [1, 2, 3, int(np.iinfo(np.dtype(name)).max)]
    want = outcome(lambda: op(torch.tensor(vals, dtype=t(name))))
    if isinstance(want, str):
        with pytest.raises(gpucore.DTypeError):
            op(gpucore.tensor(vals, dtype=g(name)))
    else:
        same(op(gpucore.tensor(vals, dtype=g(name))), want)


def test_unsigned_compositions_of_supported_ops_run():
    """flip and roll are compositions of indexing in gpucore (PyTorch has no uint16 flip)."""
    a = np.array([1, 2, 65535], np.uint16)
    x = gpucore.from_numpy(a)
    np.testing.assert_array_equal(x.flip(0).numpy(), a[::-1])
    np.testing.assert_array_equal(x.roll(1).numpy(), np.roll(a, 1))


def test_unsigned_refusals_name_the_op_and_the_fix():
    x = gpucore.ones(2, dtype=gpucore.uint32)
    with pytest.raises(gpucore.DTypeError, match=r"add: not implemented for gpucore.uint32.*\.to"):
        x + x
    with pytest.raises(gpucore.DTypeError, match="Promotion for uint16, uint32, uint64"):
        x * gpucore.ones(2, dtype=gpucore.int32)
    assert gpucore.full((2,), -1, dtype=gpucore.uint64).tolist() == [2**64 - 1] * 2
    assert gpucore.zeros(2, dtype=gpucore.uint16).tolist() == [0, 0]


# ----------------------------------------------------------------------------- save / load
def test_save_load_round_trip(tmp_path):
    sd = {n: gpucore.tensor([0, 1, int(np.iinfo(np.dtype(n)).max)], dtype=g(n)) for n in NEW}
    sd["neg"] = gpucore.tensor([-32768, -1], dtype=gpucore.int16)
    path = tmp_path / "x.safetensors"
    gpucore.save(sd, path)
    back = gpucore.load(path)
    for k, v in sd.items():
        assert back[k].dtype is v.dtype and back[k].tolist() == v.tolist()
    header = path.read_bytes()[8 : 8 + int.from_bytes(path.read_bytes()[:8], "little")]
    for code in (b'"I16"', b'"U16"', b'"U32"', b'"U64"'):
        assert code in header


# ----------------------------------------------------------------------------- Vulkan
@pytest.mark.parametrize("name", NEW)
def test_vulkan_tensors_agree_with_the_cpu(vulkan, name):
    x = gpucore.tensor([1, 2, 300, 7, 0], dtype=g(name))
    v = x.to("vulkan")
    assert v.device.type == "vulkan" and v.dtype is x.dtype
    ops = [lambda a: a * 3, lambda a: a == 2, lambda a: a.sum(), lambda a: a & 6,
           lambda a: gpucore.cat([a, a]), lambda a: a[1:3], lambda a: a.float(),
           lambda a: a.to(gpucore.int64), lambda a: a.sort()[0]]  # fmt: skip
    if name == "int16":
        ops += [lambda a: a + a - 1, lambda a: -a, lambda a: a.amax(), lambda a: a < 5,
                lambda a: a // 2, lambda a: a << 3, lambda a: a.cumsum(0)]  # fmt: skip
    for op in ops:
        r, c = op(v), op(x)
        assert r.dtype is c.dtype
        np.testing.assert_array_equal(r.numpy(force=True), c.numpy())
    f = gpucore.tensor([1.5, -2.5, 300.7, 7e4], device="vulkan").to(g(name))
    np.testing.assert_array_equal(
        f.numpy(force=True), gpucore.tensor([1.5, -2.5, 300.7, 7e4]).to(g(name)).numpy()
    )


# ----------------------------------------------------------------------------- compiled models
def _graph(x):
    return ((x * 3) & 0x7F).to(gpucore.int64), x == 2, x.to(gpucore.float32) * 0.5


@pytest.mark.parametrize("name", NEW)
def test_compiled_cpu_model_matches_eager(name):
    from gpucore.runtime.model import compile as compile_model

    x = gpucore.tensor([[1, 2, 300], [7, 0, 65]], dtype=g(name))
    want = _graph(x)
    got = compile_model(_graph, (x,), device="cpu")(x)
    for a, b in zip(got, want):
        assert a.dtype is b.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("name", NEW)
def test_compiled_vulkan_model_matches_eager(vulkan, name):
    """The Vulkan executor runs them on the device (binary.comp / binary64.comp; a uint16 input
    is not read as bfloat16)."""
    from gpucore.runtime.model import compile as compile_model

    x = gpucore.tensor([[1, 2, 300], [7, 0, 65]], dtype=g(name))
    want = _graph(x)
    got = compile_model(_graph, (x,), device="vulkan")(x)
    for a, b in zip(got, want):
        assert a.dtype is b.dtype
        np.testing.assert_array_equal(a.numpy(force=True), b.numpy())
