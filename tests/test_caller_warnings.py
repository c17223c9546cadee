"""gpucore._caller_warnings: a warning raised inside gpucore names the user's line, on an op's
first call (through its public form's trampoline) as on later ones, through the function, its
method and the functional form alike."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn as nn
import gpucore.nn.functional as F
import gpucore.quantization as Q
from gpucore import _caller_warnings as caller_warnings
from gpucore.config import check_environment
from gpucore.optim import SGD
from gpucore.optim import lr_scheduler as L

X = np.ones((1, 2, 4, 4), np.float32)
P = gc.zeros(2, requires_grad=True)


def _sgd():
    return SGD([gc.zeros(2, requires_grad=True)], lr=0.1)


def _chained():
    opt = _sgd()
    return L.ChainedScheduler([L.StepLR(opt, 1), L.ExponentialLR(opt, 0.9)])


def _sequential():
    opt = _sgd()
    return L.SequentialLR(opt, [L.StepLR(opt, 1), L.ExponentialLR(opt, 0.9)], milestones=[5])


def _fq_histogram():
    return Q.FakeQuantize(observer=Q.HistogramObserver)


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
    # warned below a constructor, a Module's __call__, a subclass's or a wrapper's frame
    "SGD duplicate params": lambda: SGD([P, P], lr=0.1),
    "add_param_group duplicate": lambda: _sgd().add_param_group({"params": [P, P]}),
    "RNN dropout": lambda: nn.RNN(2, 3, dropout=0.5),
    "LSTM dropout": lambda: nn.LSTM(2, 3, dropout=0.5),
    "GRU dropout": lambda: nn.GRU(2, 3, dropout=0.5),
    "Softmax no dim": lambda: nn.Softmax()(gc.ones(2, 3)),
    "LogSoftmax no dim": lambda: nn.LogSoftmax()(gc.ones(2, 3)),
    "Softmin no dim": lambda: nn.Softmin()(gc.ones(2, 3)),
    "InstanceNorm1d channels": lambda: nn.InstanceNorm1d(3)(gc.ones(2, 4, 5)),
    "InstanceNorm2d channels": lambda: nn.InstanceNorm2d(3)(gc.ones(2, 4, 5, 5)),
    "kaiming_uniform_ empty": lambda: nn.init.kaiming_uniform_(gc.empty(0, 3)),
    "Linear(0, 3)": lambda: nn.Linear(0, 3),
    "Conv2d(0, 2, 1)": lambda: nn.Conv2d(0, 2, 1),
    "HistogramObserver inf": lambda: Q.HistogramObserver()(gc.tensor([1.0, float("inf")])),
    "HistogramObserver unrun": lambda: Q.HistogramObserver().calculate_qparams(),
    "MinMaxObserver unrun": lambda: Q.MinMaxObserver().calculate_qparams(),
    "FakeQuantize unrun": lambda: Q.FakeQuantize().calculate_qparams(),
    "FakeQuantize(Histogram) unrun": lambda: _fq_histogram().calculate_qparams(),
    "autocast cuda": lambda: gc.autocast("cuda"),
    "cuda.amp.autocast": lambda: gc.cuda.amp.autocast(),
    "GradScaler cuda": lambda: gc.amp.GradScaler("cuda"),
    "cuda.amp.GradScaler": lambda: gc.cuda.amp.GradScaler(),
    "scheduler step first": lambda: L.StepLR(_sgd(), 1).step(),
    "ChainedScheduler step first": lambda: _chained().step(),
    "SequentialLR step first": lambda: _sequential().step(),
    "unknown GPUCORE_ variable": lambda: check_environment({"GPUCORE_DEVISE": "cpu"}),
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


@pytest.mark.parametrize("statement", ["import gpucore", "importlib.import_module('gpucore')"])
def test_a_warning_at_import_names_the_import_statement(tmp_path, statement):
    """config.check_environment warns while gpucore is imported: the import system's frames
    between gpucore and the script are skipped, as warnings.warn skips them, and so is
    importlib.import_module's (plugin loaders, entry points)."""
    script = tmp_path / "user.py"
    script.write_text(
        "import importlib, warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as got:\n"
        "    warnings.simplefilter('always')\n"
        f"    {statement}\n"
        "print(repr([(w.filename, w.lineno, w.category.__name__) for w in got]))\n"
    )
    env = {**os.environ, "GPUCORE_DEVISE": "cpu"}
    res = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == repr([(str(script), 5, "UserWarning")])
