"""max_unpool1d/2d/3d, lp_pool1d/2d/3d, the *_with_indices names, channel_shuffle and their
modules (MaxUnpool*, LPPool*, ChannelShuffle, CircularPad*): values and gradients against
PyTorch and numpy, Vulkan against the CPU, and errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def _t(a, dtype=gpucore.float64, grad=False, device="cpu"):
    return gpucore.tensor(np.asarray(a), dtype=dtype, device=device, requires_grad=grad)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_inverts_max_pool(n):
    x = _rand(2, 3, *(6,) * n, seed=n)
    pool = getattr(F, f"max_pool{n}d")
    vals, idx = pool(_t(x), 2, return_indices=True)
    v = _t(vals.numpy(), grad=True)
    out = getattr(F, f"max_unpool{n}d")(v, idx, 2)
    # numpy: every pooled value back at its flat index, zeros elsewhere
    want = np.zeros((2, 3, 6**n))
    np.put_along_axis(want, idx.numpy().reshape(2, 3, -1), vals.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(out.detach().numpy(), want.reshape(out.shape))
    w = _rand(*out.shape, seed=9)
    (out * _t(w)).sum().backward()
    got = np.take_along_axis(w.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(v.grad.numpy(), got.reshape(v.shape))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_matches_torch(n):
    torch = pytest.importorskip("torch")
    x = _rand(2, 3, *(7,) * n, seed=n)
    vals, idx = getattr(F, f"max_pool{n}d_with_indices")(_t(x), 3, 2, 1)
    size = (2, 3) + (8,) * n  # inside the allowed range, past the default 7
    for kw in ({}, {"output_size": size}, {"output_size": size[2:]}):
        got = getattr(F, f"max_unpool{n}d")(vals, idx, 3, 2, 1, **kw)
        want = getattr(torch.nn.functional, f"max_unpool{n}d")(
            torch.tensor(vals.numpy()), torch.tensor(idx.numpy()), 3, 2, 1, **kw
        )
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    m = getattr(nn, f"MaxUnpool{n}d")(3, 2, 1)
    np.testing.assert_array_equal(m(vals, idx, size).numpy(), want.numpy())
    unb = getattr(F, f"max_unpool{n}d")(vals[0], idx[0], 3, 2, 1)
    assert unb.shape == tuple(want.shape[1:2]) + (7,) * n


@pytest.mark.parametrize(
    "n,norm,ceil", [(1, 2, False), (2, 3.0, True), (2, 1, False), (3, 2, True)]
)
def test_lp_pool_matches_torch(n, norm, ceil):
    torch = pytest.importorskip("torch")
    x = np.abs(_rand(2, 3, *(7,) * n, seed=n)) + 0.1
    a = _t(x, grad=True)
    out = getattr(F, f"lp_pool{n}d")(a, norm, 3, 2, ceil)
    out.sum().backward()
    ta = torch.tensor(x, requires_grad=True)
    tout = getattr(torch.nn.functional, f"lp_pool{n}d")(ta, norm, 3, 2, ceil)
    tout.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)
    m = getattr(nn, f"LPPool{n}d")(norm, 3, 2, ceil)
    np.testing.assert_allclose(m(a).detach().numpy(), tout.detach().numpy(), rtol=1e-10)


def test_lp_pool_numpy_reference():
    x = np.abs(_rand(1, 2, 6, seed=4))
    got = F.lp_pool1d(_t(x), 2, 3).numpy()
    want = np.sqrt((x.reshape(1, 2, 2, 3) ** 2).sum(-1))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_with_indices_names():
    x = _t(_rand(2, 3, 6, 6, 6))
    for name, arg in (("max_pool1d", x[:, :, 0, 0]), ("max_pool2d", x[:, :, 0]), ("max_pool3d", x)):
        v, i = getattr(F, name + "_with_indices")(arg, 2)
        v2, i2 = getattr(F, name)(arg, 2, return_indices=True)
        assert np.array_equal(v.numpy(), v2.numpy()) and np.array_equal(i.numpy(), i2.numpy())
        v, i = getattr(F, "adaptive_" + name + "_with_indices")(arg, 3)
        v2, i2 = getattr(F, "adaptive_" + name)(arg, 3, return_indices=True)
        assert np.array_equal(v.numpy(), v2.numpy()) and np.array_equal(i.numpy(), i2.numpy())


def test_channel_shuffle_and_circular_pad_match_torch():
    torch = pytest.importorskip("torch")
    x = _rand(2, 6, 3, 4)
    got = nn.ChannelShuffle(3)(_t(x)).numpy()
    np.testing.assert_array_equal(got, torch.nn.ChannelShuffle(3)(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2, 3, 4).swapaxes(1, 2).reshape(x.shape))
    for n, pad in ((1, (1, 2)), (2, (2, 1, 0, 3)), (3, 1)):
        y = _rand(2, 3, *(4,) * n)
        got = getattr(nn, f"CircularPad{n}d")(pad)(_t(y)).numpy()
        want = getattr(torch.nn, f"CircularPad{n}d")(pad)(torch.tensor(y)).numpy()
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda v, i: F.max_unpool2d(v, i[:, :1], 2), gpucore.ShapeError, "shape of indices"),
        (lambda v, i: F.max_unpool2d(v, i * 100, 2), IndexError, "invalid max index"),
        (lambda v, i: F.max_unpool2d(v, i, 2, output_size=(9, 9)), ValueError, "output_size"),
        (lambda v, i: F.max_unpool2d(v, i, 2, output_size=(6,)), ValueError, "2 or 4 elements"),
        (lambda v, i: F.max_unpool2d(v, v, 2), TypeError, "indices"),
        (lambda v, i: F.max_unpool2d(v[0, 0, 0], i[0, 0, 0], 2), gpucore.ShapeError, "3-D"),
        (lambda v, i: F.lp_pool2d(v, 2, 0), ValueError, "kernel_size"),
        (lambda v, i: F.channel_shuffle(v, 2), gpucore.ShapeError, "divisible"),
        (lambda v, i: F.channel_shuffle(v, 0), ValueError, "positive"),
        (lambda v, i: F.channel_shuffle(v[0, 0], 1), gpucore.ShapeError, "at least 3"),
    ],
)
def test_errors(call, exc, match):
    v, i = F.max_pool2d(_t(_rand(2, 3, 6, 6)), 2, return_indices=True)
    with pytest.raises(exc, match=match):
        call(v, i)


def test_on_vulkan_matches_cpu(vulkan):
    x = _rand(2, 4, 8, 8, seed=3).astype(np.float32)
    got, want = [], []
    for device, into in (("vulkan", got), ("cpu", want)):
        with gpucore.device_policy(device):
            a = _t(np.abs(x), gpucore.float32, True, device)
            v, i = F.max_pool2d(a, 2, return_indices=True)
            out = F.max_unpool2d(v, i, 2) + F.interpolate(F.lp_pool2d(a, 2, 2), scale_factor=2)
            out = F.channel_shuffle(out, 2)
            assert out.device.type == device
            (out * out).sum().backward()
            into += [out.detach().numpy(), a.grad.numpy()]
    for u, w in zip(got, want):
        np.testing.assert_allclose(u, w, rtol=1e-4, atol=1e-5)
