"""Matrix decompositions and inverses as ops: inv, solve, det, slogdet, cholesky, qr, svd, eigh,
on the CPU (float32/float64, batched; Vulkan tensors go through the host): inv and solve by the
C extension's LU and triangular solves, the others by numpy's LAPACK; with PyTorch's backward
formulas written in gpucore ops (so second derivatives exist too).

qr, svd and eigh have several differentiable outputs; an op has one, so each packs its outputs
into one tensor ``[..., total]`` that ``gpucore.linalg`` unpacks into views (the gradients of
the views land in the packed gradient, which the backward unpacks).

kernels: backends/cpu/kernels/decompositions.py (cpu/trsm.c; numpy) · none on Vulkan.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..creation import eye
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .joining import cat
from .registry import apply, defop
from .samples import Sample, uniform


def check_square(op: str, a: Tensor, square: bool = True) -> None:
    """A float32/float64 batch of (square) matrices, else a clear error."""
    if a.dtype not in (D.float32, D.float64):
        raise DTypeError(f"linalg.{op}: expected a float32 or float64 tensor, got {a.dtype}")
    if a.ndim < 2:
        raise ShapeError(f"linalg.{op}: expected a matrix or a batch of matrices, got {a.ndim}-D")
    if square and a.shape[-1] != a.shape[-2]:
        raise ShapeError(
            f"linalg.{op}: expected square matrices, got shape {tuple(a.shape)} (the last two "
            "dims must be equal)"
        )


def mT(x: Tensor) -> Tensor:  # noqa: N802 - PyTorch's name
    return x.transpose(-2, -1)


def _eye_like(a: Tensor, n: int) -> Tensor:
    return eye(n, dtype=a.dtype, device=a.device)


def _well(*shape, seed=0):
    """Well-conditioned matrices: random plus a multiple of the identity."""
    a = uniform(*shape, low=-1.0, high=1.0, seed=seed)
    return a + 3 * np.eye(shape[-1]) if shape[-1] == shape[-2] else a


def _spd(*shape, seed=0):
    a = uniform(*shape, low=-1.0, high=1.0, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


# ----------------------------------------------------------------------------- inv, solve, det
INV = defop(
    "linalg_inv",
    infer=lambda a: (a.shape, a.dtype),
    save_outputs=(0,),
    backward=lambda ctx, g: -(mT(ctx.saved[0]) @ g @ mT(ctx.saved[0])),
    samples=lambda: [
        Sample(_well(3, 3, seed=1), ref=np.linalg.inv),
        Sample(_well(2, 4, 4, seed=2), ref=np.linalg.inv),
    ],
)


def _solve_bwd(ctx, g):
    a, x = ctx.saved
    gb = apply(SOLVE, mT(a), g)
    return -(gb @ mT(x)), gb


SOLVE = defop(
    "linalg_solve",
    infer=lambda a, b: (b.shape, a.dtype),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_solve_bwd,
    samples=lambda: [
        Sample(_well(3, 3, seed=3), uniform(3, 2, seed=4), ref=np.linalg.solve),
        Sample(_well(2, 3, 3, seed=5), uniform(2, 3, 4, seed=6), ref=np.linalg.solve),
    ],
)
DET = defop(
    "linalg_det",
    infer=lambda a: (a.shape[:-2], a.dtype),
    save_inputs=(0,),
    save_outputs=(0,),
    backward=lambda ctx, g: (
        (g * ctx.saved[1]).unsqueeze(-1).unsqueeze(-1) * mT(apply(INV, ctx.saved[0]))
    ),
    samples=lambda: [
        Sample(_well(3, 3, seed=7), ref=np.linalg.det),
        Sample(_well(2, 2, 2, seed=8), ref=np.linalg.det),
    ],
)


def _np_slogdet(a):
    s, la = np.linalg.slogdet(a)
    return la, s


SLOGDET = defop(
    "linalg_slogdet",  # outputs (logabsdet, sign): the differentiable one first
    infer=lambda a: [(a.shape[:-2], a.dtype), (a.shape[:-2], a.dtype)],
    save_inputs=(0,),
    backward=lambda ctx, g: g.unsqueeze(-1).unsqueeze(-1) * mT(apply(INV, ctx.saved[0])),
    samples=lambda: [Sample(_well(2, 3, 3, seed=9) - 6 * np.eye(3), ref=_np_slogdet)],
)


# ----------------------------------------------------------------------------- cholesky
def _phi(x: Tensor) -> Tensor:
    """The lower triangle with the diagonal halved."""
    return x.tril() - 0.5 * x.diagonal(0, -2, -1).diag_embed()


def _cholesky_bwd(ctx, g):
    (low,) = ctx.saved
    linv = apply(INV, low)
    s = mT(linv) @ _phi(mT(low) @ g) @ linv
    # cholesky reads the lower triangle: the gradient lies there (symmetric G = (S + S^T) / 2,
    # PyTorch's, is what it gives through a symmetrized input)
    return (s + mT(s)).tril(-1) + s.diagonal(0, -2, -1).diag_embed()


CHOLESKY = defop(
    "linalg_cholesky",
    infer=lambda a: (a.shape, a.dtype),
    save_outputs=(0,),
    backward=_cholesky_bwd,
    samples=lambda: [
        Sample(_spd(3, 3, seed=10), ref=np.linalg.cholesky),
        Sample(_spd(2, 4, 4, seed=11), ref=np.linalg.cholesky),
    ],
)


# ----------------------------------------------------------------------------- packed outputs
def _pack_sizes(shapes) -> list:
    return [math.prod(s) for s in shapes]


def unpack(packed: Tensor, shapes) -> list:
    """The views of a packed ``[..., total]`` output, each reshaped to ``batch + shape``."""
    batch = tuple(packed.shape[:-1])
    out, start = [], 0
    for shape, n in zip(shapes, _pack_sizes(shapes)):
        out.append(packed.narrow(-1, start, n).reshape(batch + tuple(shape)))
        start += n
    return out


def _pack(parts, batch) -> Tensor:
    return cat([p.reshape(tuple(batch) + (-1,)) for p in parts], -1)


def qr_shapes(m: int, n: int, mode: str) -> list:
    k = min(m, n)
    return [(m, m), (m, n)] if mode == "complete" else [(m, k), (k, n)]


def _copyltu(x: Tensor) -> Tensor:
    low = x.tril(-1)
    return low + mT(low) + x.diagonal(0, -2, -1).diag_embed()


def _qr_bwd(ctx, g):
    a, packed = ctx.saved
    m, n = a.shape[-2], a.shape[-1]
    if m < n or ctx.attrs["mode"] == "complete" and m != n:
        raise NotImplementedError(
            "linalg.qr: the gradient is implemented for m >= n in mode 'reduced' (PyTorch's "
            "other cases are not)"
        )
    q, r = unpack(packed, qr_shapes(m, n, ctx.attrs["mode"]))
    gq, gr = unpack(g, qr_shapes(m, n, ctx.attrs["mode"]))
    mm = r @ mT(gr) - mT(gq) @ q
    b = gq + q @ _copyltu(mm)
    return mT(apply(SOLVE, r, mT(b)))  # b R^-T


def _qr_infer(a, mode):
    m, n = a.shape[-2], a.shape[-1]
    total = sum(_pack_sizes(qr_shapes(m, n, mode)))
    return (tuple(a.shape[:-2]) + (total,), a.dtype)


def _qr_call(op, a, mode):
    q, r = unpack(apply(op, a, mode=mode), qr_shapes(a.shape[-2], a.shape[-1], mode))
    return q @ r, r.abs()  # gauge-free: the product, and R up to the signs of its rows


def _np_qr_ref(a, mode):
    q, r = np.linalg.qr(a, mode=mode)
    return q @ r, np.abs(r)


QR = defop(
    "linalg_qr",
    infer=_qr_infer,
    save_inputs=(0,),
    save_outputs=(0,),
    backward=_qr_bwd,
    samples=lambda: [
        Sample(uniform(4, 3, seed=12), mode="reduced", ref=_np_qr_ref, call=_qr_call),
        Sample(uniform(2, 3, 3, seed=13), mode="reduced", ref=_np_qr_ref, call=_qr_call),
    ],
)


def svd_shapes(m: int, n: int, full: bool) -> list:
    k = min(m, n)
    return [(m, m), (k,), (n, n)] if full else [(m, k), (k,), (k, n)]


def _svd_infer(a, full_matrices):
    m, n = a.shape[-2], a.shape[-1]
    total = sum(_pack_sizes(svd_shapes(m, n, full_matrices)))
    return (tuple(a.shape[:-2]) + (total,), a.dtype)


def _svd_bwd(ctx, g):
    (packed,) = ctx.saved
    m, n = ctx.attrs["shape"]
    if ctx.attrs["full_matrices"] and m != n:
        raise NotImplementedError("linalg.svd: the gradient needs full_matrices=False (as PyTorch)")
    u, s, vh = unpack(packed, svd_shapes(m, n, False))
    gu, gs, gvh = unpack(g, svd_shapes(m, n, False))
    v, gv = mT(vh), mT(gvh)
    s2 = s * s
    diff = s2.unsqueeze(-2) - s2.unsqueeze(-1)  # [i, j] = s_j^2 - s_i^2
    k = s.shape[-1]
    f = _inv_gaps(diff, k)
    ut_gu, vt_gv = mT(u) @ gu, mT(v) @ gv
    j = f * (ut_gu - mT(ut_gu))
    kk = f * (vt_gv - mT(vt_gv))
    inner = j * s.unsqueeze(-2) + gs.diag_embed() + s.unsqueeze(-1) * kk
    ga = u @ inner @ vh
    sinv = 1 / s
    if m > k:
        ga = ga + (gu - u @ ut_gu) * sinv.unsqueeze(-2) @ vh
    if n > k:
        ga = ga + u @ (sinv.unsqueeze(-1) * mT(gv - v @ vt_gv))
    return ga


def _svd_call(op, a, full_matrices):
    m, n = a.shape[-2], a.shape[-1]
    packed = apply(op, a, full_matrices=full_matrices, shape=(m, n))
    u, s, vh = unpack(packed, svd_shapes(m, n, full_matrices))
    return u * u, s, vh * vh  # gauge-free for distinct singular values


def _np_svd_ref(a, full_matrices):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u * u, s, vh * vh


SVD = defop(
    "linalg_svd",
    infer=lambda a, full_matrices, shape: _svd_infer(a, full_matrices),
    save_outputs=(0,),
    backward=_svd_bwd,
    samples=lambda: [
        Sample(uniform(4, 3, seed=14), full_matrices=False, ref=_np_svd_ref, call=_svd_call),
        Sample(uniform(2, 3, 5, seed=15), full_matrices=False, ref=_np_svd_ref, call=_svd_call),
        Sample(uniform(3, 3, seed=16), full_matrices=True, ref=_np_svd_ref, call=_svd_call),
    ],
)


def _inv_gaps(diff: Tensor, n: int) -> Tensor:
    """1 / diff off the diagonal, 0 on it and where two values coincide (their eigen- or
    singular vectors are not unique; the gradients of invariant functions need no term there)."""
    off = (1 - _eye_like(diff, n)) * (diff != 0).to(diff.dtype)
    return off / (diff + (1 - off))


def _eigh_bwd(ctx, g):
    (packed,) = ctx.saved
    n = ctx.attrs["n"]
    w, q = unpack(packed, [(n,), (n, n)])
    gw, gq = unpack(g, [(n,), (n, n)])
    diff = w.unsqueeze(-2) - w.unsqueeze(-1)  # [i, j] = w_j - w_i
    f = _inv_gaps(diff, n)
    inner = gw.diag_embed() + f * (mT(q) @ gq)
    ga = q @ inner @ mT(q)
    # eigh reads one triangle (uplo): the gradient of what it computes lies there (through a
    # symmetrization of the input, as PyTorch's tests use it, both give (G + G^T) / 2)
    both = ga + mT(ga)
    tri = both.tril(-1) if ctx.attrs["uplo"] == "L" else both.triu(1)
    return tri + ga.diagonal(0, -2, -1).diag_embed()


def _eigh_call(op, a, uplo, n):
    w, q = unpack(apply(op, a, uplo=uplo, n=n), [(n,), (n, n)])
    return w, q * q


def _np_eigh_ref(a, uplo, n):
    w, q = np.linalg.eigh(a, UPLO=uplo)
    return w, q * q


def _sym(*shape, seed):
    a = uniform(*shape, seed=seed)
    return a + np.swapaxes(a, -1, -2)


EIGH = defop(
    "linalg_eigh",
    infer=lambda a, uplo, n: (tuple(a.shape[:-2]) + (n + n * n,), a.dtype),
    save_outputs=(0,),
    backward=_eigh_bwd,
    samples=lambda: [
        Sample(_sym(3, 3, seed=17), uplo="L", n=3, ref=_np_eigh_ref, call=_eigh_call, grad=False),
        Sample(_sym(2, 4, 4, seed=18), uplo="L", n=4, ref=_np_eigh_ref, call=_eigh_call),
    ],
)
