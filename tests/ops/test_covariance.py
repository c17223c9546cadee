"""cov and corrcoef (gpucore/ops/covariance.py) against PyTorch: weights, correction, 1-D and
0-variable inputs, dtype promotion, gradients, errors, and a Vulkan tensor."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpucore

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(5)
X = RNG.normal(size=(4, 9))
FW = np.array([1, 2, 0, 3, 1, 1, 2, 4, 1])
AW = RNG.uniform(0.1, 2.0, 9)


def _both(fn_name, x, **kw):
    g = getattr(gpucore, fn_name)(
        gpucore.tensor(x), **{k: gpucore.tensor(v) for k, v in kw.items()}
    )
    t = getattr(torch, fn_name)(torch.tensor(x), **{k: torch.tensor(v) for k, v in kw.items()})
    return g, t


@pytest.mark.parametrize("correction", [0, 1, 2])
@pytest.mark.parametrize("weights", ["none", "f", "a", "fa"])
def test_cov_matches_torch(correction, weights):
    kw = {}
    if "f" in weights:
        kw["fweights"] = FW
    if "a" in weights:
        kw["aweights"] = AW
    g = gpucore.cov(
        gpucore.tensor(X), correction=correction, **{k: gpucore.tensor(v) for k, v in kw.items()}
    )
    t = torch.cov(
        torch.tensor(X), correction=correction, **{k: torch.tensor(v) for k, v in kw.items()}
    )
    np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-14)


def test_cov_shapes_and_dtypes():
    for x in (X[0], X[:1], np.arange(6).reshape(2, 3), np.array([[1.0, 2.0]]).T):
        with warnings.catch_warnings():  # one observation: both warn (degrees of freedom 0)
            warnings.simplefilter("ignore")
            g, t = _both("cov", x)
        assert tuple(g.shape) == tuple(t.shape)
        assert str(g.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-6, equal_nan=True)
    g = gpucore.cov(gpucore.tensor(X, dtype=gpucore.float32), aweights=gpucore.tensor(AW))
    assert g.dtype is gpucore.float64  # float64 aweights promote, as PyTorch


def test_cov_degrees_of_freedom_warns():
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        g = gpucore.cov(gpucore.tensor([[1.0, 2.0, 4.0]]), correction=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = torch.cov(torch.tensor([[1.0, 2.0, 4.0]]), correction=5)
    assert g.item() == t.item() == np.inf


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"fweights": np.array([1.0, 2.0, 3.0])}, "fweights to have integral dtype"),
        ({"fweights": np.array([1, 2])}, "same numel as there are observations"),
        ({"fweights": np.array([1, -2, 1])}, "fweights cannot be negative"),
        ({"aweights": np.array([1, 2, 1])}, "aweights to have floating point dtype"),
        ({"aweights": np.array([1.0, -2, 1])}, "aweights cannot be negative"),
        ({"aweights": np.array([[1.0, 2, 1]])}, "aweights to have one or fewer dimensions"),
    ],
)
def test_cov_errors_match_torch(kw, match):
    x = np.zeros((2, 3))
    with pytest.raises(RuntimeError, match=match):
        torch.cov(torch.tensor(x), **{k: torch.tensor(v) for k, v in kw.items()})
    with pytest.raises((TypeError, ValueError), match=match):
        gpucore.cov(gpucore.tensor(x), **{k: gpucore.tensor(v) for k, v in kw.items()})
    with pytest.raises(ValueError, match="two or fewer dimensions"):
        gpucore.cov(gpucore.zeros(2, 2, 2))


def test_corrcoef_matches_torch():
    for x in (X, X[0], np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]]), np.arange(8).reshape(2, 4)):
        g, t = _both("corrcoef", x)
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-6, atol=1e-7, equal_nan=True)
        assert (g.numpy()[~np.isnan(g.numpy())] <= 1).all()


def test_gradients_match_torch():
    g = gpucore.tensor(X, requires_grad=True)
    t = torch.tensor(X, requires_grad=True)
    w = RNG.normal(size=(4, 4))
    (gpucore.cov(g, aweights=gpucore.tensor(AW)) * gpucore.tensor(w)).sum().backward()
    (torch.cov(t, aweights=torch.tensor(AW)) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    g.grad = None
    t.grad = None
    (gpucore.corrcoef(g) * gpucore.tensor(w)).sum().backward()
    (torch.corrcoef(t) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_vulkan_tensor_gives_the_same_answer(vulkan):
    x = X.astype(np.float32)
    want = gpucore.cov(gpucore.tensor(x), fweights=gpucore.tensor(FW)).numpy()
    got = gpucore.cov(gpucore.tensor(x).to("vulkan"), fweights=gpucore.tensor(FW).to("vulkan"))
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-6)
    want = gpucore.corrcoef(gpucore.tensor(x)).numpy()
    got = gpucore.corrcoef(gpucore.tensor(x).to("vulkan"))
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-6)
