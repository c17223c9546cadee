"""What the tests of gpucore.onnx share: building small ONNX models with ``onnx.helper``, and
running them in ONNX Runtime (the reference) and in gpucore.

Importing this module skips the importing test file when onnx or onnxruntime is missing.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

import gpucore.onnx  # noqa: E402

IR_VERSION = 10  # what onnxruntime 1.30 reads (onnx.helper writes a newer one by default)
RTOL = ATOL = 1e-4


def _ort_newest() -> int:
    """The newest default-domain opset both onnx and onnxruntime support."""
    for v in range(onnx.defs.onnx_opset_version(), 12, -1):
        try:
            ort.InferenceSession(
                model([helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros(1, np.float32)},
                      {"y": np.float32}, opset=v).SerializeToString()
            )  # fmt: skip
            return v
        except Exception:  # noqa: BLE001 - this onnxruntime does not know opset v
            continue
    return 13


def tensor_type(dtype) -> int:
    """The TensorProto element type of a numpy dtype."""
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def value_info(name: str, dtype, shape):
    """A tensor ValueInfoProto (shape entries: ints, str symbols, None unknown)."""
    return helper.make_tensor_value_info(name, tensor_type(dtype), shape)


def model(
    nodes: list,
    inputs: dict,
    outputs: dict,
    initializers: dict | None = None,
    opset: int = 17,
    input_shapes: dict | None = None,
):
    """A ModelProto: ``inputs`` {name: example array}, ``outputs`` {name: dtype},
    ``initializers`` {name: array}; ``input_shapes`` overrides an input's declared shape."""
    shapes = input_shapes or {}
    graph = helper.make_graph(
        nodes,
        "test",
        [value_info(n, a.dtype, shapes.get(n, list(a.shape))) for n, a in inputs.items()],
        [value_info(n, dt, None) for n, dt in outputs.items()],
        [onnx.numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()],
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION
    )


def run_ort(m, feeds: dict) -> list:
    """onnxruntime's outputs (CPU provider, all graph optimisations off: the plain ops)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_gpucore(m, feeds: dict, device: str = "cpu", **options) -> list:
    """gpucore's outputs for the model (loaded from its bytes)."""
    cm = gpucore.onnx.load(m.SerializeToString(), device=device, **options)
    return cm.run_arrays([feeds[n] for n in cm.input_names])


def assert_close(got: list, want: list, rtol=RTOL, atol=ATOL) -> None:
    """Same number of outputs, same dtypes and shapes, values within tolerance."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def check_op(
    op: str,
    inputs: list,
    attrs: dict | None = None,
    *,
    opset: int,
    static=(),
    out=None,
    n_out: int = 1,
    device: str = "cpu",
    all_static: bool = False,
    rtol=RTOL,
    atol=ATOL,
):
    """One node of ``op`` in gpucore equals onnxruntime.

    ``inputs``: arrays (None: an omitted optional input); those at indices in ``static`` are
    initializers (shapes, axes), the others graph inputs. ``out``: the output dtype(s) (default:
    the first input's). ``all_static``: every input an initializer, so that the importer's
    load-time (numpy) path computes the result."""
    names, feeds, inits = [], {}, {}
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        (inits if all_static or i in static else feeds)[name] = np.asarray(a)
    outs = out if isinstance(out, (list, tuple)) else [out] * n_out
    first = next(np.asarray(a).dtype for a in inputs if a is not None)
    outputs = {f"out{i}": (first if o is None else o) for i, o in enumerate(outs)}
    node = helper.make_node(op, names, list(outputs), **(attrs or {}))
    if all_static:  # a graph with no inputs: feed one that an Identity passes through
        feeds = {"unused": np.zeros(1, np.float32)}
    m = model([node], feeds, outputs, inits, opset=opset)
    want = run_ort(m, feeds)
    got = run_gpucore(m, feeds, device)
    assert_close(got, want, rtol, atol)
    return got


def rand(*shape, seed: int = 0, dtype=np.float32, low=-2.0, high=2.0) -> np.ndarray:
    """Uniform random values in [low, high)."""
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


NEWEST = _ort_newest()
OPSETS = (13, NEWEST)
