"""The saved file's C section for statically quantized models (gpucore/runtime/c_program.py):
their int8 nodes are written as node kinds the C API runs, the int8 weights as the saved
constants themselves (packed at load), and the kind and tag numbers never change."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore
from gpucore.runtime import c_program

from .quantized_models import QMODELS, program_nodes, program_words, quantized, tensor_bytes

pytestmark = pytest.mark.skipif(not hasattr(gpucore._cpu, "qconv2d"), reason="no int8 kernels")


def test_kind_and_tag_numbers_are_never_renumbered():
    """Files saved earlier must keep loading: the numbers of the first kinds are fixed, new
    kinds are appended."""
    first = ["input", "output", "gemm", "gemm_ex", "unary", "binary", "reduce", "softmax"]
    first += ["copy", "conv2d_forward", "max_pool2d", "layer_norm", "attention", "where"]
    first += ["gather", "im2col", "quantize_u8", "dequantize_u8", "qgemm", "qconv2d"]
    first += ["max_pool2d_u8"]
    assert [c_program.KINDS[k] for k in first] == list(range(1, len(first) + 1))
    tags = (c_program.NONE, c_program.INT, c_program.FLOAT, c_program.BUF, c_program.PACKED)
    assert tags + (c_program.QPACKED,) == (0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("name", sorted(QMODELS))
def test_quantized_models_have_a_c_section_with_int8_kinds(name, tmp_path):
    _, qm, _ = quantized(name)
    path = tmp_path / "q.gcm"
    qm.save(path)
    data = path.read_bytes()
    words = program_words(data)
    nodes = program_nodes(words)
    kinds = {kind for kind, _, _ in nodes}
    assert QMODELS[name][2] <= kinds, kinds
    assert not kinds & {"gemm", "gemm_ex", "conv2d_forward"}  # every layer runs in int8
    names = tensor_bytes(data, "capi.names").split(b"\0")
    const_names = [n.decode() for n in names[: int(words[3])]]
    packed = 0
    for kind, _, args in nodes:
        for tag, at in args:
            if tag != c_program.QPACKED:
                continue
            region, off, k, n, trans = (int(v) for v in words[at + 1 : at + 6])
            assert kind in ("qgemm", "qconv2d") and off == 0 and trans == 1
            # the saved int8 weight itself (stored once in the file), k * n of its bytes
            assert const_names[region].startswith("weights.") and const_names[region].endswith(
                ".int8"
            )
            w = np.frombuffer(tensor_bytes(data, const_names[region]), np.int8)
            assert w.size == k * n
            graph_w = qm.symbolic.tensors[const_names[region][len("weights.") :]].data
            np.testing.assert_array_equal(w, graph_w.reshape(-1))
            assert graph_w.shape[0] == n and graph_w.size // n == k
            packed += 1
    assert packed == sum(kind in ("qgemm", "qconv2d") for kind, _, _ in nodes) > 0
    # no copy of a weight under capi.c<k>: only the program and the names are added
    assert all(not n.startswith("capi.c") for n in const_names)
