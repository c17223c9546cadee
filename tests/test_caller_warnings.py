"""gpucore._caller_warnings: a warning raised inside gpucore names the user's line, on an op's
first call (through its public form's trampoline) as on later ones, through the function, its
method and the functional form alike."""

import warnings

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn.functional as F
from gpucore import _caller_warnings as caller_warnings

X = np.ones((1, 2, 4, 4), np.float32)
CASES = {
    "cov": lambda: gc.cov(gc.tensor([[1.0, 2.0, 3.0]]), correction=5),
    "Tensor.cov": lambda: gc.tensor([[1.0, 2.0, 3.0]]).cov(correction=5),
    "grid_sample": lambda: F.grid_sample(gc.tensor(X), gc.zeros(1, 3, 3, 2)),
    "affine_grid": lambda: F.affine_grid(
        gc.tensor(np.eye(2, 3, dtype=np.float32)[None]), (1, 2, 3, 3)
    ),
    "dropout2d of 3-D": lambda: F.dropout2d(gc.ones(2, 3, 4)),
    "upsample": lambda: F.upsample(gc.tensor(X), scale_factor=2),
    "upsample_bilinear": lambda: F.upsample_bilinear(gc.tensor(X), scale_factor=2),
    "upsample_nearest": lambda: F.upsample_nearest(gc.tensor(X), scale_factor=2),
    "kl_div mean": lambda: F.kl_div(gc.ones(2, 3), gc.ones(2, 3)),
    "adjoint of 0-D": lambda: gc.adjoint(gc.tensor(1.0)),
    "Tensor.adjoint of 0-D": lambda: gc.tensor(1.0).adjoint(),
    "mse_loss broadcast": lambda: F.mse_loss(gc.ones(2, 3), gc.ones(3)),
    "l1_loss broadcast": lambda: F.l1_loss(gc.ones(2, 3), gc.ones(3)),
    "dropout3d of 2-D": lambda: F.dropout3d(gc.ones(2, 3), training=True),
    "resize_as": lambda: gc.ones(2, 3).resize_as(gc.ones(3, 2)),
}


@pytest.mark.parametrize("case", CASES)
def test_warnings_name_the_callers_line(case):
    for _ in range(2):  # the first call runs through the form's trampoline
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            CASES[case]()
        assert got, case
        assert {(w.filename, w.lineno) for w in got} == {
            (__file__, CASES[case].__code__.co_firstlineno)
        }


def test_warn_from_outside_gpucore_is_the_direct_caller():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        caller_warnings.warn("here", RuntimeWarning)
    assert [(w.filename, w.category) for w in got] == [(__file__, RuntimeWarning)]
