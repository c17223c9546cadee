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


ISA_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from test_gemv_stream import stream_case
    from gpucore import _cpu
    full, halves, want = stream_case(np.float32, k=1000, seed=3)
    ok = np.array_equal(full, halves) and np.allclose(full, want, rtol=1e-4, atol=1e-3)
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
