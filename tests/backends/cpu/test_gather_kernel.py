"""gpucore._cpu.gather (cpu/gather.c through cpu/python/gather.c): torch.gather's rule over any
strides and item sizes, against numpy's take_along_axis; bad calls raise, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import _cpu as C


def _reference(x, index, dim):
    sl = tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(index.shape))
    return np.take_along_axis(x[sl], index, axis=dim)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.float16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_matches_take_along_axis(dtype, dim):
    rng = np.random.default_rng(dim)
    x = (rng.standard_normal((4, 5, 6)) * 50).astype(dtype)
    shape = [3, 4, 5]
    shape[dim] = 7  # along the dim the index may be longer than x
    index = rng.integers(0, x.shape[dim], shape)
    out = np.zeros(shape, dtype)
    C.gather(x, index, out, dim)
    np.testing.assert_array_equal(out, _reference(x, index, dim))


def test_strided_operands():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 8))[::-2, 1::2]  # negative and skipping strides
    index = rng.integers(0, 3, (4, 2)).T  # transposed
    out = np.zeros((4, 2)).T  # a transposed (F-order) output
    C.gather(x, index, out, 0)
    np.testing.assert_array_equal(out, _reference(x, index, 0))
    rows = rng.integers(0, 3, 5)
    emb = np.zeros((5, 3))
    C.gather(x, np.broadcast_to(rows[:, None], (5, 3)), emb, 0)  # an embedding lookup
    np.testing.assert_array_equal(emb, x[rows, :3])


def test_empty():
    out = np.zeros((0, 3))
    C.gather(np.ones((2, 3)), np.zeros((0, 3), np.int64), out, 0)


@pytest.mark.parametrize("bad", [-1, 5])
def test_index_out_of_range_raises(bad):
    index = np.array([[0, bad]])
    with pytest.raises(IndexError, match=r"gather\(\): index values must be in \[0, 5\)"):
        C.gather(np.ones((5, 2)), index, np.zeros((1, 2)), 0)


def test_bad_calls():
    x, out = np.ones((3, 4)), np.zeros((3, 4))
    ix = np.zeros((3, 4), np.int64)
    with pytest.raises(TypeError, match="gather: 'index' must be int64"):
        C.gather(x, ix.astype(np.int32), out, 0)
    with pytest.raises(TypeError, match="one plain format"):
        C.gather(x, ix, out.astype(np.float32), 0)
    with pytest.raises(ValueError, match=r"x \(3, 4\), index \(3, 4\), out \(3, 5\) along dim 0"):
        C.gather(x, ix, np.zeros((3, 5)), 0)
    with pytest.raises(ValueError, match="along dim 2"):
        C.gather(x, ix, out, 2)
    with pytest.raises(ValueError, match=r"index \(3, 5\)"):  # wider than x off the dim
        C.gather(x, np.zeros((3, 5), np.int64), np.zeros((3, 5)), 0)
    with pytest.raises(ValueError, match="overlap"):
        C.gather(x, ix, x, 0)
    ro = np.zeros((3, 4))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        C.gather(x, ix, ro, 0)
    with pytest.raises(TypeError):
        C.gather(x, ix, out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_index_add_rows_matches_add_at_bitwise(dtype):
    """index_add_rows (embedding's and index_select's gradient): numpy's add.at bit for bit,
    repeated and negative indices included."""
    rng = np.random.default_rng(2)
    src = rng.standard_normal((300, 5, 7)).astype(dtype)
    index = rng.integers(-20, 20, 300)
    want = np.zeros((20, 5, 7), dtype)
    np.add.at(want, (index,), src)
    out = np.zeros((20, 5, 7), dtype)
    C.index_add_rows(out, index, src)
    np.testing.assert_array_equal(out, want)
    C.index_add_rows(out[:0].copy(), index[:0], src[:0])  # nothing to add


def test_index_add_rows_bad_calls():
    out, src = np.zeros((4, 3), np.float32), np.ones((2, 3), np.float32)
    with pytest.raises(IndexError, match="index 4 is out of range for 4 rows"):
        C.index_add_rows(out, np.array([0, 4]), src)
    with pytest.raises(IndexError, match="-5"):
        C.index_add_rows(out, np.array([-5, 0]), src)
    with pytest.raises(ValueError, match="trailing dims"):
        C.index_add_rows(out, np.array([0, 1]), np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="src"):
        C.index_add_rows(out, np.array([0, 1]), np.ones((2, 3)))
    with pytest.raises(TypeError, match="index"):
        C.index_add_rows(out, np.array([0, 1], np.int32), src)
    with pytest.raises(ValueError, match="out"):
        C.index_add_rows(out, np.array([0, 1]), out[:2])  # src inside out
