"""ONNX's conformance suite through ``gpucore.onnx.backend``: every node case the onnx wheel
generates (1,884 in onnx 1.23) and every model directory it ships (simple, pytorch-converted,
pytorch-operator, and the real models' light versions), on the CPU; and the cases the CPU passes
again on Vulkan (lavapipe here). Compared as ONNX's harness compares (``conformance.py``).

Each exclusion list maps a key (a case name, an op type, ``dtype:<ONNX type>``,
``type:<sequence|optional>``, ``domain:<name>``; see ``conformance.excluded``) to (category,
reason; "" for the category's own). An excluded case is a strict xfail: when it starts to pass,
the test fails until its entry is removed, so the lists only shrink. A case that is not excluded
and fails, fails the suite. ``python tests/onnx/conformance.py`` prints the pass counts.
"""

import pytest

pytest.importorskip("onnx")

from conformance import (  # noqa: E402
    CATEGORIES,
    CONTROL,
    DOMAIN,
    DTYPE,
    DYNAMIC,
    FEATURE,
    OP,
    PRECISION,
    RANDOM,
    STRINGS,
    TRAINING,
    TYPES,
    all_cases,
    excluded,
    run_case,
)

from gpucore.onnx import backend  # noqa: E402

# ---------------------------------------------------------------------- the CPU's exclusions
EXCLUDED = {
    "ConcatFromSequence": (TYPES, ""),  # 2
    "OptionalGetElement": (TYPES, ""),
    "OptionalHasElement": (TYPES, ""),  # 4
    "SequenceAt": (TYPES, ""),  # 4
    "SequenceLength": (TYPES, ""),  # 2
    "type:optional": (TYPES, ""),  # 8
    "type:sequence": (TYPES, ""),  # 21
    "ImageDecoder": (STRINGS, ""),  # 9
    "TfIdfVectorizer": (STRINGS, ""),  # 7
    "dtype:STRING": (STRINGS, ""),  # 32
    "dtype:BFLOAT16": (DTYPE, ""),  # 27
    "dtype:FLOAT4E2M1": (DTYPE, ""),  # 14
    "dtype:FLOAT8E4M3FN": (DTYPE, ""),  # 22
    "dtype:FLOAT8E4M3FNUZ": (DTYPE, ""),  # 18
    "dtype:FLOAT8E5M2": (DTYPE, ""),  # 20
    "dtype:FLOAT8E5M2FNUZ": (DTYPE, ""),  # 18
    "dtype:FLOAT8E8M0": (DTYPE, ""),  # 4
    "dtype:INT2": (DTYPE, ""),  # 17
    "dtype:INT4": (DTYPE, ""),  # 17
    "dtype:UINT2": (DTYPE, ""),  # 17
    "dtype:UINT4": (DTYPE, ""),  # 17
    "domain:ai.onnx.ml": (DOMAIN, ""),  # 4
    "domain:ai.onnx.preview": (DOMAIN, ""),  # 11
    "domain:ai.onnx.preview.training": (DOMAIN, ""),  # 9
    "NegativeLogLikelihoodLoss": (TRAINING, ""),  # 52
    "SoftmaxCrossEntropyLoss": (TRAINING, ""),  # 34
    "If": (CONTROL, ""),  # 5
    "Loop": (CONTROL, ""),  # 4
    "Scan": (CONTROL, ""),  # 18
    "Bernoulli": (RANDOM, ""),  # 3
    "RandomUniformLike": (RANDOM, ""),  # 3
    "Compress": (DYNAMIC, ""),  # 4
    "NonMaxSuppression": (DYNAMIC, ""),  # 10
    "Unique": (DYNAMIC, ""),  # 6
    "AffineGrid": (OP, ""),  # 4
    "BitCast": (OP, ""),  # 8
    "CausalConvWithState": (OP, ""),  # 13
    "Col2Im": (OP, ""),  # 5
    "DFT": (OP, ""),  # 10
    "DeformConv": (OP, ""),  # 4
    "Det": (OP, ""),  # 2
    "GRU": (OP, ""),  # 6
    "GridSample": (OP, ""),  # 18
    "LSTM": (OP, ""),  # 6
    "LinearAttention": (OP, ""),  # 14
    "MaxUnpool": (OP, ""),  # 2
    "RNN": (OP, ""),  # 6
    "ReverseSequence": (OP, ""),  # 2
    "RoiAlign": (OP, ""),  # 3
    "STFT": (OP, ""),  # 2
    "TensorScatter": (OP, ""),  # 3
    "test_melweightmatrix": (OP, ""),
    "test_nonzero_example": (OP, ""),
    # opset 6 PRelu broadcast a [C] slope over channels; onnx's version converter keeps it as is
    "pytorch-converted/test_PReLU_*d_multiparam": (FEATURE, "an opset-6 PRelu slope of shape [C]"),
    "test_attention_4d_causal_fp16*": (
        PRECISION,
        "float16: 2 ulps from numpy's float16 reference",
    ),  # 2
}

# ------------------------------------------------- Vulkan's, for the cases the CPU passes
# (empty: every case the CPU passes passes on lavapipe too. int8 / uint8 / int16 / uint16 / uint32
# run on binary.comp, int64 / uint64 on binary64.comp, float16 on its half types, and GEMM on half
# inputs, integer division, remainder, pow and the bitwise ops on binary.comp / binary64.comp,
# float64 arithmetic, casts and products, convolutions and attention on binaryf64.comp /
# gemm64.comp / reduce64.comp / scan64 / im2col; GEMM operands larger than one binding in bands)
VULKAN_EXCLUDED: dict = {}

CASES = all_cases()
CPU_RUN = [c for c in CASES if excluded(c, EXCLUDED) is None]
# Vulkan runs what the CPU passes, but for the two largest real models (CI time: on lavapipe
# VGG-19, whose 392 MiB weight runs in GEMM bands, took 27 s and DenseNet-121 12 s under load,
# against about 1 s on the CPU; both pass there, 2026-11-28)
CPU_ONLY = ("real/test_vgg19", "real/test_densenet121")
VULKAN_CASES = [c for c in CPU_RUN if c.name not in CPU_ONLY]
VULKAN_RUN = [c for c in VULKAN_CASES if excluded(c, VULKAN_EXCLUDED) is None]


def _ids(cases: list) -> list:
    return [pytest.param(c, id=c.name) for c in cases]


@pytest.mark.parametrize("case", _ids(CPU_RUN))
def test_cpu(case):
    run_case(backend, case, "CPU")


@pytest.mark.parametrize("case", _ids(VULKAN_RUN))
def test_vulkan(vulkan, case):
    run_case(backend, case, "VULKAN")


def _passing(cases: list, table: dict, device: str) -> list:
    """The cases ``table`` excludes that pass on ``device``, with the entry excluding them."""
    out = []
    for case in cases:
        hit = excluded(case, table)
        if hit is None:
            continue
        try:
            run_case(backend, case, device)
        except Exception:  # noqa: BLE001 - failing is what an excluded case is expected to do
            continue
        out.append(f"{case.name} (excluded by {hit[0]!r})")
    return out


def test_excluded_cases_still_fail_on_cpu():
    passing = _passing(CASES, EXCLUDED, "CPU")
    assert passing == [], "these pass now: narrow or remove their EXCLUDED entries"


def test_vulkan_excluded_cases_still_fail(vulkan):
    passing = _passing(VULKAN_CASES, VULKAN_EXCLUDED, "VULKAN")
    assert passing == [], "these pass now: narrow or remove their VULKAN_EXCLUDED entries"


@pytest.mark.parametrize("table", ["EXCLUDED", "VULKAN_EXCLUDED"])
def test_every_exclusion_covers_a_case_and_names_a_category(table):
    entries = globals()[table]
    cases = CASES if table == "EXCLUDED" else VULKAN_CASES
    used = {hit[0] for hit in (excluded(c, entries) for c in cases) if hit is not None}
    assert sorted(set(entries) - used) == [], "entries no case reaches: remove them"
    assert all(category in CATEGORIES for category, _ in entries.values())


if __name__ == "__main__":  # the pass counts for the README
    import json

    from conformance import summary

    print(json.dumps(summary(backend, EXCLUDED), indent=1))
