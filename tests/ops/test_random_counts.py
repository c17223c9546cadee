"""poisson and binomial (gpucore/ops/random_counts.py): reproducible from the generator, the
distributions' moments, dtypes, broadcasting, gradients, errors, device tensors."""

import numpy as np
import pytest

import gpucore as gc


def test_reproducible_and_generator():
    rate = gc.tensor([0.5, 3.0, 40.0, 0.0])
    gc.manual_seed(3)
    a = gc.poisson(rate)
    gc.manual_seed(3)
    assert gc.poisson(rate).tolist() == a.tolist()
    assert a[3].item() == 0.0
    g = gc.Generator().manual_seed(3)
    b = gc.poisson(rate, generator=g)
    assert b.tolist() == a.tolist()  # the default generator seeded alike: the same stream
    c1 = gc.binomial(gc.full((50,), 10.0), gc.full((50,), 0.3))
    c2 = gc.binomial(gc.full((50,), 10.0), gc.full((50,), 0.3))
    assert c1.tolist() != c2.tolist()  # successive draws differ


def test_poisson_moments():
    gc.manual_seed(0)
    for lam in (0.3, 4.0, 60.0):
        x = gc.poisson(gc.full((20000,), lam, dtype=gc.float64)).numpy()
        assert np.all(x == np.round(x)) and x.min() >= 0
        assert abs(x.mean() - lam) < 5 * np.sqrt(lam / x.size)
        assert abs(x.var() / lam - 1) < 0.06


def test_binomial_moments_and_broadcasting():
    gc.manual_seed(1)
    n = gc.tensor([[5.0], [40.0]])
    p = gc.full((2, 10000), 0.25)
    x = gc.binomial(n.expand(2, 10000).contiguous(), p).numpy()
    for row, k in zip(x, (5, 40)):
        assert row.min() >= 0 and row.max() <= k
        assert abs(row.mean() - k * 0.25) < 5 * np.sqrt(k * 0.25 * 0.75 / row.size)
    assert tuple(gc.binomial(gc.tensor([10.0, 5.0]), gc.tensor([0.5])).shape) == (2,)
    assert gc.binomial(gc.tensor([7.0]), gc.tensor([1.0])).item() == 7.0
    assert gc.binomial(gc.tensor([7.0]), gc.tensor([0.0])).item() == 0.0


def test_dtypes_grad_and_errors_as_torch():
    torch = pytest.importorskip("torch")
    for dt in ("float32", "float64"):
        assert gc.poisson(gc.ones(3, dtype=getattr(gc, dt))).dtype is getattr(gc, dt)
    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = gc.poisson(x)
    assert (
        y.requires_grad == torch.poisson(torch.tensor([1.0, 2.0], requires_grad=True)).requires_grad
    )
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]
    with pytest.raises(gc.DTypeError, match="poisson"):
        gc.poisson(gc.tensor([1, 5]))
    with pytest.raises(ValueError, match="poisson"):
        gc.poisson(gc.tensor([-1.0]))
    with pytest.raises(gc.DTypeError, match="binomial"):
        gc.binomial(gc.tensor([10, 5]), gc.tensor([0.5, 0.5]))


def test_on_vulkan(vulkan):
    gc.manual_seed(5)
    with gc.device_policy("cpu"):
        want = gc.poisson(gc.tensor([1.0, 8.0, 30.0])).numpy()
    gc.manual_seed(5)
    got = gc.poisson(gc.tensor([1.0, 8.0, 30.0], device="vulkan"))
    assert got.device.type == "vulkan"
    np.testing.assert_array_equal(got.numpy(), want)


def test_calls_have_disjoint_streams():
    # numpy's gamma/binomial rejection samplers draw an unbounded number of words; with a shared
    # counter stream a call at offset o could run on into the words of the call at o + 1
    # (correlated draws). Each (seed, offset) must key its own stream: the raw words of the call
    # at o + 1 never reappear in the first words of the call at o.
    from gpucore.backends.cpu.kernels.random_counts import counts_rng

    for seed in (0, 1, 12345, (1 << 64) - 1):
        for offset in (0, 7, (1 << 64) - 2):
            here = counts_rng(seed, offset).bit_generator.random_raw(64).tolist()
            nxt = counts_rng(seed, offset + 1).bit_generator.random_raw(2).tolist()
            assert not set(nxt) & set(here)
    # and a scalar gamma call that rejects many times is still a function of its own key only
    gc.manual_seed(5)
    a = gc.ops.random_counts.standard_gamma_sample(gc.tensor([0.05], dtype=gc.float64))
    gc.manual_seed(5)
    b = gc.ops.random_counts.standard_gamma_sample(gc.tensor([0.05], dtype=gc.float64))
    assert a.tolist() == b.tolist()
