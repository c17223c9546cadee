"""Kernels of gpucore/ops/decompositions.py over batched matrices (float32 and float64; a
failure, such as a singular matrix, raises LinAlgError naming the op): inv and solve by
cpu/trsm.c's LU and triangular solves (trsm.py's lu_solve), the others by numpy's LAPACK."""

from __future__ import annotations

import numpy as np

from ....errors import LinAlgError
from .common import kernel
from .trsm import lu_solve


def _lapack(op: str, fn, *args, **kw):
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kw)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(f"linalg.{op}: {e} (the input matrix is singular or not valid)") from e


@kernel("linalg_inv")
def _inv(out, a):
    if a.size:
        n = a.shape[-1]
        eye = np.broadcast_to(np.eye(n, dtype=a.dtype), a.shape)
        np.copyto(out, lu_solve("inv", a, eye).reshape(out.shape))


@kernel("linalg_solve")
def _solve(out, a, b):
    if out.size:
        np.copyto(out, lu_solve("solve", a, b).reshape(out.shape))


@kernel("linalg_det")
def _det(out, a):
    np.copyto(out, np.linalg.det(a) if a.shape[-1] else 1.0, casting="unsafe")


@kernel("linalg_slogdet")
def _slogdet(outs, a):
    logabs, sign = outs
    s, la = np.linalg.slogdet(a) if a.shape[-1] else (1.0, 0.0)
    np.copyto(sign, s, casting="unsafe")
    np.copyto(logabs, la, casting="unsafe")


@kernel("linalg_cholesky")
def _cholesky(out, a):
    if a.size:
        np.copyto(out, _lapack("cholesky", np.linalg.cholesky, a), casting="unsafe")


def _pack(out, *parts):
    """The parts, each flattened after the batch dims, side by side in out [..., total]."""
    start = 0
    for p in parts:
        n = int(np.prod(p.shape[out.ndim - 1 :], dtype=np.int64))
        out[..., start : start + n] = p.reshape(out.shape[:-1] + (n,))
        start += n


@kernel("linalg_qr")
def _qr(out, a, mode):
    if a.size == 0:
        out[...] = 0
        return
    _pack(out, *_lapack("qr", np.linalg.qr, a, mode=mode))


@kernel("linalg_svd")
def _svd(out, a, full_matrices, shape):
    if a.size == 0:
        out[...] = 0
        return
    _pack(out, *_lapack("svd", np.linalg.svd, a, full_matrices=full_matrices))


@kernel("linalg_eigh")
def _eigh(out, a, uplo, n):
    if a.size == 0:
        out[...] = 0
        return
    _pack(out, *_lapack("eigh", np.linalg.eigh, a, UPLO=uplo))
