"""The package's public surface (gpucore/quantization/__init__.py and its hooks in gpucore):
imported on first use only, PyTorch's top-level names and dtypes, the gpucore.ao.quantization
path, pickling of dtypes and schemes."""

from __future__ import annotations

import pickle
import subprocess
import sys

import gpucore as gc
from gpucore import quantization


def test_importing_gpucore_does_not_import_quantization():
    code = (
        "import sys, gpucore\n"
        "assert 'gpucore.quantization' not in sys.modules\n"
        "assert gpucore.qint8.name == 'qint8'\n"
        "assert 'gpucore.quantization' not in sys.modules\n"
        "gpucore.quantize_per_tensor\n"
        "assert 'gpucore.quantization' in sys.modules\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_top_level_names_are_pytorchs():
    assert gc.quantize_per_tensor is quantization.quantize_per_tensor
    assert gc.quantize_per_channel is quantization.quantize_per_channel
    assert gc.fake_quantize_per_tensor_affine is quantization.fake_quantize_per_tensor_affine
    assert gc.per_channel_symmetric is quantization.per_channel_symmetric
    assert (gc.qint8, gc.quint8, gc.qint32) == (
        quantization.qint8,
        quantization.quint8,
        quantization.qint32,
    )
    assert {"quantize_per_tensor", "quantization", "per_tensor_affine"} <= set(dir(gc))
    assert gc.qint8.itemsize == 1 and gc.qint32.itemsize == 4
    assert gc.qint8.is_signed and not gc.quint8.is_signed and not gc.qint8.is_floating_point


def test_ao_quantization_is_this_package():
    assert gc.ao.quantization is quantization
    import gpucore.ao.quantization as aq  # registered by the first gc.ao access

    assert aq is quantization and aq.MinMaxObserver is quantization.MinMaxObserver
    assert gc.ao.nn.quantized.dynamic.Linear is quantization.dynamic.Linear


def test_dtypes_and_schemes_unpickle_to_the_same_objects():
    for obj in (gc.qint8, gc.quint8, gc.qint32, gc.per_tensor_affine, gc.per_channel_symmetric):
        assert pickle.loads(pickle.dumps(obj)) is obj


def test_float_tensors_answer_the_quantized_protocol():
    x = gc.randn(2)
    assert x.is_quantized is False and x.dequantize() is x
