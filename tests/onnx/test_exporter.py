"""gpucore.onnx.export: gpucore models written as ONNX (opset 17), checked by onnx's checker, run
by ONNX Runtime and by gpucore's own importer against the model run eagerly."""

import io
import os
import sys

import numpy as np
import pytest
from onnx_cases import onnx, ort

import gpucore
import gpucore.onnx
from gpucore import nn
from gpucore.onnx import UnsupportedOperator

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime"))
from runtime_models import block, cnn, mlp  # noqa: E402


def _embedder():
    gpucore.manual_seed(3)
    return nn.Sequential(nn.Embedding(10, 8), nn.LayerNorm(8), nn.Linear(8, 3), nn.Tanh())


def _odds_and_ends(x):
    """Views, slicing, reductions, comparisons and casts in one function."""
    y = gpucore.cat([x, x * 2], 1).clamp(-1.5, 1.5)
    z = y[:, 1:5:2].t().unsqueeze(0).squeeze(0)
    w = gpucore.where(x > 0, x, 0.0).expand(2, 3, 4) + x.max(1).values.unsqueeze(1)
    return z.sum(), w.to(gpucore.float64), x.log_softmax(-1), x.argmax(1), x[..., -1]


CASES = {
    "mlp": (mlp, lambda: gpucore.randn(3, 16)),
    "block": (lambda: block(causal=True), lambda: gpucore.randn(2, 5, 16)),
    "block tanh gelu": (lambda: block(approximate="tanh"), lambda: gpucore.randn(2, 5, 16)),
    "cnn": (cnn, lambda: gpucore.randn(2, 3, 16, 16)),
    "embedding": (_embedder, lambda: gpucore.tensor([[1, 2, 9], [0, 0, 4]])),
    "function": (lambda: _odds_and_ends, lambda: gpucore.randn(3, 4)),
}


def _eager(m, x):
    with gpucore.no_grad():
        out = m(x)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", CASES)
def test_exported_models_run_in_onnxruntime_and_back_in_gpucore(case):
    build, example = CASES[case]
    gpucore.manual_seed(0)
    m, x = build(), example()
    if hasattr(m, "eval"):
        m.eval()
    buf = io.BytesIO()
    proto = gpucore.onnx.export(m, (x,), buf)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == 17 and proto.producer_name == "gpucore"
    want = _eager(m, x)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})
    back = gpucore.onnx.load(buf.getvalue(), dynamic=False).run_arrays([x.numpy()])
    assert len(got) == len(want) == len(back)
    for g, b, w in zip(got, back, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b, w, rtol=1e-5, atol=1e-6)


def test_names_files_and_initializers(tmp_path):
    m = mlp()
    path = tmp_path / "mlp.onnx"
    proto = gpucore.onnx.export(
        m, gpucore.randn(2, 16), str(path), input_names=["features"], output_names=["logits"]
    )
    loaded = onnx.load(str(path))
    assert [i.name for i in loaded.graph.input] == ["features"]
    assert [o.name for o in loaded.graph.output] == ["logits"]
    # 2-D Linear layers are Gemm nodes that keep the state_dict's names for the weights
    assert {i.name for i in proto.graph.initializer} == set(m.state_dict())
    assert [n.op_type for n in proto.graph.node] == ["Gemm", "Relu", "Gemm", "Relu", "Gemm"]


DYNAMIC = {
    "mlp batch": (mlp, (3, 16), {0: [0]}, (7, 16)),
    "block batch and sequence": (block, (2, 5, 16), {"x": {0: "B", 1: "T"}}, (3, 9, 16)),
    "cnn batch": (cnn, (2, 3, 16, 16), {0: {0: "batch"}}, (5, 3, 16, 16)),
}


@pytest.mark.parametrize("case", DYNAMIC)
def test_dynamic_axes_become_dim_params_and_shapes_computed_in_the_graph(case):
    build, shape, axes, other = DYNAMIC[case]
    m = build().eval()
    buf = io.BytesIO()
    proto = gpucore.onnx.export(m, gpucore.randn(*shape), buf, dynamic_axes=axes)
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    named = [d.dim_param for d in dims if d.dim_param]
    assert len(named) == (2 if "sequence" in case else 1)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    back = gpucore.onnx.load(buf.getvalue())
    for s in (shape, other):
        x = gpucore.randn(*s)
        want = _eager(m, x)[0]
        got = sess.run(None, {sess.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(back.run_arrays([x.numpy()])[0], want, rtol=1e-5, atol=1e-6)


def test_what_cannot_be_written_is_refused_by_name():
    pool = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AvgPool2d(2))
    with pytest.raises(UnsupportedOperator, match="'im2col' op, which has no ONNX emitter"):
        gpucore.onnx.export(pool, gpucore.randn(1, 1, 8, 8))
    with pytest.raises(ValueError, match="opset_version"):
        gpucore.onnx.export(mlp(), gpucore.randn(2, 16), opset_version=13)
    with pytest.raises(UnsupportedOperator, match="negative step"):
        gpucore.onnx.export(
            lambda x: x.flip(0) if hasattr(x, "flip") else x[::-1], gpucore.randn(3)
        )


def test_int16_graphs_export_as_onnx_int16():
    def fn(x, y):
        return x * y + x, x == y

    x = gpucore.tensor([[1, -2, 300]], dtype=gpucore.int16)
    y = gpucore.tensor([[5, 6, 32767]], dtype=gpucore.int16)
    buf = io.BytesIO()
    gpucore.onnx.export(fn, (x, y), buf)
    sess = ort.InferenceSession(buf.getvalue())
    assert [i.type for i in sess.get_inputs()] == ["tensor(int16)"] * 2
    names = [i.name for i in sess.get_inputs()]
    want = [t.numpy() for t in fn(x, y)]
    got = sess.run(None, dict(zip(names, (x.numpy(), y.numpy()))))
    back = gpucore.onnx.load(buf.getvalue())(x, y)
    for w, a, b in zip(want, got, back):
        assert a.dtype == w.dtype and b.numpy().dtype == w.dtype
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(b.numpy(), w)
