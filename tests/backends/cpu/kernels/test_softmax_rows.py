"""float32 softmax / log_softmax over the last dim, 4 rows at a time (cpu/softmax.c
softmax_rows, the ISA's vmax_expsum4_f32): every row must have the bits it has computed alone
(one row: the row-by-row path), whatever the row count, row length (vector blocks, tails,
chunks of GC_SM_CHUNK) or thread count; and the values of a float64 reference, NaN / inf / -inf
rows included; the Tensor forms on strided inputs and each dim agree with that reference."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_ext import C

import gpucore
import gpucore.nn.functional as F


def np_softmax(x, axis, log):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.nanmax(np.where(np.isnan(x), -np.inf, x), axis, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis, keepdims=True)
        return (x - m) - np.log(s) if log else e / s


def _kernel(x, log):
    out = np.empty_like(x)
    C.softmax(x, out, x.shape[0], x.shape[1], 1, log)
    return out


def _rows(n_rows, n, seed):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n_rows, n)) * 4).astype(np.float32)


@pytest.mark.parametrize("log", [0, 1])
@pytest.mark.parametrize("n", [1, 3, 15, 16, 17, 32, 33, 64, 65, 100, 128, 129, 300])
def test_each_row_has_its_bits_alone(n, log):
    x = _rows(11, n, seed=n)
    # special rows: a tie at the max, +-0, NaN, +inf, -inf, all -inf
    x[1, :] = 2.5
    x[2, : (n + 1) // 2] = -0.0
    x[2, (n + 1) // 2 :] = 0.0
    x[3, n // 2] = np.nan
    x[5, n - 1] = np.inf
    x[6, 0] = -np.inf
    x[7, :] = -np.inf
    alone = np.concatenate([_kernel(x[i : i + 1], log) for i in range(len(x))])
    for rows in range(1, len(x) + 1):  # groups of 4 and remainders
        np.testing.assert_array_equal(_kernel(x[:rows], log), alone[:rows], err_msg=str(rows))
    with np.errstate(invalid="ignore"):
        want = np_softmax(x, 1, log)
    np.testing.assert_allclose(alone, want, rtol=2e-6, atol=2e-6)
    assert np.isnan(alone[3]).all() and np.isnan(alone[5]).all() and np.isnan(alone[7]).all()
    if n > 1:  # (n == 1: row 6 is all -inf too)
        assert not np.isnan(alone[6]).any() and alone[6, 0] == (-np.inf if log else 0.0)
    C.softmax(x, x, x.shape[0], n, 1, log)  # in place: the same bits
    np.testing.assert_array_equal(x, alone)


@pytest.mark.parametrize("log", [0, 1])
def test_bits_do_not_depend_on_the_thread_count(log):
    x = _rows(4099, 64, seed=3)  # enough work for the pool to split the rows unevenly
    old = gpucore.get_num_threads()
    try:
        gpucore.set_num_threads(1)
        one = _kernel(x, log)
        gpucore.set_num_threads(max(2, old))
        many = _kernel(x, log)
    finally:
        gpucore.set_num_threads(old)
    np.testing.assert_array_equal(one, many)


@pytest.mark.parametrize("dt", [gpucore.float32, gpucore.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("log", [False, True])
def test_tensor_forms_on_strided_inputs_and_each_dim(dt, log):
    a = np.random.default_rng(5).standard_normal((6, 9, 10)) * 3
    a[0, 0, 0], a[1, 2, :] = np.nan, -np.inf
    a[2, :, 3] = np.inf
    fn = F.log_softmax if log else F.softmax
    views = [
        (lambda t: t, lambda v: v),
        (lambda t: t.transpose(0, 2), lambda v: v.transpose(2, 1, 0)),
        (lambda t: t[:, ::2, 1:], lambda v: v[:, ::2, 1:]),
    ]
    for view, np_view in views:
        x = view(gpucore.tensor(a, dtype=dt))
        base = np_view(a).astype(dt.np).astype(np.float64)
        for dim in range(-3, 3):
            got = fn(x, dim).numpy()
            want = np_softmax(base, dim, log)
            tol = 2e-6 if dt is gpucore.float32 else 1e-13
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"dim {dim}")
