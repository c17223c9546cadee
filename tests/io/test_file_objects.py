"""gpucore.save / gpucore.load as PyTorch users call them (gpucore/io/files.py and load's
arguments): open binary file objects (BytesIO, real files, unseekable streams, data starting
mid-file), text-mode files refused, ``weights_only`` and ``map_location`` in every form
(device, dict, callable), compared with torch where it is installed."""

from __future__ import annotations

import io
import os

import pytest
from serialization_helpers import assert_same, sample_object

import gpucore
from gpucore.errors import SerializationError
from gpucore.io import to_bytes


class _Stream(io.RawIOBase):
    """A binary stream that cannot seek (a pipe or socket)."""

    def __init__(self, data: bytes = b""):
        self.data, self.pos, self.out = data, 0, bytearray()

    def readable(self):
        return True

    def writable(self):
        return True

    def seekable(self):
        return False

    def readinto(self, b):
        n = min(len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n

    def write(self, b):
        self.out += bytes(b)
        return len(b)


def test_bytesio_round_trip_matches_the_path_file(tmp_path):
    obj = sample_object()
    buf = io.BytesIO()
    gpucore.save(obj, buf)
    p = tmp_path / "ckpt.pt"
    gpucore.save(obj, p)
    assert buf.getvalue() == p.read_bytes() == to_bytes(obj)
    buf.seek(0)
    assert_same(obj, gpucore.load(buf))


def test_real_open_files(tmp_path):
    obj = {"w": gpucore.randn(3, 4), "step": 5}
    p = tmp_path / "model.pt"
    with open(p, "wb") as f:
        gpucore.save(obj, f)
    with open(p, "rb") as f:
        back = gpucore.load(f)
    assert_same(obj, back)
    assert gpucore.load(str(p))["step"] == 5  # and by path


def test_data_from_the_middle_of_a_file():
    obj = {"a": gpucore.arange(5.0)}
    buf = io.BytesIO()
    buf.write(b"some prefix")
    gpucore.save(obj, buf)
    buf.seek(len(b"some prefix"))
    assert_same(obj, gpucore.load(buf))


def test_unseekable_streams():
    obj = {"a": gpucore.ones(2, 2), "b": [1, 2.5, None]}
    out = _Stream()
    gpucore.save(obj, out)
    assert bytes(out.out) == to_bytes(obj)
    assert_same(obj, gpucore.load(_Stream(bytes(out.out))))
    # the pickle format too (a whole module)
    m = gpucore.nn.Linear(2, 3)
    out = _Stream()
    gpucore.save(m, out)
    back = gpucore.load(_Stream(bytes(out.out)), weights_only=False)
    assert_same(m.state_dict(), back.state_dict())


def test_text_mode_files_are_refused(tmp_path):
    with open(tmp_path / "t.txt", "w") as f, pytest.raises(TypeError, match="'wb'"):
        gpucore.save({}, f)
    (tmp_path / "t.txt").write_bytes(to_bytes({}))
    with open(tmp_path / "t.txt") as f, pytest.raises(TypeError, match="'rb'"):
        gpucore.load(f)


def test_truncated_file_object_names_the_problem():
    data = to_bytes({"w": gpucore.ones(100)})
    with pytest.raises(SerializationError, match="BytesIO"):
        gpucore.load(io.BytesIO(data[:-10]))


@pytest.mark.parametrize("value", [1, "yes", 0.5])
def test_weights_only_must_be_a_bool(value):
    with pytest.raises(TypeError, match="weights_only"):
        gpucore.load(io.BytesIO(to_bytes({})), weights_only=value)
    with pytest.raises(TypeError, match="weights_only"):
        gpucore.save({}, io.BytesIO(), weights_only=value)


def test_weights_only_none_means_true_and_pickle_module_needs_false():
    data = to_bytes({"a": 1})
    assert gpucore.load(io.BytesIO(data), weights_only=None) == {"a": 1}
    import pickle

    with pytest.raises(TypeError, match="weights_only=False"):
        gpucore.load(io.BytesIO(data), pickle_module=pickle)
    assert gpucore.load(io.BytesIO(data), pickle_module=pickle, weights_only=False) == {"a": 1}


def test_pytorch_keyword_arguments_are_accepted():
    buf = io.BytesIO()
    gpucore.save({"a": 1}, buf, _use_new_zipfile_serialization=True, pickle_protocol=2)
    buf.seek(0)
    assert gpucore.load(buf, map_location="cpu", mmap=False, weights_only=True) == {"a": 1}


# ------------------------------------------------------------------------------ map_location
def test_map_location_forms():
    data = to_bytes({"t": gpucore.ones(2), "n": 3})
    for loc in (None, "cpu", gpucore.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}):
        out = gpucore.load(io.BytesIO(data), map_location=loc)
        assert out["t"].device == "cpu" and out["n"] == 3, loc
    seen = []

    def fn(t, location):
        seen.append((tuple(t.shape), location))
        return t * 2

    out = gpucore.load(io.BytesIO(data), map_location=fn)
    assert seen == [((2,), "cpu")] and out["t"].tolist() == [2.0, 2.0]
    out = gpucore.load(io.BytesIO(data), map_location=lambda storage, loc: storage)
    assert out["t"].tolist() == [1.0, 1.0]  # PyTorch's idiom for "keep on the CPU"
    out = gpucore.load(io.BytesIO(data), map_location=lambda storage, loc: None)
    assert out["t"].tolist() == [1.0, 1.0]  # None: keep the tensor


def test_map_location_errors():
    data = to_bytes({"t": gpucore.ones(2)})
    with pytest.raises(gpucore.DeviceError, match="vulkan"):
        gpucore.load(io.BytesIO(data), map_location="cuda:0")
    with pytest.raises(gpucore.DeviceError):
        gpucore.load(io.BytesIO(data), map_location={"cpu": "cuda"})
    with pytest.raises(TypeError, match="keys"):
        gpucore.load(io.BytesIO(data), map_location={0: "cpu"})
    with pytest.raises(TypeError, match="Tensor or None"):
        gpucore.load(io.BytesIO(data), map_location=lambda s, loc: "cpu")
    with pytest.raises(gpucore.DeviceError):  # PyTorch scripts' storage.cuda(): the clear error
        gpucore.load(io.BytesIO(data), map_location=lambda s, loc: s.cuda())


def test_map_location_vulkan_forms(vulkan, tmp_path):
    p = tmp_path / "m.pt"
    gpucore.save({"t": gpucore.ones(2), "m": gpucore.nn.Linear(2, 2)}, p)  # a pickle file
    gpucore.save({"t": gpucore.ones(2)}, tmp_path / "s.pt")
    for loc in ("vulkan", gpucore.device("vulkan"), {"cpu": "vulkan"}):
        assert gpucore.load(tmp_path / "s.pt", map_location=loc)["t"].is_vulkan
        out = gpucore.load(p, map_location=loc, weights_only=False)
        assert out["t"].is_vulkan and out["m"].weight.is_vulkan, loc
        assert isinstance(out["m"].weight, gpucore.nn.Parameter)


def test_same_calls_as_torch(tmp_path):
    torch = pytest.importorskip("torch")
    # the same script, run with both libraries: a state dict through a BytesIO and a file
    for lib in (torch, gpucore):
        lin = lib.nn.Linear(3, 2)
        buf = io.BytesIO()
        lib.save(lin.state_dict(), buf)
        buf.seek(0)
        sd = lib.load(buf, map_location="cpu", weights_only=True)
        assert list(sd) == ["weight", "bias"]
        with open(tmp_path / f"{lib.__name__}.pt", "wb") as f:
            lib.save({"epoch": 2, "model": sd}, f)
        with open(tmp_path / f"{lib.__name__}.pt", "rb") as f:
            ck = lib.load(f, map_location=lambda storage, loc: storage)
        assert ck["epoch"] == 2 and not ck["model"]["weight"].requires_grad
        lin2 = lib.nn.Linear(3, 2)
        lin2.load_state_dict(ck["model"])
        assert (lin2.weight == lin.weight).all()
    assert os.path.getsize(tmp_path / "gpucore.pt") > 0


def test_the_pytorch_tutorial_checkpoint_flow(tmp_path):
    """The PyTorch tutorial "Saving and loading a general checkpoint", run unchanged."""
    torch = gpucore
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss = model(torch.randn(3, 4)).pow(2).mean()  # a tensor with history
    loss.backward()
    optimizer.step()
    path = tmp_path / "model.pt"
    torch.save(
        {
            "epoch": 5,
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "loss": loss,
        },
        path,
    )
    model2 = torch.nn.Linear(4, 2)
    optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.1, momentum=0.9)
    checkpoint = torch.load(path, weights_only=True)
    model2.load_state_dict(checkpoint["model_state_dict"])
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    assert checkpoint["epoch"] == 5 and checkpoint["loss"].item() == loss.item()
    assert not checkpoint["loss"].requires_grad
    model2.eval()
    x = torch.randn(2, 4)
    assert (model2(x) == model(x)).all()
    # and the whole-model way, with the weights_only=False the tutorial now spells out
    torch.save(model, path)
    model3 = torch.load(path, weights_only=False)
    model3.eval()
    assert (model3(x) == model(x)).all()
