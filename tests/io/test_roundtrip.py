"""gpucore.save / gpucore.load round trips: every dtype bit-exact (views, 0-d, empty, strided),
nested plain values and containers, optimizer state dicts, shared tensors, tensor names and the
aligned layout; what cannot be saved (SerializationError, nothing written); path arguments; and
map_location and Vulkan tensors."""

from __future__ import annotations

import math
import os
import struct
from collections import OrderedDict

import numpy as np
import pytest
from serialization_helpers import (
    ALL_DTYPES,
    assert_same,
    read_header,
    roundtrip,
    sample_object,
    special,
    tensor_bytes,
)

import gpucore
from gpucore.errors import SerializationError
from gpucore.io import from_bytes, to_bytes


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
    header = read_header(to_bytes({"a": t, "tied": [t]}))
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
    names = [k for k in read_header(to_bytes(obj)) if k != "__metadata__"]
    assert "a.b" in names and "l.0" in names and len(set(names)) == 4
    assert_same(obj, from_bytes(to_bytes(obj)))


def test_header_layout_is_aligned():
    data = to_bytes(sample_object())
    n = int.from_bytes(data[:8], "little")
    assert (8 + n) % 8 == 0
    for k, v in read_header(data).items():
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
    # save(weights_only=True) refuses what the safe format cannot hold (by default such objects
    # are pickled instead: tests/io/test_pickle_format.py)
    p = tmp_path / "ckpt"
    gpucore.save({"old": 1}, p)
    with pytest.raises(SerializationError, match=match):
        gpucore.save(bad, p, weights_only=True)
    with pytest.raises(SerializationError, match=match):
        to_bytes(bad)
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
    with pytest.raises(TypeError, match="file path"):
        gpucore.save({}, 3)
    with pytest.raises(TypeError, match="file path"):
        gpucore.load(3)
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
        gpucore.load(p, map_location=3)
    assert gpucore.load(p, map_location={"cuda:0": "cpu"})["t"].device == "cpu"


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
