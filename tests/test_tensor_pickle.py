"""Tensors pickle and unpickle (Tensor.__reduce_ex__ in gpucore/tensor.py): values, dtype,
device and requires_grad, rebuilt as a fresh leaf in its own aligned storage; views pickle as
their own data; ``.grad``, hooks and the graph are dropped; Parameters and subclasses keep their
class; tensors cross process boundaries (multiprocessing, the DataLoader's reducer), compared
with torch's pickling where it is installed."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import numpy as np
import pytest
from serialization_helpers import ALL_DTYPES, special, tensor_bytes

import gpucore
from gpucore import nn
from gpucore.tensor import Tensor


class Tagged(Tensor):
    """A user's subclass with its own attributes."""


def _same(a, b):
    assert type(a) is type(b) and a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    assert tensor_bytes(a) == tensor_bytes(b)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_every_dtype_bit_exact(dtype, protocol):
    t = special(dtype)
    back = pickle.loads(pickle.dumps(t, protocol=protocol))
    _same(t, back)
    assert back._host().ctypes.data % 64 == 0 and back._host().flags.writeable
    back.add_(back) if dtype.is_floating_point else None  # its own, writable storage
    assert tensor_bytes(t) == tensor_bytes(special(dtype))


def test_views_and_odd_shapes_pickle_as_their_own_data():
    base = gpucore.arange(24.0).reshape(2, 3, 4)
    for v in (base[:, 1], base.transpose(0, 2), base[..., ::2], base[0, 0, 0], base[:0]):
        back = pickle.loads(pickle.dumps(v))
        assert back.tolist() == v.tolist() and back.is_contiguous() and back._base is None
    expanded = gpucore.ones(3, 1).expand(3, 1000)
    assert len(pickle.dumps(expanded)) > 3 * 1000 * 4  # materialised, as PyTorch's view pickling


def test_autograd_state_is_dropped():
    w = gpucore.randn(3, requires_grad=True)
    w.register_hook(lambda g: g * 2)  # hooks live on the AccumulateGrad node (a weakref)
    (w * w).sum().backward()
    assert w.grad is not None and w._acc is not None
    back = pickle.loads(pickle.dumps(w))
    assert back.requires_grad and back.is_leaf and back.grad is None and back._acc is None
    y = w * 3  # a non-leaf: comes back as a leaf that requires grad, as in PyTorch
    back = pickle.loads(pickle.dumps(y))
    assert back.is_leaf and back.requires_grad and back.tolist() == y.tolist()
    with gpucore.no_grad():
        z = w * 3
    assert not pickle.loads(pickle.dumps(z)).requires_grad


def test_parameters_and_subclasses_keep_their_class():
    p = nn.Parameter(gpucore.randn(2, 2))
    frozen = nn.Parameter(gpucore.ones(2), requires_grad=False)
    t = Tagged.__new__(Tagged)
    t._init(gpucore.ones(2)._data, gpucore.float32, [0])
    t.note = "hello"
    p2, f2, t2 = pickle.loads(pickle.dumps([p, frozen, t]))
    assert type(p2) is nn.Parameter and p2.requires_grad and p2.tolist() == p.tolist()
    assert type(f2) is nn.Parameter and not f2.requires_grad
    assert type(t2) is Tagged and t2.note == "hello"
    # one object referenced twice stays one object
    a, b = pickle.loads(pickle.dumps([p, p]))
    assert a is b


def test_copy_and_deepcopy():
    w = nn.Parameter(gpucore.randn(3))
    (w * 2).sum().backward()
    c = copy.deepcopy(w)  # deepcopy keeps .grad (Tensor.__deepcopy__), as in PyTorch
    assert type(c) is nn.Parameter and c.grad.tolist() == w.grad.tolist()
    s = copy.copy(gpucore.arange(3.0))
    assert s.tolist() == [0.0, 1.0, 2.0]


def test_vulkan_tensors_pickle_to_vulkan(vulkan):
    t = gpucore.randn(5, 4).to("vulkan")
    back = pickle.loads(pickle.dumps(t.t()))
    assert back.is_vulkan and back.to("cpu").tolist() == t.t().to("cpu").tolist()
    p = pickle.loads(pickle.dumps(nn.Parameter(t)))
    assert type(p) is nn.Parameter and p.is_vulkan


def test_hostile_rebuild_arguments_are_refused():
    from gpucore.tensor import _rebuild_tensor

    with pytest.raises(TypeError):
        _rebuild_tensor(Tensor, b"not an array", gpucore.float32, "cpu", False)
    with pytest.raises(TypeError):  # data whose dtype does not match
        _rebuild_tensor(Tensor, np.zeros(3, np.float64), gpucore.float32, "cpu", False)


# ------------------------------------------------------------------------------ processes
def _child(batch):
    model, x = batch
    out = model(x)
    return out.detach(), model, x.grad is None


def test_tensors_and_models_cross_processes():
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork")
    model = nn.Linear(3, 2)
    x = gpucore.randn(4, 3, requires_grad=True)
    model(x).sum().backward()  # a trained model: its parameters hold .grad and graph nodes
    with multiprocessing.get_context("fork").Pool(1) as pool:
        out, m2, no_grad = pool.apply(_child, ((model, x),))
    assert no_grad and out.tolist() == model(x).detach().tolist()
    assert type(m2.weight) is nn.Parameter and m2.weight.requires_grad


def test_multiprocessing_pickler_and_dataloader_workers():
    # gpucore.utils.data registers its own reducer for exact Tensors with ForkingPickler;
    # Parameters and other subclasses go through Tensor.__reduce_ex__
    from multiprocessing.reduction import ForkingPickler

    from gpucore.utils.data import DataLoader, TensorDataset

    t = gpucore.arange(6.0).reshape(2, 3)[:, 1]
    assert pickle.loads(ForkingPickler.dumps(t)).tolist() == [1.0, 4.0]
    p = pickle.loads(ForkingPickler.dumps(nn.Parameter(gpucore.ones(2))))
    assert type(p) is nn.Parameter and p.requires_grad
    ds = TensorDataset(gpucore.arange(8.0).reshape(4, 2), nn.Parameter(gpucore.ones(4)))
    loader = DataLoader(ds, batch_size=2, num_workers=1)
    got = [(x.tolist(), y.tolist()) for x, y in loader]
    assert got == [([[0.0, 1.0], [2.0, 3.0]], [1.0, 1.0]), ([[4.0, 5.0], [6.0, 7.0]], [1.0, 1.0])]


def test_same_semantics_as_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, gpucore):
        w = lib.ones(3, requires_grad=True)
        (w * 2).sum().backward()
        y = w * 2
        view = lib.arange(6.0).reshape(2, 3)[:, 1]
        p = lib.nn.Parameter(lib.ones(2))
        w2, y2, v2, p2 = pickle.loads(pickle.dumps([w, y, view, p]))
        assert w2.requires_grad and w2.is_leaf and w2.grad is None, lib.__name__
        assert y2.requires_grad and y2.is_leaf and y2.grad_fn is None, lib.__name__
        assert v2.tolist() == [1.0, 4.0], lib.__name__
        assert type(p2) is lib.nn.Parameter and p2.requires_grad, lib.__name__
        with pytest.raises(RuntimeError):
            copy.deepcopy(y)  # only leaves deepcopy, in both
