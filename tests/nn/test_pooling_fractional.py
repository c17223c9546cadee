"""fractional_max_pool2d / 3d and FractionalMaxPool2d / 3d: with fixed _random_samples the
values, indices and gradients equal PyTorch's (output_size and output_ratio, 2-D and 3-D,
unbatched); a numpy reference of the interval rule; fresh samples per call; Vulkan against
the CPU; errors."""

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn
import gpucore.nn.functional as F


def _t(a, dtype=gpucore.float32, grad=False, device="cpu"):
    return gpucore.tensor(np.asarray(a), dtype=dtype, device=device, requires_grad=grad)


def _data(n, seed=0, shape=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape or (2, 3) + (9,) * n).astype(np.float32)
    u = rng.random(x.shape[:2] + (n,)).astype(np.float32)
    return x, u


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("kw", [{"output_size": 5}, {"output_ratio": 0.5}, {"output_size": 4}])
def test_matches_torch(n, kw):
    torch = pytest.importorskip("torch")
    x, u = _data(n, seed=n)
    k = (2,) * (n - 1) + (3,)
    if "output_ratio" in kw:
        kw = {"output_ratio": (0.5,) * n}  # PyTorch's function wants one ratio per dim
    a = _t(x, grad=True)
    y, i = getattr(F, f"fractional_max_pool{n}d")(a, k, return_indices=True,
                                                   _random_samples=_t(u), **kw)  # fmt: skip
    ta = torch.tensor(x, requires_grad=True)
    ty, ti = getattr(torch.nn.functional, f"fractional_max_pool{n}d")(
        ta, k, return_indices=True, _random_samples=torch.tensor(u), **kw
    )
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-6)
    m = getattr(nn, f"FractionalMaxPool{n}d")(k, _random_samples=_t(u[:1]), **kw)
    np.testing.assert_array_equal(m(_t(x[0])).numpy(), ty.detach().numpy()[0])


def test_numpy_reference_2d():
    x, u = _data(2, seed=5, shape=(1, 1, 7, 8))
    y, i = F.fractional_max_pool2d_with_indices(_t(x), 2, (4, 5), _random_samples=_t(u))

    def starts(s, size, out, pool):
        alpha = np.float32(size - pool) / np.float32(out - 1)
        seq = [int((np.float32(j) + s) * alpha) - int(s * alpha) for j in range(out - 1)]
        return seq + [size - pool]

    hs = starts(u[0, 0, 1], 7, 4, 2)
    ws = starts(u[0, 0, 0], 8, 5, 2)
    want = np.array([[x[0, 0, h : h + 2, w : w + 2].max() for w in ws] for h in hs])
    np.testing.assert_array_equal(y.numpy()[0, 0], want)
    np.testing.assert_array_equal(x[0, 0].reshape(-1)[i.numpy()[0, 0]], want)


def test_fresh_samples_per_call():
    x, _ = _data(2, seed=6)
    m = nn.FractionalMaxPool2d(2, output_ratio=0.5)
    gpucore.manual_seed(0)
    a = m(_t(x)).numpy()
    gpucore.manual_seed(0)
    b = m(_t(x)).numpy()
    c = m(_t(x)).numpy()
    assert a.shape == (2, 3, 4, 4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda x: F.fractional_max_pool2d(x, 2), ValueError, "output_size or an output_ratio"),
        (lambda x: F.fractional_max_pool2d(x, 5, 6), gpucore.ShapeError, "too large"),
        (lambda x: F.fractional_max_pool2d(x, 2, output_ratio=1.5), ValueError, "ratio"),
        (lambda x: F.fractional_max_pool2d(x[0, 0], 2, 3), gpucore.ShapeError, "3-D or 4-D"),
        (
            lambda x: F.fractional_max_pool2d(x, 2, 3, _random_samples=_t(np.zeros((2, 3)))),
            gpucore.ShapeError,
            "_random_samples",
        ),  # fmt: skip
        (lambda x: nn.FractionalMaxPool2d(2), ValueError, "output size"),
        (lambda x: nn.FractionalMaxPool2d(2, 3, 0.5), ValueError, "only one"),
        (lambda x: nn.FractionalMaxPool3d(2, output_ratio=2.0), ValueError, "between 0 and 1"),
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call(_t(_data(2)[0]))


def test_on_vulkan_matches_cpu(vulkan):
    x, u = _data(2, seed=8)
    got, want = [], []
    for device, into in (("vulkan", got), ("cpu", want)):
        with gpucore.device_policy(device):
            a = _t(x, grad=True, device=device)
            y = F.fractional_max_pool2d(a, 3, 5, _random_samples=_t(u, device=device))
            assert y.device.type == device
            (y * y).sum().backward()
            into += [y.detach().numpy(), a.grad.numpy()]
    for p, q in zip(got, want):
        np.testing.assert_allclose(p, q, rtol=1e-6)
