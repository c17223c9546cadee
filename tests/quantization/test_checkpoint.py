"""Quantized tensors in gpucore.save / gpucore.load (the "qtensor" structure node of
gpucore/io/structure.py, rebuilt by gpucore/quantization/checkpoint.py's from_checkpoint): exact
round trips of every dtype and scheme, a quarter of the float32 size, other safetensors readers,
and corrupt or tampered files refused like float ones."""

from __future__ import annotations

import json

import numpy as np
import pytest

import gpucore as gc
from gpucore.errors import SerializationError
from gpucore.io import from_bytes, to_bytes
from gpucore.io import safetensors_format as fmt


def _qtensors():
    x = gc.from_numpy((np.random.default_rng(0).standard_normal((6, 5)) * 2).astype(np.float32))
    return [
        gc.quantize_per_tensor(x, 0.02, 3, gc.qint8),
        gc.quantize_per_tensor(x, 0.05, 128, gc.quint8),
        gc.quantize_per_tensor(x, 1e-4, -7, gc.qint32),
        gc.quantize_per_channel(x, gc.rand(5) + 0.01, gc.arange(5) - 2, 1, gc.qint8),
        gc.quantize_per_channel(x, gc.rand(6) + 0.01, gc.arange(6) + 100, 0, gc.quint8),
    ]


def _same(a, b):
    assert type(a) is type(b) and a.dtype is b.dtype and a.qscheme() is b.qscheme()
    np.testing.assert_array_equal(a.int_repr().numpy(), b.int_repr().numpy())
    np.testing.assert_array_equal(a.dequantize().numpy(), b.dequantize().numpy())
    if a.qscheme() is gc.per_tensor_affine:
        assert (a.q_scale(), a.q_zero_point()) == (b.q_scale(), b.q_zero_point())
    else:
        assert a.q_per_channel_axis() == b.q_per_channel_axis()
        np.testing.assert_array_equal(
            a.q_per_channel_scales().numpy(), b.q_per_channel_scales().numpy()
        )


def test_every_kind_round_trips_exactly(tmp_path):
    qs = _qtensors()
    obj = {"list": qs, "again": qs[0], "plain": gc.ones(2), "n": 3}
    gc.save(obj, tmp_path / "q.gcs")
    back = gc.load(tmp_path / "q.gcs")
    for a, b in zip(qs, back["list"]):
        _same(a, b)
    assert back["again"] is back["list"][0]  # one object saved twice loads as one
    assert back["n"] == 3 and back["plain"].tolist() == [1.0, 1.0]
    _same(qs[3], from_bytes(to_bytes(qs[3])))  # a bare quantized tensor too


def test_int8_files_are_a_quarter_of_float32(tmp_path):
    x = gc.randn(512, 512)
    q = gc.quantize_per_channel(x, gc.rand(512) + 0.01, gc.zeros(512, dtype=gc.int64), 0, gc.qint8)
    gc.save({"w": x}, tmp_path / "f.gcs")
    gc.save({"w": q}, tmp_path / "q.gcs")
    ratio = (tmp_path / "f.gcs").stat().st_size / (tmp_path / "q.gcs").stat().st_size
    assert 3.8 < ratio < 4.0


def test_other_safetensors_readers_see_the_integers_and_parameters(tmp_path):
    safetensors = pytest.importorskip("safetensors.numpy")
    q = _qtensors()[3]
    gc.save({"fc.weight": q}, tmp_path / "q.gcs")
    flat = safetensors.load_file(str(tmp_path / "q.gcs"))
    assert set(flat) == {"fc.weight", "fc.weight.scales", "fc.weight.zero_points"}
    assert flat["fc.weight"].dtype == np.int8
    np.testing.assert_array_equal(flat["fc.weight"], q.int_repr().numpy())


def _split(data: bytes):
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _join(header: dict, body: bytes, fix_digest: bool = True) -> bytes:
    meta = header["__metadata__"]
    if fix_digest:  # a file written that way, not a corrupted one
        entries = [
            fmt.Entry(k, fmt.FROM_ST[v["dtype"]], tuple(v["shape"]), *v["data_offsets"])
            for k, v in header.items()
            if k != "__metadata__"
        ]
        meta[fmt.DIGEST_KEY] = fmt.digest(meta, entries)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + body


def test_a_flipped_bit_in_the_integers_is_refused():
    data = to_bytes({"q": _qtensors()[0]})
    header, body = _split(data)
    start = len(data) - len(body) + header["q"]["data_offsets"][0]
    b = bytearray(data)
    b[start + 3] ^= 0x10
    with pytest.raises(SerializationError, match="checksum"):
        from_bytes(bytes(b))


def _edit_node(data: bytes, edit, fix_digest=True) -> bytes:
    header, body = _split(data)
    meta = header["__metadata__"]
    structure = json.loads(meta["gpucore.structure"])
    node = structure["dict"][0][1]["qtensor"]
    edit(node)
    meta["gpucore.structure"] = json.dumps(structure, separators=(",", ":"))
    return _join(header, body, fix_digest)


def test_an_edited_scale_breaks_the_header_checksum():
    data = to_bytes({"q": _qtensors()[0]})
    with pytest.raises(SerializationError, match="header checksum"):
        from_bytes(_edit_node(data, lambda n: n.update(scale=0.5), fix_digest=False))


@pytest.mark.parametrize(
    "index,edit,match",
    [
        (0, lambda n: n.update(scale=-1.0), "positive"),
        (0, lambda n: n.update(scale="x"), "not a number"),
        (0, lambda n: n.update(zero_point=500), "range"),
        (0, lambda n: n.update(dtype="quint8"), "uint8 integers"),
        (0, lambda n: n.update(dtype="float32"), "none of"),
        (0, lambda n: n.update(qscheme="per_tensor_symmetric"), "no known qscheme"),
        (0, lambda n: n.update(qscheme=["per_tensor_affine"]), "no known qscheme"),
        (0, lambda n: n.update(dtype=["qint8"]), "none of"),
        (0, lambda n: n.pop("zero_point"), "fields"),
        (0, lambda n: n.update(int_repr="q"), "must reference a tensor"),
        (0, lambda n: n.update(int_repr={"tensor": "missing"}), "lacks"),
        (3, lambda n: n.update(axis=0), "one entry per channel"),
        (3, lambda n: n.update(axis=7), "axis 7"),
        (3, lambda n: n.update(axis=True), "not a number"),
        (3, lambda n: n.update(scales=n["zero_points"]), "not referenced"),
    ],
)
def test_consistent_but_wrong_structures_are_refused(index, edit, match):
    data = to_bytes({"q": _qtensors()[index]})
    with pytest.raises(SerializationError, match=match):
        from_bytes(_edit_node(data, edit))


def test_quantized_tensors_load_on_the_cpu_with_map_location_vulkan(vulkan, tmp_path):
    q = _qtensors()[3]
    gc.save({"q": q, "x": gc.ones(2)}, tmp_path / "q.gcs")
    back = gc.load(tmp_path / "q.gcs", map_location="vulkan")
    assert back["x"].is_vulkan and not back["q"].int_repr().is_vulkan
    _same(back["q"], q)
