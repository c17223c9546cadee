"""Kernels of gpucore/ops/ldl.py: LAPACK's unblocked Bunch-Kaufman factorization of a real
symmetric matrix (sytf2, lower triangle) and the solve with its factors (sytrs), in numpy over
batches. sytrf's pivots and compact L D L^T layout: ``pivots[k] > 0`` a 1x1 block after
swapping rows k and pivots[k] - 1; two equal negative entries a 2x2 block after swapping row
k + 1 with -pivots[k] - 1 (1-based, as LAPACK)."""

from __future__ import annotations

import math

import numpy as np

from .common import kernel

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0  # Bunch-Kaufman's growth bound


def _swap_pivot(a: np.ndarray, kk: int, kp: int) -> None:
    """Swap rows and columns kk < kp of the trailing lower triangle."""
    a[kp + 1 :, [kk, kp]] = a[kp + 1 :, [kp, kk]]
    col = a[kk + 1 : kp, kk].copy()
    a[kk + 1 : kp, kk] = a[kp, kk + 1 : kp]
    a[kp, kk + 1 : kp] = col
    a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]


def _pivot(a: np.ndarray, k: int) -> tuple:
    """(kp, kstep) of Bunch-Kaufman's choice at column k, or (k, 0) for a zero column."""
    n = a.shape[0]
    absakk = abs(a[k, k])
    imax, colmax = k, 0.0
    if k < n - 1:
        imax = k + 1 + int(np.argmax(np.abs(a[k + 1 :, k])))
        colmax = abs(a[imax, k])
    if max(absakk, colmax) == 0 or math.isnan(absakk):
        return k, 0
    if absakk >= _ALPHA * colmax:
        return k, 1
    rowmax = float(np.max(np.abs(a[imax, k:imax])))  # row imax left of the diagonal
    if imax < n - 1:
        rowmax = max(rowmax, float(np.max(np.abs(a[imax + 1 :, imax]))))
    if absakk >= _ALPHA * colmax * (colmax / rowmax):
        return k, 1
    if abs(a[imax, imax]) >= _ALPHA * rowmax:
        return imax, 1
    return imax, 2


def sytf2_lower(a: np.ndarray) -> tuple:
    """(LD with the strict upper triangle zero, 1-based pivots, info) of a symmetric matrix
    (its lower triangle is read), as LAPACK's dsytf2 with uplo='L'."""
    a = np.tril(a).astype(np.float64)
    n = a.shape[0]
    ipiv = np.zeros(n, np.int64)
    info = 0
    k = 0
    while k < n:
        kp, kstep = _pivot(a, k)
        if kstep == 0:  # a zero column: D singular, nothing to eliminate
            info = info or k + 1
            ipiv[k] = k + 1
            k += 1
            continue
        kk = k + kstep - 1
        if kp != kk:
            _swap_pivot(a, kk, kp)
            if kstep == 2:
                a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
        if kstep == 1:
            if k < n - 1:
                d11 = 1.0 / a[k, k]
                v = a[k + 1 :, k].copy()
                a[k + 1 :, k + 1 :] -= np.tril(d11 * np.outer(v, v))
                a[k + 1 :, k] *= d11
            ipiv[k] = kp + 1
        else:
            if k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                t = 1.0 / (d11 * d22 - 1.0)
                d21 = t / d21
                ck, ck1 = a[k + 2 :, k].copy(), a[k + 2 :, k + 1].copy()
                wk = d21 * (d11 * ck - ck1)
                wkp1 = d21 * (d22 * ck1 - ck)
                a[k + 2 :, k + 2 :] -= np.tril(np.outer(ck, wk) + np.outer(ck1, wkp1))
                a[k + 2 :, k] = wk
                a[k + 2 :, k + 1] = wkp1
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return a, ipiv, info


def sytrs_lower(ld: np.ndarray, ipiv: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X with ``A X = B`` from sytf2_lower's factors, as LAPACK's dsytrs with uplo='L'."""
    b = b.astype(np.float64)
    n = ld.shape[0]
    k = 0
    while k < n:  # L D y = P b
        if ipiv[k] > 0:
            kp = ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1 :] -= np.outer(ld[k + 1 :, k], b[k])
            b[k] /= ld[k, k]
            k += 1
        else:
            kp = -ipiv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            b[k + 2 :] -= np.outer(ld[k + 2 :, k], b[k]) + np.outer(ld[k + 2 :, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1, ak = ld[k, k] / akm1k, ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T P^T x = y
        if ipiv[k] > 0:
            b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            kp = ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            b[k - 1] -= ld[k + 1 :, k - 1] @ b[k + 1 :]
            kp = -ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


@kernel("linalg_ldl_factor")
def _ldl_factor(outs, a):
    ld, pivots, info = outs
    n = a.shape[-1]
    flat = a.reshape(-1, n, n)
    lds, pivs, infos = ld.reshape(-1, n, n), pivots.reshape(-1, n), info.reshape(-1)
    with np.errstate(all="ignore"):  # a singular D gives inf / NaN, reported by info
        for i, m in enumerate(flat):
            f, p, code = sytf2_lower(m)
            np.copyto(lds[i], f, casting="unsafe")
            pivs[i] = p
            infos[i] = code


@kernel("linalg_ldl_solve")
def _ldl_solve(out, ld, pivots, b):
    n = ld.shape[-1]
    lds, pivs = ld.reshape(-1, n, n), pivots.reshape(-1, n)
    bs, outs = b.reshape((-1,) + b.shape[-2:]), out.reshape((-1,) + out.shape[-2:])
    with np.errstate(all="ignore"):
        for i in range(lds.shape[0]):
            np.copyto(outs[i], sytrs_lower(lds[i], pivs[i], bs[i]), casting="unsafe")
