"""gpucore's pickle format (gpucore/io/pickle_format.py): whole models and optimizers saved as
PyTorch users save them, loaded only with ``weights_only=False``; refused (and never unpickled)
with the default ``weights_only=True``; hostile pickles, PyTorch's own files and corrupt pickle
files refused with clear errors."""

from __future__ import annotations

import io
import os
import pickle

import numpy as np
import pytest
from serialization_helpers import assert_same

import gpucore
from gpucore import nn
from gpucore.errors import SerializationError
from gpucore.io import from_bytes, to_bytes
from gpucore.io.pickle_format import MAGIC
from gpucore.serialization import WeightsOnlyError


def _trained(seed: int = 0):
    gpucore.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    opt = gpucore.optim.Adam(model.parameters(), lr=1e-2)
    x, y = gpucore.randn(16, 4), gpucore.randn(16, 3)
    for _ in range(3):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    return model, opt, x, y


def _step(model, opt, x, y) -> float:
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.item()


def test_whole_model_and_optimizer_round_trip(tmp_path):
    model, opt, x, y = _trained()
    p = tmp_path / "whole.pt"
    gpucore.save({"model": model, "opt": opt, "epoch": 3}, p)
    assert p.read_bytes().startswith(MAGIC)
    ck = gpucore.load(p, weights_only=False)
    m2, o2 = ck["model"], ck["opt"]
    assert ck["epoch"] == 3 and type(m2) is nn.Sequential
    assert np.array_equal(m2(x).detach().numpy(), model(x).detach().numpy())
    for p1, p2 in zip(model.parameters(), m2.parameters()):
        assert type(p2) is nn.Parameter and p2.requires_grad and p2.grad is None
        assert p1.grad is not None  # the original's gradients are not saved
    # the optimizer holds the loaded model's parameters (identity kept across the file) ...
    assert all(a is b for a, b in zip(o2.param_groups[0]["params"], m2.parameters()))
    # ... and its state: training goes on exactly as it would have
    for _ in range(2):
        assert _step(model, opt, x, y) == _step(m2, o2, x, y)
    assert_same(model.state_dict(), m2.state_dict())


def test_the_default_load_refuses_a_pickle_file_and_says_why(tmp_path):
    model, *_ = _trained()
    p = tmp_path / "whole.pt"
    gpucore.save(model, p)
    with pytest.raises(WeightsOnlyError, match="weights_only=False") as e:
        gpucore.load(p)
    msg = str(e.value)
    assert str(p) in msg and "Sequential" in msg and "trust" in msg
    assert isinstance(e.value, pickle.UnpicklingError) and isinstance(e.value, SerializationError)
    with pytest.raises(WeightsOnlyError):
        from_bytes(p.read_bytes())
    with pytest.raises(WeightsOnlyError):  # whatever safe globals are listed
        with gpucore.serialization.safe_globals([nn.Sequential, nn.Linear, nn.Tanh]):
            gpucore.load(p, weights_only=True)


def test_save_weights_only_choices():
    sd = {"w": gpucore.ones(2)}
    assert to_bytes(sd) == to_bytes(sd, weights_only=None)  # safe whenever possible
    pickled = to_bytes(sd, weights_only=False)  # always the pickle format
    assert pickled.startswith(MAGIC)
    assert_same(sd, from_bytes(pickled, weights_only=False))
    with pytest.raises(SerializationError, match="type set"):
        to_bytes({"s": {1}})
    assert from_bytes(to_bytes({"s": {1}}, weights_only=None), weights_only=False) == {"s": {1}}


def test_pickled_objects_keep_tensor_identity_classes_and_flags():
    shared = gpucore.randn(3)
    frozen = nn.Parameter(gpucore.ones(2), requires_grad=False)
    tied = nn.Linear(3, 3)
    obj = {
        "a": shared,
        "b": [shared, shared[1:]],  # a view: its own data
        "frozen": frozen,
        "arr": np.arange(3),
        "tied": [tied, tied.weight],
        "ints": gpucore.arange(4),
    }
    back = from_bytes(to_bytes(obj, weights_only=None), weights_only=False)
    assert back["a"] is back["b"][0] and back["b"][1].tolist() == shared[1:].tolist()
    assert type(back["frozen"]) is nn.Parameter and not back["frozen"].requires_grad
    assert back["tied"][0].weight is back["tied"][1]
    assert back["ints"].dtype is gpucore.int64 and back["arr"].tolist() == [0, 1, 2]
    assert back["a"].device == "cpu" and not back["a"].requires_grad


def test_what_pickle_cannot_save_raises_and_writes_nothing(tmp_path):
    model = nn.Linear(2, 2)
    model.register_forward_hook(lambda m, i, o: o)  # a lambda cannot be pickled (nor in torch)
    p = tmp_path / "m.pt"
    with pytest.raises(SerializationError, match="cannot save"):
        gpucore.save(model, p)
    assert os.listdir(tmp_path) == []


def test_pickle_module_and_load_args_are_used():
    class Recorder:
        Pickler = pickle.Pickler
        used = []

        class Unpickler(pickle.Unpickler):
            def find_class(self, module, name):
                Recorder.used.append(name)
                return super().find_class(module, name)

    buf = io.BytesIO()
    gpucore.save({"s": {1, 2}}, buf, pickle_module=Recorder)
    buf.seek(0)
    out = gpucore.load(buf, pickle_module=Recorder, weights_only=False, encoding="latin1")
    assert out == {"s": {1, 2}} and Recorder.used == []  # a set needs no global
    buf.seek(0)
    gpucore.load(io.BytesIO(to_bytes({"n": nn.ReLU()}, weights_only=None)), weights_only=False)


# ------------------------------------------------------------------------------ hostile files
class _Payload:
    """Unpickling this would create a file: it must never happen with weights_only=True."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_hostile_pickle_file_is_never_unpickled_by_default(tmp_path):
    marker = tmp_path / "pwned"
    data = to_bytes({"x": _Payload(str(marker))}, weights_only=None)
    assert data.startswith(MAGIC)
    (tmp_path / "evil.pt").write_bytes(data)
    with pytest.raises(WeightsOnlyError):
        gpucore.load(tmp_path / "evil.pt")
    with pytest.raises(WeightsOnlyError):
        gpucore.load(io.BytesIO(data), map_location="cpu")
    assert not marker.exists()


@pytest.mark.parametrize("weights_only", [True, False])
def test_raw_pickles_and_pytorch_files_are_refused(tmp_path, weights_only):
    marker = tmp_path / "pwned"
    for proto in (2, 4, 5):
        raw = pickle.dumps({"x": _Payload(str(marker))}, protocol=proto)
        with pytest.raises(SerializationError, match="raw pickle"):
            from_bytes(raw, weights_only=weights_only)
    assert not marker.exists()
    zipped = b"PK\x03\x04" + bytes(60)
    with pytest.raises(SerializationError, match="PyTorch checkpoint"):
        from_bytes(zipped, weights_only=weights_only)


def test_real_torch_file_is_refused(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(2)}, tmp_path / "t.pt")
    with pytest.raises(SerializationError, match="safetensors.torch.save_file"):
        gpucore.load(tmp_path / "t.pt")


def test_corrupt_pickle_files(tmp_path):
    data = bytearray(to_bytes({"m": nn.Linear(3, 2)}, weights_only=None))
    with pytest.raises(SerializationError, match="truncated"):
        from_bytes(bytes(data[:40]), weights_only=False)
    with pytest.raises(SerializationError, match="truncated|ended"):
        from_bytes(bytes(data[:-3]), weights_only=False)
    flipped = bytearray(data)
    flipped[-1] ^= 1  # a tensor byte: the tensor section's checksum catches it
    with pytest.raises(SerializationError, match="checksum"):
        from_bytes(bytes(flipped), weights_only=False)
    bad_info = bytearray(data)
    bad_info[len(MAGIC) : len(MAGIC) + 8] = (1 << 40).to_bytes(8, "little")
    with pytest.raises(SerializationError, match="info length"):
        from_bytes(bytes(bad_info))
    newer = bytes(data).replace(b'"version": 1', b'"version": 9', 1)
    with pytest.raises(SerializationError, match="version"):
        from_bytes(newer, weights_only=False)


def test_whole_model_save_compared_with_torch(tmp_path):
    torch = pytest.importorskip("torch")
    for lib in (torch, gpucore):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
        p = tmp_path / f"{lib.__name__}.pt"
        lib.save(m, p)
        with pytest.raises(pickle.UnpicklingError):
            lib.load(p)  # weights_only=True is the default in both
        m2 = lib.load(p, weights_only=False)
        x = lib.ones(1, 2)
        assert (m2(x) == m(x)).all()
        assert isinstance(m2[0].weight, lib.nn.Parameter) and m2[0].weight.requires_grad
