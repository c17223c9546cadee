"""ISA dispatch, vector math accuracy, GEMM blocking edges, gemm_ex, and the thread pool.

Every instruction set this CPU supports is forced once through GPUCORE_CPU_ISA in a subprocess
that writes its results to an .npz file (one subprocess per ISA per session); the tests compare
them with the portable scalar reference and with float64.
"""

from __future__ import annotations

import glob
import importlib.util
import itertools
import math
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest


def _load_cpu():
    """gpucore._cpu; if the package itself fails to import, load the built .so directly."""
    try:
        from gpucore import _cpu

        return _cpu
    except Exception:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        paths = sorted(glob.glob(os.path.join(root, "gpucore", "_cpu*.so")))
        if not paths:
            raise
        spec = importlib.util.spec_from_file_location("gpucore._cpu", paths[0])
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


C = _load_cpu()
INFO = C.info()
ISAS = INFO["available"]  # best first, always ends with "scalar"
VECTOR_ISAS = [i for i in ISAS if i in ("avx2", "avx512")]
FMIN = float(np.finfo(np.float32).tiny)  # smallest normal
DENORM = 2.0**-149

# --------------------------------------------------------------------------------- the cases
SIZES = [1, 2, 5, 6, 7, 31, 33, 64, 65, 255, 257, 1000]
ALPHA_BETA = [(1.0, 0.0), (0.5, 2.0), (-1.5, 1.0), (2.0, -0.25)]
ACTS = ["RELU", "SIGMOID", "TANH", "GELU", "GELU_TANH"]


def gemm_cases():
    """(m, n, k): each size in each position, the other two drawn so the work stays small."""
    r = np.random.default_rng(11)
    out = []
    for pos in range(3):
        for v in SIZES:
            while True:
                mnk = [int(r.choice(SIZES)) for _ in range(3)]
                mnk[pos] = v
                if mnk[0] * mnk[1] * mnk[2] <= 4_000_000:
                    break
            out.append(tuple(mnk))
    return out + [(255, 257, 65), (1000, 33, 64), (64, 1000, 31), (65, 64, 1000)]


def unary_inputs():
    """A dense sweep of the float range plus the special values."""
    bits = np.arange(0, 2**32, 8191, dtype=np.uint64).astype(np.uint32)
    sweep = bits.view(np.float32)
    f32 = np.float32
    special = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            DENORM,
            -DENORM,
            1e-40,
            -1e-40,
            FMIN,
            -FMIN,
            np.finfo(f32).max,
            -np.finfo(f32).max,
            1e30,
            -1e30,
            88.72,
            88.73,
            89.0,
            -87.33,
            -87.34,
            -103.9,
            -104.0,
            -110.0,
            0.625,
            -0.625,
            9.0,
            -9.0,
            20.0,
            -13.2,
            -13.1,
            -10.1,
            -10.0,
        ],
        f32,
    )
    dense = np.concatenate(
        [
            np.linspace(-20, 20, 80001, dtype=f32),
            np.linspace(-110, 100, 20001, dtype=f32),
            np.linspace(-14, -9, 20001, dtype=f32),  # the gelu tails near underflow
            np.geomspace(1e-38, 1e38, 20001).astype(f32),
            -np.geomspace(1e-38, 1e38, 20001).astype(f32),
        ]
    )
    return np.concatenate([special, dense, sweep])


# The script each ISA subprocess runs: loads the extension from its file, computes every case
# and saves the outputs.
SCRIPT = textwrap.dedent(
    """
    import importlib.util, sys
    import numpy as np
    spec = importlib.util.spec_from_file_location("gpucore._cpu", sys.argv[1])
    C = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(C)
    cases = eval(sys.argv[3])
    acts = eval(sys.argv[4])
    ab = eval(sys.argv[5])
    out = {"isa": np.array(C.info()["isa"])}
    r = np.random.default_rng(0)
    for ci, (m, n, k) in enumerate(cases):
        ta, tb = ci % 2, (ci // 2) % 2
        alpha, beta = ab[ci % len(ab)]
        for dt in (np.float32, np.float64):
            a = r.standard_normal((k, m) if ta else (m, k)).astype(dt)
            b = r.standard_normal((n, k) if tb else (k, n)).astype(dt)
            c = r.standard_normal((m, n)).astype(dt)
            C.gemm(a, b, c, 1, m, n, k, ta, tb, alpha, beta, 0, 0, 0)
            out[f"gemm{ci}_{dt.__name__}"] = c
    # batched: strided A, B broadcast (stride 0), gaps in C; and sc == 0 accumulating in order
    for ci, (m, n, k) in enumerate([(7, 33, 65), (65, 31, 7), (31, 64, 257)]):
        for ta, tb in ((0, 0), (1, 1), (0, 1), (1, 0)):
            bt = 5
            a = r.standard_normal((bt, m * k)).astype(np.float32)
            b = r.standard_normal(n * k).astype(np.float32)
            sc = m * n + 3
            c = r.standard_normal(bt * sc).astype(np.float32)
            C.gemm(a, b, c, bt, m, n, k, ta, tb, 0.75, 0.5, m * k, 0, sc)
            out[f"batch{ci}{ta}{tb}"] = c
            acc = r.standard_normal((m, n)).astype(np.float32)
            C.gemm(a, r.standard_normal((bt, n * k)).astype(np.float32), acc, bt, m, n, k,
                   ta, tb, 1.0, 1.0, m * k, n * k, 0)
            out[f"accum{ci}{ta}{tb}"] = acc
    # gemm_ex: bias + activation epilogue, including shapes that run swapped (small n)
    for ci, (m, n, k) in enumerate([(64, 33, 65), (257, 5, 31), (6, 65, 1000), (1, 1, 7)]):
        for ai, act in enumerate(acts + [None]):
            code = -1 if act is None else getattr(C, "UNARY_" + act)
            ta, tb = ai % 2, (ai // 2) % 2
            a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
            b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
            bias = r.standard_normal(n).astype(np.float32)
            c = r.standard_normal((m, n)).astype(np.float32)
            C.gemm_ex(a, b, c, 1, m, n, k, ta, tb, 1.25, 0.5 if ai % 3 else 0.0, 0, 0, 0,
                      bias if ai % 2 == 0 else None, code)
            out[f"ex{ci}_{act}"] = c
    x = np.load(sys.argv[6])
    for name in ("EXP", "LOG", "TANH", "SIGMOID", "GELU", "GELU_TANH"):
        y = np.empty_like(x)
        C.unary(getattr(C, "UNARY_" + name), x, y)
        out["u_" + name] = y
    s = r.standard_normal((33, 1000)).astype(np.float32) * 10
    for lg in (0, 1):
        y = np.empty_like(s)
        C.softmax(s, y, 33, 1000, 1, lg)
        out[f"softmax{lg}"] = y
        y = np.empty_like(s)
        C.softmax(s, y, 3, 11, 1000, lg)
        out[f"softmax_cols{lg}"] = y
    # the fused exp-shift-sum over every tail length, chunk edges and long rows; rows where the
    # max dominates (log-softmax near the max is -log(sum), ~1e-4) and rows of ties
    for n in list(range(1, 41)) + [127, 128, 129, 255, 256, 1000, 4099]:
        s = (r.standard_normal((3, n)) * 10).astype(np.float32)
        s[1] *= 0.2  # ls = log(sum) ~ 1e-5..1e-9: small, yet far above double's 1 + 2e-16
        s[1, n // 2] += 12.0
        s[2, : (n + 1) // 2] = 7.0
        out[f"in_softmax{n}"] = s
        for lg in (0, 1):
            y = np.empty_like(s)
            C.softmax(s, y, 3, n, 1, lg)
            out[f"softmax_len{n}_{lg}"] = y
        t = np.arange(3, dtype=np.int64) % n
        loss, lse = np.empty(3, np.float32), np.empty(3, np.float32)
        C.cross_entropy_forward(s, t, loss, lse, 3, n, -100)
        out[f"softmax_ce{n}"] = np.concatenate([loss, lse])
    # fused optimizer updates, below and above the threading grain
    for n in (37, 140001):
        for dt in (np.float32, np.float64):
            g0, g1 = (r.standard_normal(n).astype(dt) for _ in range(2))
            p, buf = r.standard_normal(n).astype(dt), np.zeros(n, dt)
            for i, g in enumerate((g0, g1)):
                C.sgd_step(p, g, buf, 0.1, 0.9, 0.0, 0.01, 1, 0, int(i == 0))
            out[f"sgd{n}_{dt.__name__}"] = np.concatenate([p, buf])
            p, m, v, vmax = r.standard_normal(n).astype(dt), *(np.zeros(n, dt) for _ in range(3))
            for t, g in enumerate((g0, g1), 1):
                C.adam_step(p, g, m, v, vmax, t, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 0)
            out[f"adam{n}_{dt.__name__}"] = np.concatenate([p, m, v, vmax])
            p, sq, ga, mb = r.standard_normal(n).astype(dt), *(np.zeros(n, dt) for _ in range(3))
            for g in (g0, g1):
                C.rmsprop_step(p, g, sq, ga, mb, 0.01, 0.99, 1e-8, 0.05, 0.7, 0)
            out[f"rmsprop{n}_{dt.__name__}"] = np.concatenate([p, sq, ga, mb])
    np.savez(sys.argv[2], **out)
    """
)


@pytest.fixture(scope="module")
def isa_outputs(tmp_path_factory):
    """{isa: npz of outputs} for every ISA of this CPU, each computed in its own subprocess."""
    d = tmp_path_factory.mktemp("isa")
    xpath = str(d / "x.npy")
    np.save(xpath, unary_inputs())
    script = d / "run.py"
    script.write_text(SCRIPT)
    procs = {}
    for isa in ISAS:
        env = dict(os.environ, GPUCORE_CPU_ISA=isa)
        args = [
            sys.executable,
            str(script),
            C.__file__,
            str(d / f"{isa}.npz"),
            repr(gemm_cases()),
            repr(ACTS),
            repr(ALPHA_BETA),
            xpath,
        ]
        procs[isa] = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True)
    out = {}
    for isa, p in procs.items():
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"GPUCORE_CPU_ISA={isa} run failed:\n{err}"
        out[isa] = dict(np.load(d / f"{isa}.npz"))
        assert str(out[isa]["isa"]) == isa
    return out


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


def _run(code, **env):
    e = dict(os.environ)
    e.update(env)
    pre = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('gpucore._cpu', {C.__file__!r})\n"
        "C = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(C)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", pre + code], env=e, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("isa", ISAS)
def test_forced_isa_is_used(isa):
    p = _run("print(C.info()['isa'])", GPUCORE_CPU_ISA=isa)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == isa


def test_unknown_isa_raises_import_error():
    p = _run("pass", GPUCORE_CPU_ISA="avx9")
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "GPUCORE_CPU_ISA=avx9" in p.stderr
    assert "supports: " + ", ".join(ISAS) in p.stderr


@pytest.mark.skipif("avx512" in ISAS, reason="this CPU supports every x86 ISA")
def test_missing_isa_raises_import_error_naming_it():
    p = _run("pass", GPUCORE_CPU_ISA="avx512")
    assert p.returncode != 0
    assert "does not support avx512" in p.stderr and "supports: " in p.stderr


def test_num_threads_env():
    p = _run("print(C.info()['threads'])", GPUCORE_NUM_THREADS="3")
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


def _elementwise_rel(got, ref):
    """Max relative difference, NaN positions equal, tiny values compared absolutely.  ref may be
    float64: where it rounds to a float32 infinity, got must be that infinity."""
    with np.errstate(invalid="ignore", over="ignore"):  # sNaN inputs, float64 > FLT_MAX
        got = np.asarray(got, np.float64)
        ref = np.asarray(ref, np.float64)
        ref32 = ref.astype(np.float32).astype(np.float64)
    nan = np.isnan(ref)
    assert np.array_equal(nan, np.isnan(got))
    g, r, r32 = got[~nan], ref[~nan], ref32[~nan]
    inf = np.isinf(r32)
    assert np.array_equal(g[inf], r32[inf])
    g, r = g[~inf], r[~inf]
    big = np.abs(r) >= FMIN
    rel = np.abs(g[big] - r[big]) / np.abs(r[big])
    small = np.abs(g[~big] - r[~big])
    return float(rel.max(initial=0.0)), float(small.max(initial=0.0))


@pytest.mark.parametrize("isa", [i for i in ISAS if i != "scalar"])
def test_isa_unary_and_softmax_match_scalar(isa_outputs, isa):
    got, ref = isa_outputs[isa], isa_outputs["scalar"]
    for key in [k for k in ref if k.startswith(("u_", "softmax"))]:
        rel, small = _elementwise_rel(got[key], ref[key])
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
    rel, small = _elementwise_rel(got, refs[name])
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


# ------------------------------------------------------------------------------- gemm_ex
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
_ACT64 = {
    None: lambda v: v,
    "RELU": lambda v: np.where(v <= 0, 0.0, v),
    "SIGMOID": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "TANH": np.tanh,
    "GELU": lambda v: 0.5 * v * _ERFC(-v / math.sqrt(2)),
    "GELU_TANH": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3))),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ACTS + [None])
@pytest.mark.parametrize("m,n,k", [(65, 33, 31), (200, 3, 64), (7, 300, 129), (3, 2, 0)])
def test_gemm_ex_bias_activation(dtype, act, m, n, k):
    r = np.random.default_rng(m + n + k)
    for ta, tb in itertools.product([0, 1], [0, 1]):
        a = r.standard_normal((k, m) if ta else (m, k)).astype(dtype)
        b = r.standard_normal((n, k) if tb else (k, n)).astype(dtype)
        bias = r.standard_normal(n).astype(dtype)
        c0 = r.standard_normal((m, n)).astype(dtype)
        for beta, use_bias in ((0.0, True), (0.5, False), (1.0, True)):
            c = c0.copy()
            code = -1 if act is None else getattr(C, "UNARY_" + act)
            C.gemm_ex(
                a, b, c, 1, m, n, k, ta, tb, 1.5, beta, 0, 0, 0, bias if use_bias else None, code
            )
            oa = a.astype(np.float64).T if ta else a.astype(np.float64)
            ob = b.astype(np.float64).T if tb else b.astype(np.float64)
            pre = 1.5 * (oa @ ob) + beta * c0 + (bias if use_bias else 0.0)
            ref = _ACT64[act](pre)
            scale = 1.5 * (np.abs(oa) @ np.abs(ob)) + abs(beta) * np.abs(c0) + np.abs(bias) + 1
            tol = 1e-4 if dtype == np.float32 else 1e-12
            assert np.all(np.abs(c - ref) <= tol * scale), (ta, tb, beta, use_bias)


def test_gemm_ex_relu_keeps_nan_and_zeroes_negative_zero():
    a = np.array([[np.nan, 0.0], [-1.0, 0.0]], np.float32)
    b = np.eye(2, dtype=np.float32)
    c = np.empty((2, 2), np.float32)
    C.gemm_ex(a, b, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, None, C.UNARY_RELU)
    assert np.isnan(c[0, 0])
    assert c[1, 0] == 0 and not np.signbit(c[1, 0])


def test_gemm_ex_batched_applies_epilogue_per_item():
    r = np.random.default_rng(5)
    bt, m, n, k = 4, 9, 40, 17
    a = r.standard_normal((bt, m, k)).astype(np.float32)
    b = r.standard_normal((k, n)).astype(np.float32)
    bias = r.standard_normal(n).astype(np.float32)
    c = np.empty((bt, m, n), np.float32)
    C.gemm_ex(a, b, c, bt, m, n, k, 0, 0, 1.0, 0.0, m * k, 0, m * n, bias, C.UNARY_TANH)
    ref = np.tanh(a.astype(np.float64) @ b + bias)
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)


def test_gemm_ex_errors():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="'act' must be -1"):
        C.gemm_ex(
            x,
            x,
            np.empty((2, 2), np.float32),
            1,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            0,
            None,
            C.UNARY_EXP,
        )
    with pytest.raises(TypeError, match="'bias' must be float32"):
        C.gemm_ex(
            x, x, np.empty((2, 2), np.float32), 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, np.ones(2), -1
        )
    with pytest.raises(ValueError, match="'bias' holds 1 elements but 2"):
        C.gemm_ex(
            x,
            x,
            np.empty((2, 2), np.float32),
            1,
            2,
            2,
            2,
            0,
            0,
            1.0,
            0.0,
            0,
            0,
            0,
            np.ones(1, np.float32),
            -1,
        )
    c = np.empty((2, 2), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        C.gemm_ex(x, x, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, c.reshape(-1)[:2], -1)
    with pytest.raises(TypeError, match="exactly 16"):
        C.gemm_ex(x, x, c, 1, 2, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0)


# ---------------------------------------------------------------------------- thread pool
@pytest.fixture
def threads():
    """set_num_threads for the test, restored afterwards."""
    before = C.info()["threads"]
    yield C.set_num_threads
    C.set_num_threads(before)


def _workload():
    """Kernels big enough to run in parallel regions; returns their outputs."""
    r = np.random.default_rng(9)
    out = []
    for (m, n, k), (ta, tb) in zip(
        [(300, 257, 190), (64, 784, 512), (1000, 7, 300), (33, 1000, 65)],
        itertools.product([0, 1], [0, 1]),
    ):
        for dt in (np.float32, np.float64):
            a = r.standard_normal((k, m) if ta else (m, k)).astype(dt)
            b = r.standard_normal((n, k) if tb else (k, n)).astype(dt)
            c = np.empty((m, n), dt)
            C.gemm(a, b, c, 1, m, n, k, ta, tb, 1.0, 0.0, 0, 0, 0)
            out.append(c)
    for dt in (np.float32, np.float64):  # many K blocks, beta != 0: K blocks must run in order
        a = r.standard_normal((150, 3000)).astype(dt)
        b = r.standard_normal((3000, 100)).astype(dt)
        c = r.standard_normal((150, 100)).astype(dt)
        for _ in range(3):
            C.gemm(a, b, c, 1, 150, 100, 3000, 0, 0, 0.5, -0.75, 0, 0, 0)
        out.append(c)
    a = r.standard_normal((16, 40, 30)).astype(np.float32)  # batched, spread over threads
    b = r.standard_normal((16, 30, 20)).astype(np.float32)
    c = np.empty((16, 40, 20), np.float32)
    C.gemm(a, b, c, 16, 40, 20, 30, 0, 0, 1.0, 0.0, 1200, 600, 800)
    out.append(c)
    x = (r.standard_normal(1_000_003) * 5).astype(np.float32)
    for op in ("EXP", "TANH", "GELU", "SIN"):
        y = np.empty_like(x)
        C.unary(getattr(C, "UNARY_" + op), x, y)
        out.append(y)
    y = np.empty_like(x)
    C.binary(C.BINARY_MUL, x, x[::-1], y)
    out.append(y)
    for op in ("SUM", "MAX", "ARGMIN"):
        o = np.empty(1, np.int64 if op.startswith("ARG") else np.float32)
        C.reduce(getattr(C, "REDUCE_" + op), x, o, 1, x.size, 1)
        out.append(o)
        o = np.empty(1000, np.int64 if op.startswith("ARG") else np.float32)
        C.reduce(getattr(C, "REDUCE_" + op), x[:1_000_000], o, 1, 1000, 1000)
        out.append(o)
    s = x[:1_000_000].reshape(1000, 1000)
    for lg in (0, 1):
        y = np.empty_like(s)
        C.softmax(s, y, 1000, 1000, 1, lg)
        out.append(y)
    return out


def test_results_identical_for_any_thread_count(threads):
    threads(1)
    one = _workload()
    for n in (2, 3, 5, 8):
        threads(n)
        many = _workload()
        for i, (p, q) in enumerate(zip(one, many)):
            assert np.array_equal(p, q, equal_nan=True), (n, i)


def test_softmax_bitwise_same_for_one_and_two_threads(threads):
    """The fused exp-shift-sum sums a row in an order fixed by its length, so softmax,
    log-softmax and the cross-entropy forward give the same bits on 1 and 2 threads."""
    r = np.random.default_rng(3)
    x = (r.standard_normal((2000, 1001)) * 4).astype(np.float32)
    t = r.integers(0, 1001, 2000)
    res = []
    for n in (1, 2):
        threads(n)
        outs = []
        for lg in (0, 1):
            y = np.empty_like(x)
            C.softmax(x, y, 2000, 1001, 1, lg)
            outs.append(y)
        loss, lse = np.empty(2000, np.float32), np.empty(2000, np.float32)
        C.cross_entropy_forward(x, t, loss, lse, 2000, 1001, -100)
        res.append(outs + [loss, lse])
    for p, q in zip(*res):
        assert np.array_equal(p, q)


def test_long_sum_is_accurate():
    x = np.full(3_000_001, 0.1, np.float32)
    o = np.empty(1, np.float32)
    C.reduce(C.REDUCE_SUM, x, o, 1, x.size, 1)
    assert abs(float(o[0]) - 3_000_001 * float(np.float32(0.1))) <= 1e-6 * 300_000


def test_eight_python_threads_issue_gemms_concurrently(threads):
    threads(max(2, INFO["threads"]))
    r = np.random.default_rng(4)
    jobs = []
    for t in range(8):
        m, n, k = 100 + 7 * t, 150 - 3 * t, 120 + 11 * t
        a = r.standard_normal((m, k)).astype(np.float32)
        b = r.standard_normal((n, k)).astype(np.float32)
        jobs.append((a, b, a.astype(np.float64) @ b.T.astype(np.float64)))
    errors = []
    start = threading.Barrier(8)

    def work(a, b, ref):
        try:
            start.wait()
            c = np.empty(ref.shape, np.float32)
            for _ in range(15):
                C.gemm(a, b, c, 1, ref.shape[0], ref.shape[1], a.shape[1], 0, 1, 1.0, 0.0, 0, 0, 0)
                np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
                y = np.empty_like(c)
                C.unary(C.UNARY_TANH, c, y)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=j) for j in jobs]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a GEMM thread hung"
    assert not errors, errors[0]


def test_pool_survives_fork():
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    code = textwrap.dedent(
        """
        import os, numpy as np
        C.set_num_threads(2)
        a = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
        c = np.empty_like(a)
        C.gemm(a, a, c, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)  # workers now exist
        ref = a.astype(np.float64) @ a
        pid = os.fork()
        if pid == 0:
            d = np.empty_like(a)
            for _ in range(3):
                C.gemm(a, a, d, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)
            ok = np.allclose(d, ref, rtol=1e-4, atol=1e-3) and C.info()["threads"] == 2
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        C.gemm(a, a, c, 1, 300, 300, 300, 0, 0, 1.0, 0.0, 0, 0, 0)
        assert np.allclose(c, ref, rtol=1e-4, atol=1e-3)
        print("child", os.WEXITSTATUS(status))
        """
    )
    p = _run(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "child 0"


def test_set_num_threads_validates():
    with pytest.raises(ValueError):
        C.set_num_threads(0)
    with pytest.raises(TypeError):
        C.set_num_threads("2")


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
            np.testing.assert_array_equal(isa_outputs[isa][key], isa_outputs["scalar"][key],
                                          err_msg=f"{key} on {isa}")
