"""Shared by the kernel tests of tests/backends/cpu/kernels (``from cpu_ext import ...``; this
folder's conftest.py puts it on sys.path): the C extension under test (``C``), the dtypes, sizes
and tolerances of the checks, seeded random inputs and the comparison with a float64 reference."""

from __future__ import annotations

import glob
import importlib.util
import os

import numpy as np


def _load_cpu():
    """gpucore._cpu; if the package itself fails to import, load the built .so directly."""
    try:
        from gpucore import _cpu

        return _cpu
    except Exception:
        root = os.path.dirname(
            os.path.dirname(
                os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
            )
        )
        paths = sorted(glob.glob(os.path.join(root, "gpucore", "_cpu*.so")))
        paths += sorted(glob.glob(os.path.join(root, "gpucore", "_cpu*.pyd")))
        if not paths:
            raise
        spec = importlib.util.spec_from_file_location("gpucore._cpu", paths[0])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


C = _load_cpu()

FLOATS = [np.float32, np.float64]
SIZES = [1, 7, 13, 65, 129, 257]
RTOL_ELEM = {np.float32: 1e-5, np.float64: 1e-12}
ATOL_ELEM = {np.float32: 1e-6, np.float64: 1e-14}
RTOL_ACC = {np.float32: 1e-4, np.float64: 1e-12}  # gemm and reductions


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(shape, dtype, seed=0):
    return rng(seed).standard_normal(shape).astype(dtype)


def close(got, ref, dtype, rtol=None, atol=None):
    rtol = RTOL_ELEM[dtype] if rtol is None else rtol
    atol = ATOL_ELEM[dtype] if atol is None else atol
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=rtol, atol=atol)
