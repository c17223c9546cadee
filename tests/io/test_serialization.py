"""gpucore.save / gpucore.load: bit-exact round trips, nesting, safetensors interop, hostile and
corrupted files (always SerializationError), and the atomic-write promise."""

from __future__ import annotations

import functools
import json
import math
import os
import stat
import struct
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpucore
from gpucore import dtypes as D
from gpucore.errors import GpucoreError, SerializationError
from gpucore.io import from_bytes, to_bytes
from gpucore.io import safetensors_format as fmt
from gpucore.tensor import Tensor

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------- helpers
def _bits(u, npd):
    return np.array(u, dtype=npd)


# Bit patterns that must survive exactly: signed zeros, infinities, quiet/signalling NaNs with
# payloads and both signs, subnormals, extremes.
_F16 = [0x0000, 0x8000, 0x3C00, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFE55, 0x7C01, 0x0001, 0x7BFF]
_BF16 = [0x0000, 0x8000, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x7FC1, 0xFFC5, 0x7F81, 0x0001, 0x7F7F]
_F32 = [
    0,
    0x80000000,
    0x3F800000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0x7FC00123,
    0xFFC00001,
    0x7F800001,
    0x00000001,
    0x7F7FFFFF,
]
_F64 = [
    0,
    1 << 63,
    0x3FF0000000000000,
    0x7FF0000000000000,
    0xFFF0000000000000,
    0x7FF8000000000000,
    0x7FF8000000000ABC,
    0xFFF8000000000001,
    0x7FF0000000000001,
    1,
    0x7FEFFFFFFFFFFFFF,
]


def special(dtype) -> Tensor:
    """A 1-d tensor of ``dtype`` holding its awkward values (exact bit patterns), 11 elements."""
    if dtype is D.bfloat16:
        return Tensor._wrap(_bits(_BF16, np.uint16), D.bfloat16)
    if dtype is D.float16:
        arr = _bits(_F16, np.uint16).view(np.float16)
    elif dtype is D.float32:
        arr = _bits(_F32, np.uint32).view(np.float32)
    elif dtype is D.float64:
        arr = _bits(_F64, np.uint64).view(np.float64)
    elif dtype is D.bool_:
        arr = np.array([1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0], dtype=bool)
    elif dtype is D.uint8:
        arr = np.arange(256, dtype=np.uint8)[::23].copy()
    else:  # signed ints
        lo, hi = np.iinfo(dtype.np).min, np.iinfo(dtype.np).max
        arr = np.array([0, 1, -1, lo, hi, lo + 1, hi - 1, 7, -7, 42, -42], dtype=dtype.np)
    return gpucore.from_numpy(arr)


def tensor_bytes(t: Tensor) -> bytes:
    return np.ascontiguousarray(t._host()).tobytes()


def assert_same(a, b, path="obj"):
    """Structural identity: same types, dict key order and key types, tensors bit-exact,
    floats bit-exact (NaN payloads and -0.0 included)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, Tensor):
        assert a.dtype is b.dtype, path
        assert tuple(a.shape) == tuple(b.shape), path
        assert tensor_bytes(a) == tensor_bytes(b), path
    elif isinstance(a, dict):
        assert [(type(k), k) for k in a] == [(type(k), k) for k in b] or _nan_keys(a, b), path
        for (k, x), y in zip(a.items(), b.values()):
            assert_same(x, y, f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _nan_keys(a, b):
    ka, kb = list(a), list(b)
    return len(ka) == len(kb) and all(
        type(x) is type(y) and (x == y or (x != x and y != y)) for x, y in zip(ka, kb)
    )


def roundtrip(obj, tmp_path, **kw):
    p = tmp_path / "ckpt.safetensors"
    gpucore.save(obj, p)
    return gpucore.load(p, **kw)


ALL_DTYPES = list(D.ALL)


def sample_object():
    """A model + optimizer checkpoint touching every dtype and every kind of node."""
    w = special(D.float32).reshape(1, 11)
    return {
        "model": OrderedDict(
            [
                ("fc.weight", gpucore.randn(4, 3)),
                ("fc.bias", gpucore.zeros(4)),
                ("bn.num_batches_tracked", gpucore.tensor(7)),
                ("emb.weight", special(D.bfloat16)),
                ("half", special(D.float16)),
                ("dbl", special(D.float64)),
                ("mask", special(D.bool_)),
                ("q", special(D.int8)),
                ("u", special(D.uint8)),
                ("i", special(D.int32)),
                ("empty", gpucore.zeros(0, 3)),
                ("w", w),
            ]
        ),
        "optimizer": {
            "state": {0: {"step": 10, "exp_avg": gpucore.ones(4, 3)}, 1: {"step": 10}},
            "param_groups": [
                {
                    "lr": 1e-3,
                    "betas": (0.9, 0.999),
                    "eps": 1e-8,
                    "amsgrad": False,
                    "weight_decay": 0.0,
                    "params": [0, 1],
                    "name": None,
                }
            ],
        },
        "epoch": 3,
        "best": float("inf"),
        "loss": float("nan"),
        "tags": ("a", "ü", ""),
    }


# ------------------------------------------------------------------------------ round trips
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
def test_roundtrip_every_dtype_bit_exact(dtype, tmp_path):
    base = special(dtype)  # 11 elements
    big = gpucore.from_numpy(np.arange(60, dtype=np.int64)).to(dtype).reshape(3, 4, 5)
    obj = {
        "special": base,
        "zero_d": base[3],  # a 0-d view
        "empty": gpucore.zeros(0, dtype=dtype),
        "empty_nd": gpucore.zeros(2, 0, 3, dtype=dtype),
        "transposed": big.transpose(0, 2),  # non-contiguous
        "strided": big[:, ::2, 1::2],
        "expanded": base[:3].reshape(3, 1).expand(3, 4),  # stride 0
        "eight_dims": gpucore.zeros(1, 2, 1, 2, 1, 2, 1, 2, dtype=dtype),
    }
    assert not obj["transposed"].is_contiguous()
    out = roundtrip(obj, tmp_path)
    assert_same(obj, out)
    for k, t in out.items():
        assert t.device == "cpu" and t.is_contiguous(), k
        assert t._host().ctypes.data % 64 == 0 or t.numel() == 0, k  # aligned fresh storage
    assert out["zero_d"].shape == ()
    # loaded tensors own their storage: writing one does not touch another
    out["special"][0] = out["special"][1]
    assert tensor_bytes(out["zero_d"]) == tensor_bytes(obj["zero_d"])


def test_bytes_api_matches_file(tmp_path):
    obj = sample_object()
    p = tmp_path / "a.st"
    gpucore.save(obj, p)
    assert p.read_bytes() == to_bytes(obj)
    assert_same(obj, from_bytes(p.read_bytes()))


def test_nested_plain_values(tmp_path):
    nan_payload = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000ABC))[0]
    obj = {
        "ints": [0, 1, -1, 2**63, -(2**100), 10**300],
        "floats": [
            0.0,
            -0.0,
            0.1,
            -1.5e-300,
            5e-324,
            1.7976931348623157e308,
            math.inf,
            -math.inf,
            math.nan,
            -math.nan,
            nan_payload,
            1e16,
        ],
        "strs": ["", "plain", "ünïcödé ∑ 🚀", "\x00nul", '"quoted" \\ back', "\ud800 lone"],
        "none": None,
        "bools": [True, False],
        "tuple": (1, (2, (3, ())), [4, (5,)]),
        "empty": [[], (), {}, OrderedDict()],
        "order": {"z": 1, "a": 2, "m": 3},
        "keys": {
            0: "int",
            -5: "neg",
            2**70: "big",
            1.5: "float",
            None: "none",
            True: "bool",
            "s": "str",
            math.inf: "inf",
        },
        "od": OrderedDict([("b", 1), ("a", 2)]),
        5: "int key at top level",
    }
    out = roundtrip(obj, tmp_path)
    assert_same(obj, out)
    assert type(out["od"]) is OrderedDict and type(out["order"]) is dict
    assert list(out["keys"]) == list(obj["keys"])
    assert math.copysign(1.0, out["floats"][1]) == -1.0


@pytest.mark.parametrize(
    "obj",
    [gpucore.ones(2, 3), 5, 2.5, "s", None, True, [], (gpucore.zeros(1), gpucore.ones(1)), {}],
    ids=lambda o: type(o).__name__,
)
def test_top_level_objects(obj, tmp_path):
    assert_same(obj, roundtrip(obj, tmp_path))


def test_numpy_scalars_and_subclasses_become_python_values(tmp_path):
    from collections import defaultdict, namedtuple

    P = namedtuple("P", "x y")
    dd = defaultdict(list, {"a": [1]})
    obj = {
        "i": np.int64(3),
        "f": np.float32(0.5),
        "b": np.bool_(True),
        "p": P(1, 2),
        "dd": dd,
        "size": gpucore.zeros(2, 3).shape,
    }
    out = roundtrip(obj, tmp_path)
    assert out == {"i": 3, "f": 0.5, "b": True, "p": (1, 2), "dd": {"a": [1]}, "size": (2, 3)}
    assert type(out["i"]) is int and type(out["f"]) is float and type(out["b"]) is bool
    assert type(out["p"]) is tuple and type(out["dd"]) is dict and type(out["size"]) is tuple


def test_optimizer_state_dict_int_keys(tmp_path):
    state = {
        "state": {
            i: {
                "step": gpucore.tensor(float(i + 1)),
                "exp_avg": gpucore.randn(3, 2),
                "exp_avg_sq": gpucore.rand(3, 2),
                "max_exp_avg_sq": gpucore.rand(3, 2),
            }
            for i in (3, 0, 2)
        },
        "param_groups": [
            {"lr": 0.01, "betas": (0.9, 0.999), "params": [0, 2, 3]},
            {"lr": 0.1, "momentum": 0.9, "nesterov": True, "params": [1]},
        ],
    }
    out = roundtrip(state, tmp_path)
    assert_same(state, out)
    assert list(out["state"]) == [3, 0, 2] and all(type(k) is int for k in out["state"])


def test_shared_tensor_stored_once_and_loaded_shared(tmp_path):
    t = gpucore.randn(5)
    other_view = t[1:]  # a different tensor object over the same storage: stored separately
    out = roundtrip({"a": t, "tied": [t], "view": other_view}, tmp_path)
    assert out["a"] is out["tied"][0]
    assert tensor_bytes(out["view"]) == tensor_bytes(other_view)
    header = _header(to_bytes({"a": t, "tied": [t]}))
    assert sorted(k for k in header if k != "__metadata__") == ["a"]


def test_requires_grad_and_grad_not_saved(tmp_path):
    w = gpucore.randn(3, requires_grad=True)
    y = w * 2  # non-leaf
    y.sum().backward()
    assert w.grad is not None
    out = roundtrip({"w": w, "y": y}, tmp_path)
    for t in out.values():
        assert not t.requires_grad and t.is_leaf and t.grad is None
    assert tensor_bytes(out["w"]) == tensor_bytes(w.detach())


def test_tensor_names_follow_nesting_and_stay_unique():
    a, b, c = gpucore.ones(1), gpucore.zeros(1), gpucore.full((1,), 2.0)
    obj = {"a.b": a, "a": {"b": b}, "__metadata__": c, "l": [gpucore.ones(2)]}
    names = [k for k in _header(to_bytes(obj)) if k != "__metadata__"]
    assert "a.b" in names and "l.0" in names and len(set(names)) == 4
    assert_same(obj, from_bytes(to_bytes(obj)))


def test_header_layout_is_aligned():
    data = to_bytes(sample_object())
    n = int.from_bytes(data[:8], "little")
    assert (8 + n) % 8 == 0
    for k, v in _header(data).items():
        if k != "__metadata__":
            item = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2}.get(v["dtype"], 1)
            assert v["data_offsets"][0] % item == 0, k


# ------------------------------------------------------------------------------ save errors
class _Thing:
    pass


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"x": {1, 2}}, r"obj\['x'\] of type set"),
        ({"x": [np.zeros(2)]}, r"obj\['x'\]\[0\] of type ndarray \(convert it with"),
        ({"x": _Thing()}, "_Thing"),
        ({"x": b"bytes"}, "bytes"),
        ({"x": 1j}, "complex"),
        ({(1, 2): 0}, "dict key"),
        ({gpucore.ones(1): 0}, "dict key"),
    ],
)
def test_unsupported_objects_raise_and_write_nothing(bad, match, tmp_path):
    p = tmp_path / "ckpt"
    gpucore.save({"old": 1}, p)
    with pytest.raises(SerializationError, match=match):
        gpucore.save(bad, p)
    assert gpucore.load(p) == {"old": 1}
    assert os.listdir(tmp_path) == ["ckpt"]


def test_cycles_and_excessive_depth_raise():
    cyc = [1]
    cyc.append(cyc)
    with pytest.raises(SerializationError, match="contains itself"):
        to_bytes({"c": cyc})
    deep = x = []
    for _ in range(90):
        x.append([])
        x = x[0]
    assert from_bytes(to_bytes(deep)) == deep  # deep but within the limit
    for _ in range(20):
        x.append([])
        x = x[0]
    with pytest.raises(SerializationError, match="deeper"):
        to_bytes(deep)
    same = [1]
    assert from_bytes(to_bytes([same, same])) == [[1], [1]]  # repeated, not cyclic: fine


def test_too_long_int_raises():
    with pytest.raises(SerializationError, match="cannot save"):
        to_bytes({"x": 10**5000})


def test_path_arguments(tmp_path):
    import io

    with pytest.raises(TypeError, match="to_bytes"):
        gpucore.save({}, io.BytesIO())
    with pytest.raises(TypeError, match="from_bytes"):
        gpucore.load(io.BytesIO(to_bytes({})))
    p = os.fsencode(tmp_path / "bytes_path")
    gpucore.save({"a": 1}, p)
    assert gpucore.load(p) == {"a": 1}
    assert gpucore.load(str(tmp_path / "bytes_path")) == {"a": 1}


# ------------------------------------------------------------------------------ devices
def test_map_location_arguments(tmp_path):
    p = tmp_path / "m"
    gpucore.save({"t": gpucore.ones(2)}, p)
    assert gpucore.load(p, map_location="cpu")["t"].device == "cpu"
    assert gpucore.load(p, map_location=gpucore.device("cpu"))["t"].device == "cpu"
    with pytest.raises(gpucore.DeviceError):
        gpucore.load(p, map_location="cuda")
    with pytest.raises(TypeError):
        gpucore.load(p, map_location={"cuda": "cpu"})


def test_vulkan_save_and_load(vulkan, tmp_path):
    cpu = {d.name: special(d) for d in ALL_DTYPES}
    cpu["matrix"] = gpucore.randn(6, 5)
    on_dev = {k: t.to("vulkan") for k, t in cpu.items()}
    on_dev["view"] = on_dev["matrix"].t()  # a non-contiguous device view
    cpu["view"] = cpu["matrix"].t()
    assert all(t.device == "vulkan" for t in on_dev.values())
    p = tmp_path / "dev"
    gpucore.save(on_dev, p)
    back = gpucore.load(p)
    assert all(t.device == "cpu" for t in back.values())
    assert_same(cpu, back)
    dev = gpucore.load(p, map_location="vulkan")
    assert all(t.device == "vulkan" for t in dev.values())
    assert_same(cpu, {k: t.to("cpu") for k, t in dev.items()})
    assert p.read_bytes() == to_bytes(cpu)  # the file does not depend on where tensors lived


# ------------------------------------------------------------------------------ interop
def _header(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])


def test_safetensors_numpy_reads_our_files(tmp_path):
    stn = pytest.importorskip("safetensors.numpy")
    obj = sample_object()
    del obj["model"]["emb.weight"]  # safetensors.numpy has no bfloat16
    p = tmp_path / "w.safetensors"
    gpucore.save(obj, p)
    arrays = stn.load_file(str(p))
    assert set(arrays) == {f"model.{k}" for k in obj["model"]} | {"optimizer.state.0.exp_avg"}
    for k, t in obj["model"].items():
        a = arrays[f"model.{k}"]
        assert a.shape == tuple(t.shape) and a.dtype == t.dtype.np, k
        assert a.tobytes() == tensor_bytes(t), k


def test_safetensors_torch_reads_our_files(tmp_path):
    pytest.importorskip("safetensors")
    torch = pytest.importorskip("torch")
    from safetensors import safe_open
    from safetensors.torch import load_file

    sd = OrderedDict((d.name, special(d)) for d in ALL_DTYPES)
    sd["weight"] = gpucore.randn(3, 4).t()
    p = tmp_path / "model.safetensors"
    gpucore.save(sd, p)
    loaded = load_file(str(p))
    assert list(loaded) and set(loaded) == set(sd)
    for k, t in sd.items():
        tt = loaded[k]
        assert tuple(tt.shape) == tuple(t.shape), k
        raw = tt.contiguous().view(torch.uint8).numpy().tobytes() if tt.numel() else b""
        assert raw == tensor_bytes(t), k
    assert loaded["bfloat16"].dtype == torch.bfloat16
    with safe_open(str(p), framework="pt") as f:
        meta = f.metadata()
    assert meta["format"] == "pt" and meta["gpucore.version"] == "1"


def test_load_files_written_by_safetensors(tmp_path):
    stn = pytest.importorskip("safetensors.numpy")
    arrays = {
        "b": np.arange(6, dtype=np.float32).reshape(2, 3),
        "a": np.array([1, -2], np.int8),
        "e": np.zeros((0, 4), np.float64),
        "flag": np.array(True),
    }
    p = tmp_path / "np.safetensors"
    stn.save_file(arrays, str(p), metadata={"note": "hi"})
    out = gpucore.load(p)
    assert set(out) == set(arrays)
    for k, a in arrays.items():
        assert out[k].numpy().tobytes() == a.tobytes() and out[k].shape == a.shape, k
    assert from_bytes(stn.save(arrays))["b"].tolist() == arrays["b"].tolist()
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        return
    tp = tmp_path / "pt.safetensors"
    bf = torch.tensor([1.5, -0.0, float("nan")], dtype=torch.bfloat16)
    save_file({"w": bf, "h": torch.ones(2, dtype=torch.float16)}, str(tp))
    out = gpucore.load(tp)
    assert out["w"].dtype is gpucore.bfloat16
    assert out["w"]._host().tobytes() == bf.view(torch.int16).numpy().tobytes()


# ------------------------------------------------------------------------------ hostile files
def raw_file(header, data: bytes = b"", length=None) -> bytes:
    hb = header if isinstance(header, bytes) else json.dumps(header).encode()
    return (len(hb) if length is None else length).to_bytes(8, "little") + hb + data


def gc_file(structure, tensors: dict | None = None, data: bytes = b"", **meta) -> bytes:
    """A gpucore file with a hand-written structure node and a valid digest."""
    tensors = tensors or {}
    metadata = {
        "gpucore.version": "1",
        "gpucore.structure": structure if isinstance(structure, str) else json.dumps(structure),
    }
    metadata.update(meta)
    entries = [
        fmt.Entry(k, fmt.FROM_ST[v["dtype"]], tuple(v["shape"]), *v["data_offsets"])
        for k, v in tensors.items()
    ]
    metadata[fmt.DIGEST_KEY] = fmt.digest(metadata, entries)
    return raw_file({"__metadata__": metadata, **tensors}, data)


T4 = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}


def _t(dtype="F32", shape=(1,), offs=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offs)}


HOSTILE = [
    (b"", "truncated"),
    (b"\x01\x00\x00", "truncated"),
    ((2**64 - 1).to_bytes(8, "little") + b"{}", "exceeds"),
    ((100_000_001).to_bytes(8, "little") + b"{}", "exceeds"),
    ((50).to_bytes(8, "little") + b"{}", "runs past the end of the file"),
    (raw_file(b""), "does not start with"),
    (raw_file(b"[]"), "does not start with"),
    (raw_file(b"{\xff}"), "UTF-8"),
    (raw_file(b"{"), "not valid JSON"),
    (raw_file(b'{"a": NaN}'), "not valid JSON"),
    (raw_file(b'{"a": 1} trailing'), "not valid JSON"),
    (raw_file(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"), "not valid JSON"),
    (raw_file(b'{"a": ' + b"9" * 5000 + b"}"), "not valid JSON"),
    (raw_file(b'{"t": {}, "t": {}}'), "more than once"),
    (raw_file({"t": 5}), "not an object"),
    (raw_file({"t": {"dtype": "F32", "shape": [1]}}), "missing"),
    (raw_file({"t": dict(T4, extra=1)}, b"\0" * 4), "unexpected"),
    (raw_file({"t": _t("F128")}, b"\0" * 4), "unknown dtype"),
    (raw_file({"t": _t(7)}, b"\0" * 4), "dtype must be a string"),
    (raw_file({"t": _t("U16", (2,))}, b"\0" * 4), "no gpucore equivalent"),
    (raw_file({"t": _t(shape=(-1,))}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": _t(shape=(1.0,))}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": _t(shape=(True,))}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": dict(T4, shape="1")}, b"\0" * 4), "non-negative ints"),
    (raw_file({"t": _t(shape=(1,) * 9)}, b"\0" * 4), "at most 8"),
    (raw_file({"t": _t(shape=(0, 2**62, 2**62), offs=(0, 0))}), "too large"),
    (raw_file({"t": _t(shape=(2**70,), offs=(0, 2**72))}), "too large"),
    (raw_file({"t": dict(T4, data_offsets=[0])}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": dict(T4, data_offsets=[0, 4, 8])}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": dict(T4, data_offsets=[0.0, 4])}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": dict(T4, data_offsets={"0": 4})}, b"\0" * 4), "pair of ints"),
    (raw_file({"t": _t(offs=(-4, 0))}, b"\0" * 4), "0 <= begin <= end"),
    (raw_file({"t": _t(shape=(0,), offs=(4, 0))}, b"\0" * 4), "0 <= begin <= end"),
    (raw_file({"t": _t(shape=(3,), offs=(0, 4))}, b"\0" * 4), "needs 12"),
    (raw_file({"t": T4}, b"\0" * 3), "run past the end of the data"),
    (raw_file({"t": _t(offs=(2**63, 2**63 + 4))}, b"\0" * 4), "run past the end of the data"),
    (raw_file({"t": T4, "u": _t(offs=(2, 6))}, b"\0" * 6), "overlaps"),
    (raw_file({"t": T4, "u": T4}, b"\0" * 4), "overlaps"),
    (raw_file({"t": _t(offs=(4, 8))}, b"\0" * 8), "unused bytes before"),
    (raw_file({"t": T4}, b"\0" * 5), "unused bytes after"),
    (raw_file({}, b"\0"), "unused bytes after"),
    (raw_file({"__metadata__": []}), "__metadata__"),
    (raw_file({"__metadata__": {"k": 1}}), "__metadata__"),
    (raw_file({"__metadata__": {"gpucore.version": "1"}}), "lacks"),
    (gc_file({"tensor": "nope"}), "which the file lacks"),
    (gc_file(None, {"t": T4}, b"\0" * 4), "not referenced"),
    (gc_file({"what": 1}), "unknown node"),
    (gc_file({"tuple": 1}), "tuple node"),
    (gc_file({"dict": [[1, 2, 3]]}), "pair"),
    (gc_file({"dict": [[[1], 2]]}), "not a plain value"),
    (gc_file({"dict": [[1, 2], [1, 3]]}), "appears twice"),
    (gc_file({"float": "0x3ff0000000000000"}), "non-finite float"),
    (gc_file({"float": "0x7ff8000000000zzz"}), "non-finite float"),
    (gc_file({"a": 1, "b": 2}), "unexpected node"),
    (gc_file("[1e999]"), "out of range"),
    (gc_file("[" * 150 + "]" * 150), "deeper"),
    (gc_file("[" * 100_000 + "]" * 100_000), "not valid JSON"),
    (gc_file("{"), "not valid JSON"),
    (gc_file(1, **{"gpucore.version": "2"}), "format version"),
]


@pytest.mark.parametrize("data, match", HOSTILE, ids=[m for _, m in HOSTILE])
def test_hostile_files_raise_serialization_error(data, match, tmp_path):
    with pytest.raises(SerializationError, match=match):
        from_bytes(data)
    p = tmp_path / "hostile.safetensors"
    p.write_bytes(data)
    with pytest.raises(SerializationError, match=match) as ei:
        gpucore.load(p)
    assert str(p) in str(ei.value)  # names the file
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, GpucoreError)


def test_bool_bytes_normalised_and_null_metadata_accepted():
    data = raw_file({"__metadata__": None, "m": _t("BOOL", (3,), (0, 3))}, b"\x00\x02\xff")
    out = from_bytes(data)["m"]
    assert out.tolist() == [False, True, True]
    assert out._host().view(np.uint8).tolist() == [0, 1, 1]


def test_load_from_a_deep_stack_never_leaks_recursion_error():
    data = to_bytes(functools.reduce(lambda acc, _: [acc], range(95), [gpucore.ones(1)]))

    def deep(n):
        if n:
            return deep(n - 1)
        try:
            from_bytes(data)
        except SerializationError:
            pass

    for n in (0, 300, 600, 800, 900):
        deep(n)


def test_digest_detects_header_edits():
    data = to_bytes({"t": gpucore.ones(2)})
    hb = data[8 : 8 + int.from_bytes(data[:8], "little")]
    edited = hb.replace(b'"F32"', b'"I32"')
    assert edited != hb
    with pytest.raises(SerializationError, match="checksum"):
        from_bytes(data[:8] + edited + data[8 + len(hb) :])


def test_huge_claims_allocate_nothing():
    import tracemalloc

    tracemalloc.start()
    for data in [
        (2**63).to_bytes(8, "little"),
        (99_999_999).to_bytes(8, "little") + b"{}",
        raw_file({"t": _t(shape=(2**20, 2**20), offs=(0, 2**42))}),
    ]:
        with pytest.raises(SerializationError):
            from_bytes(data)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 << 20


def test_non_regular_paths(tmp_path):
    with pytest.raises(FileNotFoundError):
        gpucore.load(tmp_path / "missing")
    with pytest.raises(SerializationError, match="not a regular file"):
        gpucore.load(tmp_path)
    if hasattr(os, "mkfifo"):  # opening a FIFO for reading would block forever
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)
        with pytest.raises(SerializationError, match="not a regular file"):
            gpucore.load(fifo)
    if os.path.exists("/dev/zero"):
        with pytest.raises(SerializationError, match="not a regular file"):
            gpucore.load("/dev/zero")


# ------------------------------------------------------------------------------ corruption
SAMPLE = to_bytes(sample_object())
SAMPLE_HEADER_END = 8 + int.from_bytes(SAMPLE[:8], "little")


def check_corrupted(data: bytes):
    """Loading corrupted bytes: SerializationError, or (a change in tensor data only, or one the
    header's meaning ignores, like padding whitespace) a load whose header matches the original."""
    diff = [i for i, (x, y) in enumerate(zip(data, SAMPLE)) if x != y]
    first_changed = diff[0] if diff else len(SAMPLE)
    try:
        out = from_bytes(data)
    except SerializationError:
        return
    again = to_bytes(out)
    if first_changed < SAMPLE_HEADER_END:
        assert again == SAMPLE, "a header change loaded as something else"
    else:
        assert again[:SAMPLE_HEADER_END] == SAMPLE[:SAMPLE_HEADER_END]


def test_truncation_at_every_byte(tmp_path):
    for cut in range(len(SAMPLE)):
        with pytest.raises(SerializationError):
            from_bytes(SAMPLE[:cut])
    hdr = _header(SAMPLE)
    bounds = {0, 4, 7, 8, 9, SAMPLE_HEADER_END - 1, SAMPLE_HEADER_END}
    for v in hdr.values():
        if "data_offsets" in v:
            bounds.update(SAMPLE_HEADER_END + o for o in v["data_offsets"])
    bounds.discard(len(SAMPLE))
    p = tmp_path / "cut.safetensors"
    for cut in sorted(bounds):
        p.write_bytes(SAMPLE[:cut])
        with pytest.raises(SerializationError, match="cut.safetensors"):
            gpucore.load(p)
    with pytest.raises(SerializationError, match="unused bytes after"):
        from_bytes(SAMPLE + b"\0")


def test_every_byte_flipped_once():
    rng = np.random.default_rng(0)
    masks = rng.integers(1, 256, len(SAMPLE))
    for pos, m in enumerate(masks):
        b = bytearray(SAMPLE)
        b[pos] ^= int(m)
        check_corrupted(bytes(b))


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, len(SAMPLE) - 1), st.integers(1, 255)), min_size=1, max_size=8
    )
)
def test_random_byte_flips(flips):
    b = bytearray(SAMPLE)
    for pos, m in flips:
        b[pos] ^= m
    check_corrupted(bytes(b))


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["F32", "BF16", "BOOL", "U16", "t", "inf", "nan"]),
)
_json = st.recursive(
    _json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(
            st.sampled_from(
                ["tensor", "tuple", "dict", "odict", "float", "dtype", "shape", "data_offsets", "x"]
            ),
            kids,
            max_size=3,
        ),
    ),
    max_leaves=20,
)
_int = st.one_of(st.integers(-3, 40), st.integers(-(2**64), 2**66), st.sampled_from([2**63 - 1]))
_entry = st.fixed_dictionaries(
    {
        "dtype": st.one_of(
            st.sampled_from(
                ["F32", "F64", "F16", "BF16", "I8", "U8", "I32", "I64", "BOOL", "U16", "XX", ""]
            ),
            _json_leaf,
        ),
        "shape": st.one_of(st.lists(_int, max_size=9), _json),
        "data_offsets": st.one_of(st.lists(_int, min_size=2, max_size=2), _json),
    }
)


@FUZZ
@given(
    entries=st.dictionaries(st.text(max_size=4), st.one_of(_entry, _json), max_size=4),
    meta=st.one_of(st.none(), _json, st.dictionaries(st.text(max_size=4), st.text(max_size=4))),
    data_len=st.integers(0, 80),
    length=st.one_of(st.none(), st.integers(0, 2**64 - 1)),
)
def test_hostile_headers_fuzz(entries, meta, data_len, length):
    header = dict(entries)
    if meta is not None:
        header["__metadata__"] = meta
    data = raw_file(header, bytes(range(data_len)), length)
    try:
        out = from_bytes(data)
    except SerializationError:
        return
    assert isinstance(out, dict)  # a valid foreign safetensors file: a flat dict of tensors
    assert all(isinstance(t, Tensor) for t in out.values())


@FUZZ
@given(structure=_json, with_tensor=st.booleans())
def test_hostile_structure_fuzz(structure, with_tensor):
    tensors = {"t": T4} if with_tensor else {}
    data = gc_file(structure, tensors, b"\0\0\x80\x3f" if with_tensor else b"")
    try:
        from_bytes(data)
    except SerializationError:
        pass


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes(blob):
    for data in (blob, len(blob[8:]).to_bytes(8, "little") + blob[8:]):
        try:
            from_bytes(data)
        except SerializationError:
            pass


# ------------------------------------------------------------------------------ atomic writes
OLD = {"weights": gpucore.arange(10).float(), "epoch": 1}
NEW = {"weights": gpucore.ones(10), "more": gpucore.zeros(1000), "epoch": 2}


@pytest.fixture
def old_file(tmp_path):
    p = tmp_path / "ckpt.safetensors"
    gpucore.save(OLD, p)
    return p


def _assert_old_intact(p):
    assert_same(gpucore.load(p), OLD)
    assert os.listdir(p.parent) == [p.name], "temporary file left behind"


@pytest.mark.parametrize("exc", [OSError("disk full"), KeyboardInterrupt()])
def test_exception_mid_write_keeps_old_file(old_file, monkeypatch, exc):
    calls = []
    real = fmt._payload

    def failing(t):
        calls.append(t)
        if len(calls) == 2:  # the header and the first tensor are already written
            raise exc
        return real(t)

    monkeypatch.setattr(fmt, "_payload", failing)
    with pytest.raises(type(exc)):
        gpucore.save(NEW, old_file)
    assert len(calls) == 2
    monkeypatch.undo()
    _assert_old_intact(old_file)


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_failing_fsync_or_rename_keeps_old_file(old_file, monkeypatch, where):
    def boom(*a):
        raise OSError(f"injected {where} failure")

    monkeypatch.setattr(os, where, boom)
    with pytest.raises(OSError, match="injected"):
        gpucore.save(NEW, old_file)
    monkeypatch.undo()
    _assert_old_intact(old_file)


def test_hard_crash_mid_write_keeps_old_file(old_file):
    script = textwrap.dedent(
        f"""
        import os, gpucore
        from gpucore.io import safetensors_format as fmt
        real, n = fmt._payload, []
        def crash(t):
            n.append(1)
            if len(n) == 2:
                os._exit(17)
            return real(t)
        fmt._payload = crash
        gpucore.save({{"w": gpucore.ones(100), "v": gpucore.ones(100)}}, {str(old_file)!r})
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert r.returncode == 17, r.stderr.decode()
    assert_same(gpucore.load(old_file), OLD)
    leftovers = [f for f in os.listdir(old_file.parent) if f != old_file.name]
    assert all(f.startswith(".ckpt.safetensors.") and f.endswith(".tmp") for f in leftovers)


def test_successful_overwrite_keeps_mode_and_follows_symlinks(old_file):
    os.chmod(old_file, 0o640)
    gpucore.save(NEW, old_file)
    assert_same(gpucore.load(old_file), NEW)
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(old_file).st_mode) == 0o640
    link = old_file.parent / "latest"
    try:
        os.symlink(old_file.name, link)
    except (OSError, NotImplementedError):
        return
    gpucore.save(OLD, link)
    assert os.path.islink(link)
    assert_same(gpucore.load(old_file), OLD)
    assert sorted(os.listdir(old_file.parent)) == sorted([old_file.name, "latest"])


def test_save_into_missing_folder_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        gpucore.save(OLD, tmp_path / "no" / "such.safetensors")
