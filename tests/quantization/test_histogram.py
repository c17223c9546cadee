"""HistogramObserver (gpucore/quantization/histogram.py): the histogram it keeps (torch.histc's
binning, re-binning when the range widens), the range search clipping outliers, and the
qparams equal to torch.ao.quantization.HistogramObserver's on the same data."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore.quantization import HistogramObserver, MinMaxObserver
from gpucore.quantization.histogram import histc32, linspace32

pytestmark = [  # torch's deprecation notices for its quantized tensors and torch.ao
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def test_histc_bins_like_torch_histc():
    x = np.array([0.0, 0.5, 1.0, 1.99, 2.0, 3.0, -1.0], np.float32)
    assert histc32(x, 4, 0.0, 2.0).tolist() == [1, 1, 1, 2]  # 2.0 in the last bin, 3 and -1 out
    assert histc32(np.array([2.0] * 3, np.float32), 4, 2.0, 2.0).tolist() == [0, 0, 3, 0]
    edges = linspace32(-1.3, 2.7, 9)  # torch.linspace's scalar formula
    assert edges[0] == np.float32(-1.3) and edges[-1] == np.float32(2.7)
    np.testing.assert_allclose(edges, np.linspace(-1.3, 2.7, 9), rtol=0, atol=1e-6)


def test_counts_are_kept_when_the_range_widens():
    obs = HistogramObserver(bins=64)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1000).astype(np.float32)
    obs(gc.from_numpy(a))
    obs(gc.from_numpy(a * 4))
    assert obs.histogram.numpy().sum() == pytest.approx(2000, rel=1e-6)
    assert obs.min_val.item() == (a * 4).min() and obs.max_val.item() == (a * 4).max()


def test_the_search_narrows_the_range_min_max_keeps():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(100_000), [60.0, -45.0]]).astype(np.float32)
    h = HistogramObserver()
    h(gc.from_numpy(x))
    m = MinMaxObserver()
    m(gc.from_numpy(x))
    hs, hz = h.calculate_qparams()
    ms, _ = m.calculate_qparams()
    assert hs.item() < 0.7 * ms.item()  # PyTorch's search clips outliers (here: one side)
    lo, hi = (0 - hz.item()) * hs.item(), (255 - hz.item()) * hs.item()
    assert -45.0 <= lo <= 0 <= hi <= 60.0 + hs.item()


def test_infinities_are_ignored_and_state_resets():
    obs = HistogramObserver(bins=16)
    with pytest.warns(UserWarning, match="inf"):
        obs(gc.tensor([1.0, float("inf"), -2.0]))
    assert (obs.min_val.item(), obs.max_val.item()) == (-2.0, 1.0)
    obs.reset_min_max_vals()
    with pytest.warns(UserWarning, match="must run observer"):
        assert obs.calculate_qparams()[0].tolist() == [1.0]


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(qscheme=gc.per_channel_affine), "per_tensor"),
        (dict(bins=0), "bins"),
        (dict(is_dynamic=True), "dynamic"),
    ],
)
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        HistogramObserver(**kw)


def _batches(seed):
    r = np.random.default_rng(seed)
    out = [r.laplace(size=20000).astype(np.float32) * (i + 1) for i in range(3)]
    out.append(r.standard_t(2, size=20000).astype(np.float32))
    out.append(np.concatenate([r.standard_normal(5000), [40.0, -25.0]]).astype(np.float32))
    return out


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(
    "dtype,qscheme,bins,reverse",
    [
        (gc.quint8, gc.per_tensor_affine, 2048, False),
        (gc.qint8, gc.per_tensor_symmetric, 256, True),
        (gc.qint8, gc.per_tensor_affine, 512, True),
    ],
)
def test_equals_pytorch(seed, dtype, qscheme, bins, reverse):
    torch = pytest.importorskip("torch")
    from torch.ao import quantization as tq

    tdt = {gc.qint8: torch.qint8, gc.quint8: torch.quint8}[dtype]
    ours = HistogramObserver(bins=bins, dtype=dtype, qscheme=qscheme)
    theirs = tq.HistogramObserver(bins=bins, dtype=tdt, qscheme=getattr(torch, qscheme.name))
    batches = _batches(seed)
    for b in batches[::-1] if reverse else batches:
        ours(gc.from_numpy(b))
        theirs(torch.from_numpy(b))
    # re-binning may put a few upsampled bins' mass one bin over (PyTorch's vectorised
    # linspace rounds by the CPU's vector width and thread count): same mass, nearly same bins
    h, th = ours.histogram.numpy(), theirs.histogram.numpy()
    assert h.sum() == pytest.approx(th.sum(), rel=1e-6)
    assert np.abs(h - th).sum() <= 1e-3 * th.sum()
    s, z = ours.calculate_qparams()
    ts, tz = theirs.calculate_qparams()
    np.testing.assert_allclose(s.numpy(), ts.numpy(), rtol=2e-3)
    assert np.abs(z.numpy().astype(int) - tz.numpy()).max() <= 1
