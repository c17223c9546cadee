"""Interop with the safetensors package: safetensors.numpy and safetensors.torch read the files
gpucore.save writes (tensors named after the nesting, bytes identical), and gpucore.load reads the
files they write (bfloat16 included). Skipped where the packages are missing."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from serialization_helpers import ALL_DTYPES, sample_object, special, tensor_bytes

import gpucore
from gpucore.io import from_bytes


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
