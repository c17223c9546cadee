"""gpucore.onnx.ops.resize: Resize's modes, coordinate transformations, rounding rules,
axes, sizes with an aspect-ratio policy against onnxruntime; a crop with extrapolation against
ONNX's reference."""

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator
from onnx_cases import check_op, helper, model, rand, run_gpucore

F32 = np.float32
NO_ROI = np.zeros(0, F32)
MODES = [
    {"mode": "nearest"},
    {"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "asymmetric"},
    {"mode": "nearest", "nearest_mode": "round_prefer_ceil"},
    {"mode": "linear"},
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    {"mode": "cubic"},
    {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1},
]


@pytest.mark.parametrize("attrs", MODES)
@pytest.mark.parametrize("scale", [2.0, 0.6])
def test_resize_scales(attrs, scale):
    x = rand(1, 2, 5, 6)
    scales = np.array([1, 1, scale, 1.5], F32)
    check_op("Resize", [x, NO_ROI, scales], attrs, opset=19, static=(1, 2))


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_resize_sizes_and_axes(policy):
    x = rand(1, 2, 4, 6)
    attrs = {"mode": "linear", "keep_aspect_ratio_policy": policy, "axes": [3, 2]}
    check_op("Resize", [x, None, None, np.array([9, 6], np.int64)], attrs, opset=19,
             static=(3,))  # fmt: skip
    check_op("Resize", [x, None, None, np.array([12, 10], np.int64)], attrs, opset=19,
             static=(3,))  # fmt: skip
    # a common scale of 1.25 or 1.5, so that a size rounds half up
    check_op("Resize", [x, None, None, np.array([9, 5], np.int64)], attrs, opset=19,
             static=(3,))  # fmt: skip


def test_resize_crop_with_extrapolation_against_the_reference():
    # (onnxruntime sizes a crop's output from the whole input; ONNX's reference, and the
    # conformance cases, from the cropped box)
    x = rand(1, 1, 5, 5)
    roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], F32)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 7.0}  # fmt: skip
    node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], **attrs)
    m = model([node], {"x": x}, {"y": F32}, {"roi": roi, "s": np.array([1, 1, 1.4, 1.6], F32)},
              opset=19)  # fmt: skip
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    (got,) = run_gpucore(m, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
