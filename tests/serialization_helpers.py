"""Helpers for the gpucore.save / gpucore.load tests (tests/io; import serialization_helpers):
tensors holding each dtype's awkward bit patterns, a structural bit-exact comparison, a file round
trip, a checkpoint touching every dtype and node kind, and a file's parsed JSON header."""

from __future__ import annotations

import json
import struct
from collections import OrderedDict

import numpy as np

import gpucore
from gpucore import dtypes as D
from gpucore.tensor import Tensor


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
    elif not dtype.is_signed:  # uint16, uint32, uint64: 0, 1, max, max - 1, ...
        hi = int(np.iinfo(dtype.np).max)
        arr = np.array([0, 1, hi, hi - 1, hi // 2, hi // 2 + 1, 7, 42, 255, 256, 65535], dtype.np)
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


def read_header(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n])
