"""histogram, histogramdd and mode (gpucore/ops/counting.py) against PyTorch and numpy: bin
edges (equal-width and given), values on edges, outside and NaN, weights, density, errors; mode's
ties, indices and gradient; device tensors."""

import numpy as np
import pytest

import gpucore as gc


def _rand(*shape, seed, dt=np.float32):
    return np.random.default_rng(seed).uniform(-3, 3, shape).astype(dt)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("bins", [1, 3, 7, 64])
def test_histogram_equal_width_as_torch(dt, bins):
    torch = pytest.importorskip("torch")
    x = _rand(500, seed=bins, dt=dt)
    x[:5] = [x.min(), x.max(), 0.0, 1.5, -1.5]
    for kw in ({}, {"range": (-1.0, 2.0)}):
        g = gc.histogram(gc.tensor(x), bins, **kw)
        t = torch.histogram(torch.tensor(x), bins, **kw)
        np.testing.assert_array_equal(g.bin_edges.numpy(), t.bin_edges.numpy())
        np.testing.assert_array_equal(g.hist.numpy(), t.hist.numpy())
        assert g.hist.dtype is getattr(gc, dt)


def test_histogram_edges_weights_density_as_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, 1, 2, 3, 4, 10, 11, np.nan, np.inf, -1], np.float32)
    w = np.random.default_rng(1).uniform(0, 2, x.shape).astype(np.float32)
    e = np.array([0.0, 2, 3, 10], np.float32)
    for kw in ({}, {"density": True}):
        g = gc.histogram(gc.tensor(x), gc.tensor(e), weight=gc.tensor(w), **kw)
        t = torch.histogram(torch.tensor(x), torch.tensor(e), weight=torch.tensor(w), **kw)
        np.testing.assert_allclose(g.hist.numpy(), t.hist.numpy(), rtol=1e-6)
    # one value everywhere: the range widens by 0.5 each side; an empty input spans [0, 1]
    for x in (np.full(3, 2.0, np.float32), np.zeros(0, np.float32)):
        g, t = gc.histogram(gc.tensor(x), 4), torch.histogram(torch.tensor(x), 4)
        np.testing.assert_array_equal(g.bin_edges.numpy(), t.bin_edges.numpy())
        np.testing.assert_array_equal(g.hist.numpy(), t.hist.numpy())


def test_histogramdd_as_torch_and_numpy():
    torch = pytest.importorskip("torch")
    x = _rand(200, 3, seed=2, dt=np.float64)
    w = np.random.default_rng(3).uniform(0, 1, 200)
    e = [np.array([-3.0, 0, 3]), np.array([-2.0, -1, 0, 1, 2]), np.linspace(-3, 3, 4)]
    for bins in ([2, 3, 4], [gc.tensor(a) for a in e]):
        tb = bins if isinstance(bins[0], int) else [torch.tensor(a) for a in e]
        for kw in ({}, {"density": True}):
            g = gc.histogramdd(gc.tensor(x), bins, weight=gc.tensor(w), **kw)
            t = torch.histogramdd(torch.tensor(x), tb, weight=torch.tensor(w), **kw)
            np.testing.assert_allclose(g.hist.numpy(), t.hist.numpy(), rtol=1e-12)
            for ge, te in zip(g.bin_edges, t.bin_edges):
                np.testing.assert_allclose(ge.numpy(), te.numpy(), rtol=1e-15)
    want, _ = np.histogramdd(x, bins=e, weights=w)
    got = gc.histogramdd(gc.tensor(x), [gc.tensor(a) for a in e], weight=gc.tensor(w)).hist
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    g = gc.histogramdd(gc.tensor(x[:, :2]), bins=2, range=[0.0, 1.0, 0.0, 3.0])
    t = torch.histogramdd(torch.tensor(x[:, :2]), bins=2, range=[0.0, 1.0, 0.0, 3.0])
    np.testing.assert_array_equal(g.hist.numpy(), t.hist.numpy())


def test_histogram_of_a_range_that_collapses_in_the_dtype_counts_every_value():
    # 1e10 +- 0.5 rounds to 1e10 in float32: every edge is 1e10 (as PyTorch's), the values are
    # counted once, in the last bin (PyTorch's own bin there comes from a 0 / 0 position)
    x = np.full(3, 1e10, np.float32)
    hist, edges = gc.histogram(gc.tensor(x), 4)
    np.testing.assert_array_equal(edges.numpy(), np.full(5, 1e10, np.float32))
    np.testing.assert_array_equal(hist.numpy(), [0, 0, 0, 3])
    hist, _ = gc.histogram(gc.tensor(np.full(2, 1e8, np.float32)), 10, range=(1e8, 1e8 + 1))
    assert hist.numpy().sum() == 2
    dd = gc.histogramdd(gc.tensor(np.array([[1e10, 1.0], [1e10, 2.0]], np.float32)), [3, 2])
    np.testing.assert_array_equal(dd[0].numpy(), [[0, 0], [0, 0], [1, 1]])


def test_histogram_errors():
    x = gc.tensor([1.0, 2.0])
    with pytest.raises(gc.DTypeError, match="histogram"):
        gc.histogram(gc.tensor([1, 2]), 3)
    with pytest.raises(ValueError, match="histogram"):
        gc.histogram(x, 0)
    with pytest.raises(ValueError, match="not finite"):
        gc.histogram(gc.tensor([1.0, float("nan")]), 3)
    with pytest.raises(ValueError, match="histogram"):
        gc.histogram(x, 3, range=(2.0, 1.0))
    with pytest.raises(gc.ShapeError, match="weight"):
        gc.histogram(x, 3, weight=gc.ones(3))
    with pytest.raises(ValueError, match="monotonically"):
        gc.histogram(x, gc.tensor([3.0, 1.0]))
    with pytest.raises(TypeError, match="histogramdd"):
        gc.histogramdd(gc.rand(4, 2), [2, 2, 2])


def test_mode_as_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    for x in (rng.integers(0, 4, (5, 9)), np.round(rng.uniform(-2, 2, (3, 4, 6)))):
        for dim in range(-x.ndim, x.ndim):
            for keepdim in (False, True):
                g = gc.mode(gc.tensor(x), dim, keepdim)
                t = torch.mode(torch.tensor(x), dim, keepdim)
                np.testing.assert_array_equal(g.values.numpy(), t.values.numpy())
                np.testing.assert_array_equal(g.indices.numpy(), t.indices.numpy())
    g, t = gc.tensor([5.0, 1.0, 5.0, 1.0]).mode(), torch.tensor([5.0, 1.0, 5.0, 1.0]).mode()
    assert (g.values.item(), g.indices.item()) == (t.values.item(), t.indices.item())
    g, t = gc.mode(gc.tensor(3.0)), torch.mode(torch.tensor(3.0))
    assert (g.values.item(), g.indices.item()) == (t.values.item(), t.indices.item())


def test_mode_gradient_as_torch():
    torch = pytest.importorskip("torch")
    x = np.round(np.random.default_rng(5).uniform(-2, 2, (4, 7)))
    gx = gc.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    w = np.linspace(-1, 1, 4)
    (gc.mode(gx, 1).values * gc.tensor(w)).sum().backward()
    (torch.mode(tx, 1).values * torch.tensor(w)).sum().backward()
    np.testing.assert_array_equal(gx.grad.numpy(), tx.grad.numpy())


def test_mode_errors():
    with pytest.raises(IndexError, match="mode"):
        gc.mode(gc.rand(3, 4), 2)
    with pytest.raises(gc.ShapeError, match="mode"):
        gc.mode(gc.rand(3, 0), 1)


def test_on_vulkan_the_cpu_answers(vulkan):
    x = _rand(300, seed=6)
    with gc.device_policy("cpu"):
        h = gc.histogram(gc.tensor(x), 5).hist.numpy()
        m = gc.mode(gc.tensor(np.round(x).reshape(30, 10)), 1).values.numpy()
    np.testing.assert_array_equal(gc.histogram(gc.tensor(x, device="vulkan"), 5).hist.numpy(), h)
    got = gc.mode(gc.tensor(np.round(x).reshape(30, 10), device="vulkan"), 1).values
    np.testing.assert_array_equal(got.numpy(), m)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_large_histograms_as_torch(dt):
    """One pass of cpu/histogram.c over more than one chunk of points: counts equal to
    PyTorch's bit for bit (equal-width, edge tensors, histc), weighted sums to rounding; NaN, inf
    and values on every edge."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(300_001).astype(dt)
    edges = np.linspace(-2, 2, 33).astype(dt)
    x[:40] = edges.repeat(2)[:40]
    x[40:44] = [np.nan, np.inf, -np.inf, 4.0]
    w = rng.uniform(0, 1, x.size).astype(dt)
    gx, tx = gc.tensor(x), torch.tensor(x)
    for bins in (100, 7):
        for kw in ({"range": (-2.0, 2.0)}, {"range": (-0.3, 1.7)}):
            g, t = gc.histogram(gx, bins, **kw), torch.histogram(tx, bins, **kw)
            np.testing.assert_array_equal(g.hist.numpy(), t.hist.numpy())
            g = gc.histogram(gx, bins, weight=gc.tensor(w), **kw)
            t = torch.histogram(tx, bins, weight=torch.tensor(w), **kw)
            np.testing.assert_allclose(g.hist.numpy(), t.hist.numpy(), rtol=1e-5)
    g, t = gc.histogram(gx, gc.tensor(edges)), torch.histogram(tx, torch.tensor(edges))
    np.testing.assert_array_equal(g.hist.numpy(), t.hist.numpy())
    for bins, lo, hi in ((100, -2, 2), (13, -0.7, 3.1)):
        g, t = gc.histc(gx, bins, lo, hi), torch.histc(tx, bins, lo, hi)
        np.testing.assert_array_equal(g.numpy(), t.numpy())
    fin = x[np.isfinite(x)]
    g, t = gc.histc(gc.tensor(fin), 50), torch.histc(torch.tensor(fin), 50)
    np.testing.assert_array_equal(g.numpy(), t.numpy())
    p = rng.uniform(-1, 1, (100_000, 3)).astype(dt)
    g, t = gc.histogramdd(gc.tensor(p), 5), torch.histogramdd(torch.tensor(p), [5, 5, 5])
    np.testing.assert_array_equal(g.hist.numpy(), t.hist.numpy())
