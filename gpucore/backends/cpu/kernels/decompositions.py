"""Kernels of gpucore/ops/decompositions.py over batched matrices (float32 and float64; a
failure, such as a singular matrix, raises LinAlgError naming the op): inv and solve by
cpu/trsm.c's LU and triangular solves (trsm.py's lu_solve), the others by numpy's LAPACK."""

from __future__ import annotations

import numpy as np

from ....errors import LinAlgError
from .common import kernel
from .trsm import lu_factor, lu_solve


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


@kernel("linalg_geqrf")
def _geqrf(outs, a):
    q, tau = outs
    if a.size == 0:
        q[...] = a
        tau[...] = 0
        return
    h, t = _lapack("geqrf", np.linalg.qr, a, mode="raw")  # LAPACK's geqrf, row-major transposed
    np.copyto(q, np.swapaxes(h, -1, -2), casting="unsafe")
    np.copyto(tau, t, casting="unsafe")


def getrf(a: np.ndarray) -> tuple:
    """(LU, 1-based pivots, info) of one m x n matrix by LAPACK's getrf rule: partial pivoting
    on the largest magnitude of each column (the first on ties), a zero pivot recorded in info
    and its column left uneliminated."""
    lu = a.astype(np.float64)
    m, n = lu.shape
    k = min(m, n)
    piv = np.zeros(k, np.int64)
    info = 0
    for j in range(k):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        piv[j] = p + 1
        if lu[p, j] == 0:
            info = info or j + 1
            continue
        if p != j:
            lu[[j, p]] = lu[[p, j]]
        lu[j + 1 :, j] /= lu[j, j]
        lu[j + 1 :, j + 1 :] -= np.outer(lu[j + 1 :, j], lu[j, j + 1 :])
    return lu, piv, info


def _swaps(perm: np.ndarray) -> np.ndarray:
    """LAPACK's 1-based row interchanges (ipiv) that apply the permutation ``perm`` (row i of
    P A is row perm[i] of A) one row at a time."""
    order = np.arange(perm.size)  # order[r]: the row of A now at position r
    where = np.arange(perm.size)  # where[i]: the position of A's row i
    ipiv = np.empty(perm.size, np.int64)
    for j, row in enumerate(perm.tolist()):
        p = int(where[row])
        ipiv[j] = p + 1
        order[j], order[p] = order[p], order[j]
        where[order[j]], where[order[p]] = j, p
    return ipiv


@kernel("linalg_lu_factor")
def _lu_factor(outs, a):
    lu, pivots, info = outs
    m, n = a.shape[-2:]
    nb = int(np.prod(a.shape[:-2], dtype=np.int64))
    if m == n and a.dtype in (np.float32, np.float64):  # square: cpu/trsm.c's LU in a's dtype
        f, perm, codes = lu_factor("lu_factor", a)
        np.copyto(lu.reshape(f.shape), f)
        pivs = pivots.reshape(nb, n)
        for i in range(nb):
            pivs[i] = _swaps(perm[i])
        np.copyto(info.reshape(nb), codes, casting="unsafe")
        return
    flat = a.reshape((nb, m, n))
    lus, pivs, infos = lu.reshape((nb, m, n)), pivots.reshape((nb, min(m, n))), info.reshape(nb)
    with np.errstate(all="ignore"):
        for i, mat in enumerate(flat):
            f, p, code = getrf(mat)
            np.copyto(lus[i], f, casting="unsafe")
            pivs[i] = p
            infos[i] = code
