"""Integer matmul / mm / bmm / mv / dot / @ (cpu/igemm.c): PyTorch's wrap-around for every
integer dtype against an exact int64 (Python-int) reference and against torch, broadcasting,
1-D operands, transposed and broadcast views, bool refused, the kernel's own checks, and device
tensors (the host kernel's bits)."""

import numpy as np
import pytest

import gpucore as gc
from gpucore.errors import DTypeError

_INTS = ["uint8", "int8", "int16", "int32", "int64"]


def _ref(a: np.ndarray, b: np.ndarray, dt: str) -> np.ndarray:
    """The exact product (Python ints: no overflow anywhere) wrapped to dt."""
    exact = np.einsum("...ik,...kj->...ij", a.astype(object), b.astype(object))
    bits = np.dtype(dt).itemsize * 8
    wrapped = np.vectorize(lambda v: int(v) % (1 << bits), otypes=[object])(exact)
    return wrapped.astype(np.uint64).astype(np.dtype(dt))


def _ints(dt, *shape, seed):
    info = np.iinfo(np.dtype(dt))
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
    return np.random.default_rng(seed).integers(lo, hi, shape, dtype=np.int64, endpoint=True)


@pytest.mark.parametrize("dt", _INTS)
@pytest.mark.parametrize(
    "sa, sb", [((3, 5), (5, 4)), ((2, 3, 300), (2, 300, 270)), ((4, 1, 2, 7), (3, 7, 2))]
)
def test_integer_matmul_wraps_exactly(dt, sa, sb):
    a = _ints(dt, *sa, seed=1).astype(dt)
    b = _ints(dt, *sb, seed=2).astype(dt)
    got = gc.tensor(a) @ gc.tensor(b)
    assert got.dtype is getattr(gc, dt)
    np.testing.assert_array_equal(got.numpy(), _ref(a, b, dt))


@pytest.mark.parametrize("dt", _INTS)
def test_integer_forms_and_views(dt):
    a = _ints(dt, 6, 9, seed=3).astype(dt)
    b = _ints(dt, 9, 6, seed=4).astype(dt)
    v = _ints(dt, 9, seed=5).astype(dt)
    ta, tb, tv = gc.tensor(a), gc.tensor(b), gc.tensor(v)
    np.testing.assert_array_equal(gc.mm(ta, tb).numpy(), _ref(a, b, dt))
    np.testing.assert_array_equal(gc.mv(ta, tv).numpy(), _ref(a, v[:, None], dt)[:, 0])
    np.testing.assert_array_equal(gc.dot(tv, tv).numpy(), _ref(v[None], v[:, None], dt)[0, 0])
    np.testing.assert_array_equal((tv @ tb).numpy(), _ref(v[None], b, dt)[0])
    # transposed and expanded operands
    np.testing.assert_array_equal((tb.mT @ ta.mT).numpy(), _ref(b.T, a.T, dt))
    bb = tb.unsqueeze(0).expand(3, 9, 6)
    np.testing.assert_array_equal(
        gc.bmm(ta.unsqueeze(0).expand(3, 6, 9), bb).numpy(),
        np.broadcast_to(_ref(a, b, dt), (3, 6, 6)),
    )
    assert gc.dot(tv, tv).dtype is getattr(gc, dt) and gc.dot(tv, tv).ndim == 0


def test_empty_and_k_zero():
    z = gc.zeros(3, 0, dtype=gc.int32) @ gc.zeros(0, 4, dtype=gc.int32)
    assert z.dtype is gc.int32 and z.numpy().tolist() == [[0] * 4] * 3
    assert (gc.zeros(0, 5, dtype=gc.int8) @ gc.zeros(5, 2, dtype=gc.int8)).shape == (0, 2)


def test_against_torch():
    torch = pytest.importorskip("torch")
    from helpers import same_as_torch

    for dt in _INTS:
        a = _ints(dt, 2, 4, 33, seed=6).astype(dt)
        b = _ints(dt, 2, 33, 5, seed=7).astype(dt)
        same_as_torch(gc.tensor(a) @ gc.tensor(b), torch.from_numpy(a) @ torch.from_numpy(b))
        same_as_torch(
            gc.bmm(gc.tensor(a), gc.tensor(b)), torch.bmm(torch.from_numpy(a), torch.from_numpy(b))
        )
        same_as_torch(
            gc.dot(gc.tensor(a[0, 0]), gc.tensor(a[1, 1])),
            torch.dot(torch.from_numpy(a[0, 0]), torch.from_numpy(a[1, 1])),
        )
        same_as_torch(
            gc.mv(gc.tensor(a[0]), gc.tensor(b[0, :, 0].copy())),
            torch.mv(torch.from_numpy(a[0]), torch.from_numpy(b[0, :, 0].copy())),
        )


def test_bool_refused():
    t = gc.tensor([[True, False]])
    with pytest.raises(DTypeError, match="bool"):
        t @ t.mT
    with pytest.raises(DTypeError, match="bool"):
        gc.dot(gc.tensor([True]), gc.tensor([True]))


def test_kernel_checks_its_buffers():
    from gpucore import _cpu

    a = np.ones(6, np.int32)
    b = np.ones(6, np.int32)
    c = np.empty(4, np.int32)
    _cpu.igemm(a, b, c, 1, 2, 2, 3, 0, 0, 4)
    assert c.tolist() == [3, 3, 3, 3]
    with pytest.raises(ValueError, match="'a'"):
        _cpu.igemm(a, b, c, 2, 2, 2, 3, 6, 0, 4)  # a holds one item, two asked for
    with pytest.raises(ValueError, match="'c'"):
        _cpu.igemm(a, b, c, 2, 2, 2, 3, 0, 0, 4)
    with pytest.raises(ValueError, match="overlap"):
        _cpu.igemm(a, b, np.empty(8, np.int32), 2, 2, 2, 3, 0, 0, 2)
    with pytest.raises(TypeError, match="format"):
        _cpu.igemm(a, b.astype(np.int64), c, 1, 2, 2, 3, 0, 0, 4)
    with pytest.raises(TypeError):
        _cpu.igemm(
            a.astype(np.float32), b.astype(np.float32), c.astype(np.float32), 1, 2, 2, 3, 0, 0, 4
        )
    with pytest.raises(ValueError):
        _cpu.igemm(a, b, a, 1, 2, 2, 3, 0, 0, 4)  # c overlaps a


def test_device_tensors_give_the_host_bits(vulkan):
    for dt in ("int8", "int32", "int64", "uint8"):
        a = _ints(dt, 3, 40, 50, seed=8).astype(dt)
        b = _ints(dt, 3, 50, 30, seed=9).astype(dt)
        got = gc.tensor(a).to("vulkan") @ gc.tensor(b).to("vulkan")
        np.testing.assert_array_equal(got.numpy(force=True), _ref(a, b, dt))
