"""gemm.c's small-m path with a weight too large to stay in L3 (gemv_t's streaming form, which
prefetches the next rows of B for one row of A): the bits of the same columns computed by calls
whose B stays under the bound, under every instruction set."""

import os
import subprocess
import sys
import textwrap

import numpy as np

from gpucore import _cpu

ISAS = _cpu.info()["available"]


def stream_case(dt=np.float32, k=2048, seed=0):
    """(full, halves): y = x @ W^T + b for one row x and a W of half the L3 or more (the
    streaming form), and the same columns from two calls on W's halves (under the bound)."""
    bound = _cpu.info()["gemv_stream_bytes"]  # half the L3, or 8 MiB where none is reported
    n = -(-bound // (k * np.dtype(dt).itemsize))
    n += n % 2
    assert n > 0
    r = np.random.default_rng(seed)
    w = r.standard_normal((n, k)).astype(dt)
    x = r.standard_normal((1, k)).astype(dt)
    b = r.standard_normal(n).astype(dt)
    full = np.empty((1, n), dt)
    _cpu.gemm_ex(x, w, full.reshape(-1), 1, 1, n, k, 0, 1, 1.0, 0.0, 0, 0, n, b, _cpu.UNARY_RELU)
    halves = np.empty((1, n), dt)
    h = n // 2
    for j in (0, h):
        part = np.empty((1, h), dt)
        wj, bj = np.ascontiguousarray(w[j : j + h]), np.ascontiguousarray(b[j : j + h])
        _cpu.gemm_ex(x, wj, part.reshape(-1), 1, 1, h, k, 0, 1, 1.0, 0.0, 0, 0, h, bj,
                     _cpu.UNARY_RELU)  # fmt: skip
        halves[:, j : j + h] = part
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64).T + b, 0)
    return full, halves, want


def test_streaming_gemv_gives_the_bits_of_smaller_calls():
    for dt in (np.float32, np.float64):
        full, halves, want = stream_case(dt)
        np.testing.assert_array_equal(full, halves)
        np.testing.assert_allclose(full, want, rtol=1e-4, atol=1e-3)


def split_case(threads, dt=np.float32, seed=1):
    """Small-m products (one row and three, B stored n x k and k x n, one item and a batch of
    independent ones) at odd sizes around the work chunks (64 / 128 columns; with a short k
    several per claim), with beta 0 and 1, computed on each of ``threads`` thread counts:
    [(case, [result per count], float64 reference)]."""
    r = np.random.default_rng(seed)
    out = []
    before = _cpu.info()["threads"]
    try:
        cases = [(1, 1000, 1500, 1, 1), (1, 2047, 700, 1, 1), (3, 129, 4099, 1, 1),
                 (1, 65, 9000, 1, 1), (1, 333, 1000, 0, 1), (1, 200, 900, 1, 5),
                 (2, 1000, 2048, 1, 3), (1, 25001, 40, 1, 1), (1, 30000, 33, 0, 1)]  # fmt: skip
        for m, n, k, tb, batch in cases:  # (rows, columns, k, B stored n x k, items)
            a = r.standard_normal((batch, m, k)).astype(dt)
            b = r.standard_normal((batch, n, k) if tb else (batch, k, n)).astype(dt)
            bias = r.standard_normal(n).astype(dt)
            c0 = r.standard_normal((batch, m, n)).astype(dt)
            bt = np.swapaxes(b, 1, 2) if tb else b
            prod = a.astype(np.float64) @ bt.astype(np.float64)
            # beta 0 into NaN (a skipped chunk stays NaN) with bias and ReLU; beta 1 onto c0 (a
            # chunk computed twice adds its product twice)
            for beta in (0.0, 1.0):
                got = []
                for t in threads:
                    _cpu.set_num_threads(t)
                    c = np.full((batch, m, n), np.nan, dt) if beta == 0 else c0.copy()
                    epilogue = (bias, _cpu.UNARY_RELU) if beta == 0 else (None, -1)
                    _cpu.gemm_ex(a, b, c.reshape(-1), batch, m, n, k, 0, tb, 1.0, beta, m * k,
                                 b[0].size, m * n, *epilogue)  # fmt: skip
                    got.append(c)
                want = np.maximum(prod + bias, 0) if beta == 0 else prod + c0
                out.append(((m, n, k, tb, batch, beta), got, want))
    finally:
        _cpu.set_num_threads(before)
    return out


def test_small_m_split_gives_the_same_bits_on_any_thread_count():
    """Each thread's contiguous share of the column chunks, the rest taken by whoever is done
    first (gemm_small_m.h's gemv_split): 1, 2, 3 and 8 threads give the same bits."""
    for dt in (np.float32, np.float64):
        for case, got, want in split_case((1, 2, 3, 8), dt):
            for g in got[1:]:
                np.testing.assert_array_equal(g, got[0], err_msg=str(case))
            np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-3 * np.sqrt(case[2]))


ISA_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_gemv_stream import split_case, stream_case
    from gpucore import _cpu
    full, halves, want = stream_case(np.float32, k=1000, seed=3)
    ok = np.array_equal(full, halves) and np.allclose(full, want, rtol=1e-4, atol=1e-3)
    for case, got, ref in split_case((1, 2, 3, 8)):
        ok = ok and all(np.array_equal(g, got[0]) for g in got[1:])
        ok = ok and np.allclose(got[0], ref, rtol=1e-4, atol=1e-3 * np.sqrt(case[2]))
    print(_cpu.info()["isa"], ok)
    sys.exit(0 if ok else 1)
    """
)


def test_streaming_gemv_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has), one subprocess each."""
    script = tmp_path / "isa_gemv_stream.py"
    script.write_text(ISA_SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    path = os.pathsep.join([here, root, os.environ.get("PYTHONPATH", "")])
    procs = {}
    for isa in ISAS:
        env = dict(os.environ, GPUCORE_CPU_ISA=isa, PYTHONPATH=path)
        procs[isa] = subprocess.Popen([sys.executable, str(script), here], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    for isa, p in procs.items():
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"GPUCORE_CPU_ISA={isa}:\n{out}"
        assert out.split()[0] == isa
