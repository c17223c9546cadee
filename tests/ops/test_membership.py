"""isin (gpucore/ops/membership.py, cpu/isin.c): against torch.isin and numpy.isin, both sides
as tensors or numbers, dtype promotion, NaN and signed zeros, the sorted and the direct path,
invert, bad arguments, and the Vulkan composition against the CPU kernel."""

import numpy as np
import pytest

import gpucore as gc
from gpucore.errors import ArgumentTypeError, DTypeError

_INTS = ["uint8", "int8", "int16", "int32", "int64"]
_FLOATS = ["float16", "bfloat16", "float32", "float64"]


def _pair(dt, n, m, seed):
    rng = np.random.default_rng(seed)
    hi = 100 if dt != "uint8" else 200
    lo = 0 if dt == "uint8" else -hi
    e = rng.integers(lo, hi, n)
    t = rng.integers(lo, hi, m)
    return e, t


@pytest.mark.parametrize("dt", _INTS + _FLOATS)
@pytest.mark.parametrize("m", [0, 1, 5, 12, 13, 300])  # direct up to 12, sorted above
@pytest.mark.parametrize("invert", [False, True])
def test_isin_matches_numpy(dt, m, invert):
    e, t = _pair(dt, 257, m, seed=m)
    want = np.isin(e, t, invert=invert)
    ge = gc.tensor(e).to(getattr(gc, dt)).reshape(257)
    gt = gc.tensor(t).to(getattr(gc, dt))
    got = gc.isin(ge, gt, invert=invert)
    assert got.dtype is gc.bool and tuple(got.shape) == (257,)
    np.testing.assert_array_equal(got.numpy(), want)


def test_isin_nan_and_signed_zero():
    nan = float("nan")
    e = gc.tensor([nan, 0.0, -0.0, 1.5, float("inf"), -float("inf")])
    for t in ([nan, 0.0], [nan] * 20 + [-0.0, float("inf")] + list(range(20))):
        got = gc.isin(e, gc.tensor(t)).numpy()
        want = [False, True, True, False, float("inf") in t, False]
        np.testing.assert_array_equal(got, want)


def test_isin_shapes_and_strides():
    e = gc.arange(24).reshape(2, 3, 4).permute(2, 0, 1)  # not contiguous
    t = gc.tensor([[3, 7], [100, 11]])[:, :1]  # 2-D, strided
    got = gc.isin(e, t)
    np.testing.assert_array_equal(got.numpy(), np.isin(e.numpy(), [3, 100]))
    assert tuple(got.shape) == (4, 2, 3)
    assert gc.isin(gc.zeros(0, 3), gc.tensor([0.0])).shape == (0, 3)


def test_isin_against_torch():
    torch = pytest.importorskip("torch")
    from helpers import same_as_torch

    cases = [
        (lambda m: m.tensor([1, 2, 3]), lambda m: m.tensor([2.5, 3.0])),
        (lambda m: 3, lambda m: m.tensor([1, 3])),
        (lambda m: m.tensor([1, 2]), lambda m: 2),
        (lambda m: m.tensor([1, 2]), lambda m: 2.5),
        (lambda m: m.tensor([1, 2], dtype=m.uint8), lambda m: m.tensor([-1, 2], dtype=m.int8)),
        (lambda m: m.tensor([300]), lambda m: m.tensor([44], dtype=m.uint8)),
        (lambda m: m.tensor([0.1]), lambda m: m.tensor([0.1], dtype=m.float64)),
        (lambda m: m.tensor([0.1, 2.0]), lambda m: m.tensor(0.1, dtype=m.float64)),
        (lambda m: m.tensor([1.0, 2.0], dtype=m.float16), lambda m: m.tensor([1])),
        (lambda m: m.tensor([[1, 2], [3, 4]]), lambda m: m.tensor([[4]])),
        (lambda m: m.tensor(5), lambda m: m.tensor([5, 6])),
    ]
    for e, t in cases:
        for invert in (False, True):
            ours = gc.isin(e(gc), t(gc), invert=invert, assume_unique=True)
            theirs = torch.isin(e(torch), t(torch), invert=invert, assume_unique=True)
            same_as_torch(ours, theirs)
            assert tuple(ours.shape) == tuple(theirs.shape)


def test_isin_bad_arguments():
    with pytest.raises(ArgumentTypeError, match="isin"):
        gc.isin(2, 3)
    with pytest.raises(ArgumentTypeError, match="isin"):
        gc.isin(gc.tensor([1]), [1])
    with pytest.raises(ArgumentTypeError, match="invert"):
        gc.isin(gc.tensor([1]), gc.tensor([1]), invert=1)
    with pytest.raises(DTypeError, match="bool"):
        gc.isin(gc.tensor([True]), gc.tensor([True]))
    with pytest.raises(DTypeError, match="bool"):
        gc.isin(gc.tensor([1, 2]), gc.tensor([True]))  # promotes to int64 in PyTorch: refused there
    assert not hasattr(gc.Tensor, "isin")  # PyTorch 2.13 has no Tensor.isin


def test_isin_kernel_checks_its_buffers():
    from gpucore import _cpu

    x = np.arange(4, dtype=np.float32)
    t = np.arange(3, dtype=np.float32)
    out = np.empty(4, np.bool_)
    with pytest.raises(ValueError, match="scratch"):
        _cpu.isin(x, t, np.empty(2, np.float32), out, 0)
    with pytest.raises(ValueError, match="out"):
        _cpu.isin(x, t, np.empty(3, np.float32), np.empty(3, np.bool_), 0)
    with pytest.raises(TypeError, match="format"):
        _cpu.isin(x, t.astype(np.float64), np.empty(3, np.float64), out, 0)
    with pytest.raises(ValueError, match="overlap|share"):
        _cpu.isin(x, t, t, out, 0)


@pytest.mark.parametrize("dt", ["float32", "int32", "int64", "uint8"])
def test_isin_on_vulkan_matches_cpu(vulkan, dt):
    e, t = _pair(dt, 5000, 40, seed=3)
    e_gc = gc.tensor(e).to(getattr(gc, dt))
    t_gc = gc.tensor(t).to(getattr(gc, dt))
    want = gc.isin(e_gc, t_gc, invert=True).numpy()
    got = gc.isin(e_gc.to("vulkan"), t_gc.to("vulkan"), invert=True)
    np.testing.assert_array_equal(got.numpy(force=True), want)
    nan = gc.tensor([float("nan"), -0.0, 1.0]).to("vulkan")
    np.testing.assert_array_equal(
        gc.isin(nan, gc.tensor([float("nan"), 0.0]).to("vulkan")).numpy(force=True),
        [False, True, False],
    )
