"""multinomial and randperm: drawn from gpucore's generator (manual_seed and generator= make
them reproducible), distributions as PyTorch's (frequencies, without-replacement uniqueness,
zero weights never drawn), dtypes, devices and errors."""

import numpy as np
import pytest

import gpucore


def test_multinomial_is_reproducible_and_uses_the_generator():
    p = gpucore.tensor([0.1, 0.2, 0.3, 0.4])
    gpucore.manual_seed(5)
    a = gpucore.multinomial(p, 20, replacement=True)
    gpucore.manual_seed(5)
    b = p.multinomial(20, True)
    assert a.tolist() == b.tolist() and a.dtype is gpucore.int64 and a.shape == (20,)
    g = gpucore.Generator().manual_seed(5) if hasattr(gpucore, "Generator") else None
    if g is not None:
        assert gpucore.multinomial(p, 20, True, generator=g).tolist() == a.tolist()
    assert gpucore.multinomial(p, 20, True).tolist() != a.tolist()  # the stream moved on


def test_multinomial_frequencies_with_replacement():
    gpucore.manual_seed(0)
    p = np.array([0.1, 0.0, 0.5, 0.4])
    draws = gpucore.multinomial(gpucore.tensor(p * 3), 200_000, replacement=True).numpy()
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, p, atol=0.005)
    assert freq[1] == 0


def test_multinomial_without_replacement():
    gpucore.manual_seed(1)
    w = gpucore.tensor([[1.0, 0.0, 2.0, 3.0, 0.5], [0.0, 0.0, 1.0, 1.0, 1.0]])
    for _ in range(20):
        out = w.multinomial(3).numpy()
        assert out.shape == (2, 3)
        for row, weights in zip(out, w.numpy()):
            assert len(set(row)) == 3 and all(weights[row] > 0)
    # first draws follow the weights; later draws the weights of what remains (as PyTorch)
    first = np.array([w[0:1].multinomial(2)[0, 0].item() for _ in range(4000)])
    np.testing.assert_allclose(
        np.bincount(first, minlength=5) / 4000, w.numpy()[0] / 6.5, atol=0.03
    )
    second = gpucore.multinomial(gpucore.tensor([1.0, 1.0]), 2).tolist()
    assert sorted(second) == [0, 1]


def test_multinomial_errors():
    with pytest.raises(ValueError, match="multinomial.*without replacement"):
        gpucore.multinomial(gpucore.tensor([0.5, 0.5]), 3)
    with pytest.raises(ValueError, match="multinomial.*element < 0"):
        gpucore.multinomial(gpucore.tensor([0.5, -0.5]), 1)
    with pytest.raises(ValueError, match="multinomial.*sum"):
        gpucore.multinomial(gpucore.tensor([0.0, 0.0]), 1, True)
    with pytest.raises(ValueError, match="multinomial.*fewer non-zero"):
        gpucore.multinomial(gpucore.tensor([0.0, 1.0, 0.0]), 2)
    with pytest.raises(ValueError, match="multinomial.*1-D or 2-D"):
        gpucore.multinomial(gpucore.ones(2, 2, 2), 1)
    with pytest.raises(TypeError, match="multinomial.*float"):
        gpucore.multinomial(gpucore.tensor([1, 2]), 1)


def test_randperm():
    gpucore.manual_seed(3)
    a = gpucore.randperm(50)
    gpucore.manual_seed(3)
    b = gpucore.randperm(50)
    assert a.tolist() == b.tolist() and sorted(a.tolist()) == list(range(50))
    assert a.dtype is gpucore.int64 and a.tolist() != list(range(50))
    assert gpucore.randperm(0).shape == (0,)
    assert gpucore.randperm(5, dtype=gpucore.float32).dtype is gpucore.float32
    assert gpucore.randperm(4, dtype=gpucore.int32).dtype is gpucore.int32
    counts = np.zeros((4, 4))
    for _ in range(2000):
        counts[np.arange(4), gpucore.randperm(4).numpy()] += 1
    np.testing.assert_allclose(counts / 2000, 0.25, atol=0.05)  # each place uniform
    with pytest.raises(ValueError, match="randperm"):
        gpucore.randperm(-1)


def test_multinomial_and_randperm_on_vulkan(vulkan):
    p = gpucore.tensor([0.2, 0.8], device="vulkan")
    gpucore.manual_seed(2)
    a = gpucore.multinomial(p, 10, True)
    assert a.device.type == "vulkan"
    gpucore.manual_seed(2)
    b = gpucore.multinomial(p.cpu(), 10, True)
    assert a.tolist() == b.tolist()
    assert gpucore.randperm(5, device="vulkan").device.type == "vulkan"


def test_multinomial_low_precision_weights():
    for dt in (gpucore.float16, gpucore.bfloat16):
        w = gpucore.tensor([0.0, 0.25, 0.75]).to(dt)
        out = gpucore.multinomial(w, 50, True).numpy()
        assert set(out) <= {1, 2}
        with pytest.raises(ValueError, match="element < 0"):
            gpucore.multinomial(gpucore.tensor([-0.5, 1.0]).to(dt), 1)
