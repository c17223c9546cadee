"""CPU kernels, keyed by registry op name: ``fn(out, *inputs, **attrs)`` on numpy arrays.

float32/float64 math goes to the C extension (gpucore._cpu); integer and bool tensors use numpy,
which is exact for them. ``out`` is always a fresh C-contiguous array; inputs may be strided views.

common.py holds the tables (``KERNELS``; ``FAST``, the ops the extension's fast lane runs
whole), the ``kernel`` decorator and the shared helpers. Each family module registers its
kernels with ``@kernel``, one module per module of gpucore/ops, of the same name: unary.py,
elementwise.py, reduce.py, indexing.py, joining.py, linalg.py (its C kernel is cpu/gemm.c), nn.py,
norm.py, norm_batch.py, pool.py, grid_sample.py (cpu/grid_sample.c), ctc.py (cpu/ctc.c),
attention.py, random.py, optim.py, scan.py, scatter.py, selection.py, sorting.py, bitwise.py,
numeric.py (gcd, lcm, frexp, nextafter), counting.py (histogramdd, mode) and random_counts.py
(poisson, binomial) (numpy); membership.py (cpu/isin.c); bessel.py, transcendental.py and
polynomials.py (the special functions of torch.special, in C: cpu/special*.c); trsm.py
(cpu/trsm.c: triangular solves, LU info codes); relu_fused.py (linear / conv2d with the ReLU
in their epilogue, cpu/gemm.c and conv2d_forward).
ops/shape.py has no kernels (views), nor have the composition modules (rearrange, pointwise,
einsum); ops/inplace.py reuses the others'.

The C extension's op codes are the one list of its unary and binary ops: unary.py and
elementwise.py register a kernel (and a fast lane) for each code the extension exports, without
typing the names again.
"""

# Family modules register on import; keep this list in step with the files.
from . import (  # noqa: F401
    attention,
    bessel,
    bitwise,
    counting,
    ctc,
    decompositions,
    elementwise,
    grid_sample,
    indexing,
    joining,
    ldl,
    linalg,
    membership,
    nn,
    norm,
    norm_batch,
    numeric,
    optim,
    polynomials,
    pool,
    random,
    random_counts,
    recurrent,
    reduce,
    relu_fused,
    scan,
    scatter,
    selection,
    sorting,
    special,
    transcendental,
    trsm,
    unary,
)
from .common import FAST, KERNELS, kernel

__all__ = ["FAST", "KERNELS", "kernel"]
