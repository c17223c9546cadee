"""The CPU extension under every instruction set (import cpu_isa_harness), for tests/backends/cpu.

Loads gpucore._cpu as ``C`` and lists the ISAs this CPU supports. Every ISA is forced once through
GPUCORE_CPU_ISA in a subprocess running SCRIPT, which writes its results to an .npz file (one
subprocess per ISA per session: the ``isa_outputs`` fixture of tests/backends/cpu/conftest.py);
the tests compare them with the portable scalar reference and with float64.  A test module's own
script runs under every ISA through run_under_every_isa (its printed output) or isa_pickles (the
objects it pickles).
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np


def _load_cpu():
    """gpucore._cpu; if the package itself fails to import, load the built .so directly."""
    try:
        from gpucore import _cpu

        return _cpu
    except Exception:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def run_under_every_isa(script, *args, path=()):
    """Runs the file ``script`` (with ``args``) once per ISA this CPU has, GPUCORE_CPU_ISA forced,
    all at once, tests/ and ``path`` on PYTHONPATH; asserts that each exits 0 and prints its ISA's
    name first.  Returns {isa: its output}."""
    tests = os.path.dirname(os.path.abspath(__file__))
    pythonpath = os.pathsep.join([*path, tests, os.environ.get("PYTHONPATH", "")])
    procs = {}
    for isa in ISAS:
        env = dict(os.environ, GPUCORE_CPU_ISA=isa, PYTHONPATH=pythonpath)
        procs[isa] = subprocess.Popen([sys.executable, str(script), *args], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    outs = {}
    for isa, p in procs.items():
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"GPUCORE_CPU_ISA={isa}:\n{out}"
        assert out.split()[0] == isa
        outs[isa] = out
    return outs


def isa_pickles(d, script, *args):
    """Writes the text ``script`` into folder ``d`` and runs it once per ISA this CPU has,
    GPUCORE_CPU_ISA forced, all at once, tests/ on PYTHONPATH (argv: the .pkl file it writes,
    then ``args``); asserts that each exits 0.  Returns {isa: what it pickled}."""
    path = d / "run.py"
    path.write_text(script)
    tests = os.path.dirname(os.path.abspath(__file__))
    pythonpath = os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])
    procs = {}
    for isa in ISAS:
        env = dict(os.environ, GPUCORE_CPU_ISA=isa, PYTHONPATH=pythonpath)
        cmd = [sys.executable, str(path), str(d / f"{isa}.pkl"), *args]
        procs[isa] = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    res = {}
    for isa, p in procs.items():
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, f"GPUCORE_CPU_ISA={isa}:\n{err}"
        with open(d / f"{isa}.pkl", "rb") as f:
            res[isa] = pickle.load(f)
    return res


def run_in_subprocess(code, **env):
    """Run ``code`` in a fresh interpreter with the extension loaded from its file as ``C``;
    ``env`` adds environment variables (GPUCORE_CPU_ISA, GPUCORE_NUM_THREADS)."""
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


def elementwise_rel(got, ref):
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
