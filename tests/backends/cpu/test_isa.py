"""Every instruction set this CPU supports: GPUCORE_CPU_ISA dispatch and info(), each ISA
variant against the portable scalar build (gemm, batched gemm, gemm_ex, unary, softmax,
bitwise-equal optimizer updates), and the vector math and fused softmax against float64.

The per-ISA results come from the session fixture ``isa_outputs`` (tests/backends/cpu/conftest.py,
one subprocess per ISA; see cpu_isa_harness).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from cpu_isa_harness import (
    DENORM,
    INFO,
    ISAS,
    VECTOR_ISAS,
    elementwise_rel,
    run_in_subprocess,
    unary_inputs,
)


def _max_rel_norm(got, ref):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300))


# ------------------------------------------------------------------------------ dispatch, info
def test_info_reports_isa_threads_caches_and_blocking():
    assert INFO["isa"] in INFO["available"]
    assert INFO["available"][-1] == "scalar"
    assert INFO["threads"] >= 1
    caches = INFO["caches"]
    assert caches["l1d"] >= 16 * 1024 and caches["l2"] >= 128 * 1024
    assert caches["source"] in ("cpuid", "sysconf", "default")
    for dt in ("float32", "float64"):
        g = INFO["gemm"][dt]
        assert g["kernel"].startswith("gemm_" + INFO["isa"])
        assert g["mr"] >= 1 and g["nr"] >= 1 and g["kc"] >= 64
        assert g["mc"] % g["mr"] == 0 and g["nc"] % g["nr"] == 0


@pytest.mark.parametrize("isa", ISAS)
def test_forced_isa_is_used(isa):
    p = run_in_subprocess("print(C.info()['isa'])", GPUCORE_CPU_ISA=isa)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == isa


def test_unknown_isa_raises_import_error():
    p = run_in_subprocess("pass", GPUCORE_CPU_ISA="avx9")
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "GPUCORE_CPU_ISA=avx9" in p.stderr
    assert "supports: " + ", ".join(ISAS) in p.stderr


@pytest.mark.skipif("avx512" in ISAS, reason="this CPU supports every x86 ISA")
def test_missing_isa_raises_import_error_naming_it():
    p = run_in_subprocess("pass", GPUCORE_CPU_ISA="avx512")
    assert p.returncode != 0
    assert "does not support avx512" in p.stderr and "supports: " in p.stderr


def test_num_threads_env():
    p = run_in_subprocess("print(C.info()['threads'])", GPUCORE_NUM_THREADS="3")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "3"


# ----------------------------------------------------------------------- ISA variants vs scalar
@pytest.mark.parametrize("isa", [i for i in ISAS if i != "scalar"])
def test_isa_gemm_matches_scalar(isa_outputs, isa):
    got, ref = isa_outputs[isa], isa_outputs["scalar"]
    keys = [k for k in ref if k.startswith(("gemm", "batch", "accum", "ex"))]
    assert len(keys) > 100
    for key in keys:
        tol = 1e-12 if key.endswith("float64") else 1e-4
        assert got[key].shape == ref[key].shape, key
        assert _max_rel_norm(got[key], ref[key]) <= tol, (key, _max_rel_norm(got[key], ref[key]))


@pytest.mark.parametrize("isa", [i for i in ISAS if i != "scalar"])
def test_isa_unary_and_softmax_match_scalar(isa_outputs, isa):
    got, ref = isa_outputs[isa], isa_outputs["scalar"]
    for key in [k for k in ref if k.startswith(("u_", "softmax"))]:
        rel, small = elementwise_rel(got[key], ref[key])
        assert rel <= 1e-5 and small <= 8 * DENORM, (key, rel, small)


@pytest.mark.parametrize("isa", ISAS)
def test_isa_softmax_rows_match_float64(isa_outputs, isa):
    """Every ISA's fused exp(x - m) + sum (gc_isa.vexp_shift_sum_f32, through softmax,
    log-softmax and the cross-entropy logsumexp) against float64 exp + sum, on every tail length
    and chunk edge.  Log-softmax outputs near a dominating max are -log(sum) ~ 1e-4, so the
    relative bound there checks that the sum is good to ~1e-6 of sum - 1, not just of sum."""
    got = isa_outputs[isa]
    for key in [k for k in got if k.startswith("in_softmax")]:
        n = int(key[len("in_softmax") :])
        x32 = got[key]
        x = x32.astype(np.float64)
        m = x.max(1, keepdims=True)
        d = (x32 - x32.max(1, keepdims=True)).astype(np.float64)  # x - m as the kernels round it
        e = np.exp(d)
        lse = np.log(e.sum(1, keepdims=True))
        sm, lsm = e / e.sum(1, keepdims=True), d - lse
        y0, y1 = got[f"softmax_len{n}_0"], got[f"softmax_len{n}_1"]
        np.testing.assert_allclose(y0, sm, rtol=1e-6, atol=1e-37, err_msg=f"softmax n={n}")
        np.testing.assert_allclose(y1, lsm, rtol=2e-6, atol=1e-6, err_msg=f"log-softmax n={n}")
        # near the max (|out| < 1e-2) the relative error of -log(sum) itself
        small = np.abs(lsm) < 1e-2
        rel = np.abs(y1[small] - lsm[small]) / np.maximum(np.abs(lsm[small]), 1e-30)
        assert rel.max(initial=0.0) <= 1e-4, (n, rel.max())
        ce = got[f"softmax_ce{n}"]
        t = np.arange(3) % n
        want_lse = (m + lse)[:, 0]
        np.testing.assert_allclose(ce[3:], want_lse, rtol=1e-6, atol=1e-6, err_msg=f"lse n={n}")
        np.testing.assert_allclose(ce[:3], want_lse - x[np.arange(3), t], rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------- vector math vs float64
def _ref64(name, x):
    with np.errstate(all="ignore"):
        x = x.astype(np.float64)
        if name == "EXP":
            return np.exp(x)
        if name == "LOG":
            return np.log(x)
        if name == "TANH":
            return np.tanh(x)
        if name == "SIGMOID":
            e = np.exp(-np.abs(x))
            return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        if name == "GELU":
            erfc = np.vectorize(math.erfc, otypes=[np.float64])
            r = 0.5 * x * erfc(-x / math.sqrt(2.0))
            return np.where(np.isneginf(x), -0.0, np.where(np.isposinf(x), x, r))
        v = 2.0 * math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
        e = np.exp(-np.abs(v))
        r = x * np.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        return np.where(np.isneginf(x), -0.0, np.where(np.isposinf(x), x, r))


TOL = {"EXP": 2e-7, "TANH": 2e-7, "SIGMOID": 2e-7, "LOG": 1e-6, "GELU": 1e-6, "GELU_TANH": 1e-6}


@pytest.fixture(scope="module")
def float64_refs():
    x = unary_inputs()
    return x, {name: _ref64(name, x) for name in TOL}


@pytest.mark.parametrize("isa", VECTOR_ISAS)
@pytest.mark.parametrize("name", list(TOL))
def test_vector_math_accuracy(isa_outputs, float64_refs, isa, name):
    x, refs = float64_refs
    got = isa_outputs[isa]["u_" + name]
    rel, small = elementwise_rel(got, refs[name])
    assert rel <= TOL[name], (name, rel)
    assert small <= 4 * DENORM, (name, small / DENORM)  # denormal results: a few units


@pytest.mark.parametrize("isa", VECTOR_ISAS)
def test_vector_math_special_values_exact(isa_outputs, isa):
    o = isa_outputs[isa]  # inputs: 0, -0, inf, -inf, nan, +-denormal, +-1e-40, +-FLT_MIN, ...
    inf, nan = np.inf, np.nan
    d = np.float32(DENORM)
    expect = {
        "EXP": [1, 1, inf, 0, nan, 1, 1, 1, 1, 1, 1],
        "LOG": [
            -inf,
            -inf,
            inf,
            nan,
            nan,
            math.log(DENORM),
            nan,
            math.log(float(np.float32(1e-40))),
            nan,
        ],
        "TANH": [0.0, -0.0, 1, -1, nan, d, -d, np.float32(1e-40), -np.float32(1e-40)],
        "SIGMOID": [0.5, 0.5, 1, 0, nan, 0.5, 0.5, 0.5, 0.5],
        "GELU": [0.0, -0.0, inf, -0.0, nan],
        "GELU_TANH": [0.0, -0.0, inf, -0.0, nan],
    }
    for name, vals in expect.items():
        got = o["u_" + name][: len(vals)].astype(np.float64)
        want = np.array(vals, np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0, err_msg=name)
        zero = want == 0
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), name
    # large magnitudes
    big = {"EXP": (1e30, inf), "TANH": (1e30, 1.0), "SIGMOID": (-1e30, 0.0), "GELU": (1e30, 1e30)}
    for name, (xv, want) in big.items():
        i = int(np.flatnonzero(unary_inputs()[:40] == np.float32(xv))[0])
        assert o["u_" + name][i] == np.float32(want), name


# ------------------------------------------------------------------------------ optimizers
@pytest.mark.parametrize("isa", VECTOR_ISAS + ["sse2"])
@pytest.mark.parametrize("opt", ["sgd", "adam", "rmsprop"])
def test_optimizer_updates_are_bitwise_equal_on_every_isa(isa_outputs, isa, opt):
    # The loops are compiled per ISA (vectorized to its width) without FMA contraction: every
    # instruction set must give exactly the scalar build's bits.
    if isa not in isa_outputs:
        pytest.skip(f"{isa} is not supported by this CPU")
    for key in isa_outputs["scalar"]:
        if key.startswith(opt):
            np.testing.assert_array_equal(
                isa_outputs[isa][key], isa_outputs["scalar"][key], err_msg=f"{key} on {isa}"
            )
