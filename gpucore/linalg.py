"""gpucore.linalg: PyTorch's torch.linalg names.

inv and solve run the C extension's LU with partial pivoting and its blocked triangular solves
(cpu/trsm.c), as do solve_triangular and the info codes of inv_ex / solve_ex; det, slogdet,
cholesky, qr, svd, svdvals, eigh and eigvalsh run numpy's LAPACK; all on the CPU in
float32/float64 with batches; a tensor on the Vulkan device goes through host memory for them
and the result is a CPU tensor (as for the other ops with host kernels only, such as sort). Their
gradients are PyTorch's formulas written in gpucore ops (gpucore/ops/decompositions.py,
gpucore/ops/trsm.py). Norms, pinv, matrix_rank, matrix_exp, multi_dot, cross, matrix_power,
diagonal and vecdot are compositions (gpucore/ops/matrix.py, shorthands.py); so are the *_ex
forms (cholesky_ex, inv_ex, solve_ex: an info tensor instead of an error), cond, tensorinv,
tensorsolve and vander (gpucore/ops/solvers.py), householder_product (gpucore/ops/householder.py);
ldl_factor / ldl_factor_ex / ldl_solve are LAPACK's Bunch-Kaufman sytrf / sytrs in numpy
(gpucore/ops/ldl.py, not differentiable, as PyTorch's); lu_factor / lu_factor_ex / lu / lu_solve
have PyTorch's gradients and triangular solves (gpucore/ops/lu.py); matmul is gpucore.matmul.
A singular or non-positive-definite input raises ``LinAlgError``.
"""

from __future__ import annotations

from .errors import LinAlgError
from .ops import householder as _hh
from .ops import ldl as _ldl
from .ops import lu as _lu
from .ops import matrix as _m
from .ops import shorthands as _sh
from .ops import solvers as _sv
from .ops.api import checked
from .ops.linalg import matmul as _matmul
from .tensor import Tensor

inv = checked("linalg.inv", _m.inv)
solve = checked("linalg.solve", _m.solve)
det = checked("linalg.det", _m.det)
slogdet = checked("linalg.slogdet", _m.slogdet)
cholesky = checked("linalg.cholesky", _m.cholesky_ex)
qr = checked("linalg.qr", _m.linalg_qr)
svd = checked("linalg.svd", _m.linalg_svd)
svdvals = checked("linalg.svdvals", _m.svdvals)
eigh = checked("linalg.eigh", _m.eigh)
eigvalsh = checked("linalg.eigvalsh", _m.eigvalsh)
pinv = checked("linalg.pinv", _m.pinv)
matrix_rank = checked("linalg.matrix_rank", _m.matrix_rank)
matrix_exp = checked("linalg.matrix_exp", _m.matrix_exp)
vector_norm = checked("linalg.vector_norm", _m.vector_norm)
matrix_norm = checked("linalg.matrix_norm", _m.matrix_norm)
norm = checked("linalg.norm", _m.norm)
multi_dot = checked("linalg.multi_dot", _m.multi_dot)
cross = checked("linalg.cross", _m.linalg_cross)
matmul = checked("linalg.matmul", _matmul)
matrix_power = checked("linalg.matrix_power", _sh.matrix_power)
solve_triangular = checked("linalg.solve_triangular", _sv.solve_triangular)
cholesky_ex = checked("linalg.cholesky_ex", _sv.cholesky_ex)
inv_ex = checked("linalg.inv_ex", _sv.inv_ex)
solve_ex = checked("linalg.solve_ex", _sv.solve_ex)
cond = checked("linalg.cond", _sv.cond)
tensorinv = checked("linalg.tensorinv", _sv.tensorinv)
tensorsolve = checked("linalg.tensorsolve", _sv.tensorsolve)
vander = checked("linalg.vander", _sv.linalg_vander)
lstsq = checked("linalg.lstsq", _sv.lstsq)
ldl_factor = checked("linalg.ldl_factor", _ldl.ldl_factor)
ldl_factor_ex = checked("linalg.ldl_factor_ex", _ldl.ldl_factor_ex)
ldl_solve = checked("linalg.ldl_solve", _ldl.ldl_solve)
lu_factor = checked("linalg.lu_factor", _lu.lu_factor)
lu_factor_ex = checked("linalg.lu_factor_ex", _lu.lu_factor_ex)
lu = checked("linalg.lu", _lu.linalg_lu)
lu_solve = checked("linalg.lu_solve", _lu.lu_solve)
householder_product = checked("linalg.householder_product", _hh.householder_product)


def _diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """torch.linalg.diagonal: the diagonal of the matrices of A (a view; the last two dims by
    default)."""
    return A.diagonal(offset, dim1, dim2)


def _vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """torch.linalg.vecdot: the dot product of x and y (broadcast) along ``dim``."""
    return (x * y).sum(dim)


diagonal = checked("linalg.diagonal", _diagonal)
vecdot = checked("linalg.vecdot", _vecdot)
for _f, _n in ((diagonal, "diagonal"), (vecdot, "vecdot")):
    _f.__name__ = _f.__qualname__ = _n
del _f, _n

__all__ = [
    "LinAlgError",
    "cholesky",
    "cholesky_ex",
    "cond",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "householder_product",
    "inv",
    "inv_ex",
    "ldl_factor",
    "ldl_factor_ex",
    "ldl_solve",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_exp",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "tensorinv",
    "tensorsolve",
    "vander",
    "svd",
    "svdvals",
    "vecdot",
    "vector_norm",
]
