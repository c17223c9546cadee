"""gpucore.memory_formats: channels_last / channels_last_3d layouts (PyTorch's strides: the
[N, C, H, W] shape stored as [N, H, W, C]) through Tensor.contiguous / is_contiguous / to /
clone, the *_like factories and Module.to; values and gradients unchanged; errors; strides
against PyTorch where installed."""

import io
import pickle

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn


def _x(shape=(2, 3, 4, 5)):
    return gpucore.tensor(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


def _nhwc_strides(shape):
    """Element strides of [N, C, H, W] stored as N, H, W, C (row-major over that order)."""
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def test_contiguous_channels_last_strides_and_values():
    x = _x()
    cl = x.contiguous(memory_format=gpucore.channels_last)
    assert cl.stride() == _nhwc_strides(x.shape)
    assert cl.is_contiguous(memory_format=gpucore.channels_last)
    assert not cl.is_contiguous()
    assert cl.is_contiguous(memory_format=gpucore.contiguous_format) is False
    assert gpucore.equal(cl, x)
    assert cl.contiguous(memory_format=gpucore.channels_last) is cl  # already: itself
    assert cl.contiguous().is_contiguous() and gpucore.equal(cl.contiguous(), x)
    assert not x.is_contiguous(memory_format=gpucore.channels_last)
    assert not gpucore.zeros(2, 3).is_contiguous(memory_format=gpucore.channels_last)
    v = gpucore.zeros(1, 2, 3, 4, 5).contiguous(memory_format=gpucore.channels_last_3d)
    assert v.is_contiguous(memory_format=gpucore.channels_last_3d)
    assert v.stride() == (120, 1, 40, 10, 2)


def test_to_clone_and_like_keep_or_set_the_format():
    x = _x()
    cl = x.to(memory_format=gpucore.channels_last)
    assert cl.is_contiguous(memory_format=gpucore.channels_last) and gpucore.equal(cl, x)
    d = cl.to(gpucore.float64, memory_format=gpucore.channels_last)
    assert d.dtype == gpucore.float64 and d.is_contiguous(memory_format=gpucore.channels_last)
    # preserve_format, the default, keeps a channels-last input so
    assert cl.clone().is_contiguous(memory_format=gpucore.channels_last)
    assert cl.clone(memory_format=gpucore.contiguous_format).is_contiguous()
    assert x.clone(memory_format=gpucore.channels_last).stride() == _nhwc_strides(x.shape)
    z = gpucore.zeros_like(cl)
    assert z.is_contiguous(memory_format=gpucore.channels_last) and float(z.abs().sum()) == 0
    assert gpucore.ones_like(x, memory_format=gpucore.channels_last).stride() == cl.stride()
    assert gpucore.empty_like(cl, memory_format=gpucore.contiguous_format).is_contiguous()
    f = gpucore.full_like(cl, 2.0, requires_grad=True)
    assert f.is_leaf and f.requires_grad and float(f.sum()) == 2.0 * x.numel()
    assert f.is_contiguous(memory_format=gpucore.channels_last)


def test_gradients_and_convolution_are_format_blind():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((2, 3, 6, 6))
    x = gpucore.tensor(xs, requires_grad=True)
    w = gpucore.tensor(rng.standard_normal((3, 6, 6)))
    (x.contiguous(memory_format=gpucore.channels_last) * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(w.numpy(), xs.shape))
    conv = nn.Conv2d(3, 4, 3, padding=1).double()
    ref = conv(gpucore.tensor(xs)).detach().numpy()
    conv = conv.to(memory_format=gpucore.channels_last)
    out = conv(gpucore.tensor(xs).contiguous(memory_format=gpucore.channels_last))
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12, atol=1e-12)


def test_module_to_changes_the_4d_parameters_only():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(5, 2))
    m.to(memory_format=gpucore.channels_last)
    w = m[0].weight
    assert isinstance(w, nn.Parameter) and w.is_leaf and w.requires_grad
    assert w.is_contiguous(memory_format=gpucore.channels_last)
    assert m[0].bias.is_contiguous() and m[2].weight.is_contiguous()
    assert m[1].num_batches_tracked.dtype == gpucore.int64


def test_pickle_save_and_errors():
    assert pickle.loads(pickle.dumps(gpucore.channels_last)) is gpucore.channels_last
    assert repr(gpucore.channels_last) == "gpucore.channels_last"
    assert isinstance(gpucore.preserve_format, gpucore.memory_format)
    cl = _x().contiguous(memory_format=gpucore.channels_last)
    buf = io.BytesIO()
    gpucore.save({"t": cl}, buf)
    buf.seek(0)
    assert gpucore.equal(gpucore.load(buf)["t"], cl)
    with pytest.raises(gpucore.ShapeError, match="channels_last needs a tensor of rank 4"):
        gpucore.zeros(2, 3).contiguous(memory_format=gpucore.channels_last)
    with pytest.raises(gpucore.ShapeError, match="rank 5"):
        _x().to(memory_format=gpucore.channels_last_3d)
    with pytest.raises(gpucore.ArgumentTypeError, match="memory_format must be"):
        _x().contiguous(memory_format="channels_last")
    with pytest.raises(ValueError, match="preserve_format"):
        _x().is_contiguous(memory_format=gpucore.preserve_format)
    # preserve_format in contiguous: the input's own format
    assert cl.contiguous(memory_format=gpucore.preserve_format) is cl


def test_strides_match_torch():
    torch = pytest.importorskip("torch")
    shape = (2, 3, 4, 5)
    t = torch.arange(120.0).reshape(shape)
    g = _x(shape)
    for fmt in ("channels_last", "contiguous_format"):
        tt = t.contiguous(memory_format=getattr(torch, fmt))
        gg = g.contiguous(memory_format=getattr(gpucore, fmt))
        assert gg.stride() == tt.stride()
        assert gg.is_contiguous(memory_format=gpucore.channels_last) == tt.is_contiguous(
            memory_format=torch.channels_last
        )
    # size-1 channels: both formats at once, as PyTorch
    t1 = torch.zeros(2, 1, 3, 3)
    g1 = gpucore.zeros(2, 1, 3, 3)
    assert g1.is_contiguous(memory_format=gpucore.channels_last) == t1.is_contiguous(
        memory_format=torch.channels_last
    )
