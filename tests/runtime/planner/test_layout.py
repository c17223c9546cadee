"""gpucore.runtime.planner.layout: chained Linear layers whose hidden activations the compiled
executor keeps transposed (gemm_ex's bias_rows) give the interpreted executor's bits, for any
thread count and under every instruction set, and the chains are only the ones the rule allows."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from runtime_models import rand

import gpucore
import gpucore.nn as nn
from gpucore import _cpu, runtime
from gpucore.runtime.planner.layout import transposed

ISAS = _cpu.info()["available"]


def chain(widths, acts, seed=0, bias=True, dtype=None):
    """Linear layers widths[0] -> widths[1] -> ..., acts[i] after layer i (None, "relu",
    "gelu")."""
    gpucore.manual_seed(seed)
    layers = []
    for i, act in enumerate(acts):
        layers.append(nn.Linear(widths[i], widths[i + 1], bias=bias))
        if act == "relu":
            layers.append(nn.ReLU())
        elif act == "gelu":
            layers.append(nn.GELU())
    model = nn.Sequential(*layers)
    if dtype is not None:
        model = model.to(dtype)
    return model


def both(model, x):
    """(interpreted, compiled) outputs and the compiled executor's layouts."""
    interpreted = runtime.compile(model, [x], device="cpu", executor="interpreted")
    compiled = runtime.compile(model, [x], device="cpu")
    (ex,) = compiled.executors()
    return interpreted.run_arrays([x])[0], compiled.run_arrays([x])[0], transposed(ex.plan)


def reference(model, x):
    """float64 numpy of the model's Linear / ReLU / GELU layers."""
    import math

    y = x.astype(np.float64)
    for layer in model:
        if isinstance(layer, nn.Linear):
            y = y @ layer.weight.detach().numpy().astype(np.float64).T
            if layer.bias is not None:
                y = y + layer.bias.detach().numpy()
        elif isinstance(layer, nn.ReLU):
            y = np.maximum(y, 0)
        else:
            y = 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))
    return y


def test_the_mlp_chain_is_transposed_between_its_layers():
    model = chain([512, 512, 512, 512], ["relu", "relu", None])
    x = rand(32, 512, seed=1)
    a, b, lay = both(model, x)
    if _cpu.info()["gemm"]["float32"]["mr"] == 14:  # (AVX-512's 14 x 32 tile: runs swapped)
        assert sorted(lay.values()) == [(0, 1), (1, 0), (1, 1)]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(b, reference(model, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "widths, acts, batch, bias",
    [
        ([300, 300, 300], ["relu", None], 32, True),
        ([300, 301, 290, 260], ["relu", None, "relu"], 30, True),
        ([300, 300, 300], [None, "relu"], 30, False),
        ([400, 301, 300, 300], ["relu", "relu", "gelu"], 62, True),  # GELU after the GEMM
        ([300, 300, 300], ["gelu", None], 32, True),  # a GELU output stays row-major
        ([512, 300, 7], ["relu", None], 30, True),  # the last one narrow: not transposed
        ([512, 20, 300], ["relu", None], 30, True),  # C^T of 20 rows: small-m, not transposed
        ([257, 301, 290, 33], ["relu", None, "relu"], 25, True),  # 25 rows: not swapped
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_odd_chains_give_the_interpreted_bits(widths, acts, batch, bias, dtype):
    model = chain(
        widths, acts, seed=3, bias=bias, dtype=gpucore.float64 if dtype == np.float64 else None
    )
    x = rand(batch, widths[0], seed=4, dtype=dtype)
    a, b, lay = both(model, x)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(b, reference(model, x), rtol=1e-4, atol=1e-4)
    if acts[0] == "gelu" or widths[-1] == 7 or widths[1] == 20 or batch == 25:
        assert lay == {}
    elif dtype == np.float32 and _cpu.info()["gemm"]["float32"]["mr"] == 14:  # (AVX-512)
        assert lay, "expected a transposed chain"


def test_small_batches_and_shared_hidden_tensors_keep_the_layout():
    """Batches the GEMM runs as gemv (other bits than the blocked product), a hidden tensor that
    is also an output or read twice: nothing transposed."""
    model = chain([512, 512, 512], ["relu", None])
    for batch in (1, 16, 24):
        _, _, lay = both(model, rand(batch, 512))
        assert lay == {}

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(300, 300), nn.Linear(300, 300)

        def forward(self, x):
            h = self.a(x)
            return self.b(h), h

    x = rand(32, 300)
    m = Two()
    compiled = runtime.compile(m, [x], device="cpu")
    (ex,) = compiled.executors()
    assert transposed(ex.plan) == {}
    interpreted = runtime.compile(m, [x], device="cpu", executor="interpreted")
    for u, v in zip(compiled.run_arrays([x]), interpreted.run_arrays([x])):
        np.testing.assert_array_equal(u, v)


def test_bitwise_for_any_thread_count():
    model = chain([300, 520, 300, 300], ["relu", "relu", None], seed=5)
    x = rand(32, 300, seed=6)
    compiled = runtime.compile(model, [x], device="cpu")
    (ex,) = compiled.executors()
    assert transposed(ex.plan)
    old = _cpu.info()["threads"]
    try:
        outs = []
        for t in (1, 2, 3, 8):
            _cpu.set_num_threads(t)
            outs.append(compiled.run_arrays([x])[0])
    finally:
        _cpu.set_num_threads(old)
    for o in outs[1:]:
        np.testing.assert_array_equal(outs[0], o)


def test_gemm_ex_bias_rows():
    """C^T with the bias per row: the bits of the row-major product's bias per column, moved."""
    r = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        for m, n, k, act in [(300, 32, 300, _cpu.UNARY_RELU), (33, 5, 70, -1), (7, 40, 3, -1)]:
            w = r.standard_normal((m, k)).astype(dt)
            x = r.standard_normal((n, k)).astype(dt)
            bias = r.standard_normal(m).astype(dt)
            ct = np.empty((m, n), dt)
            _cpu.gemm_ex(w, x, ct.reshape(-1), 1, m, n, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, act, 1)
            c = np.empty((n, m), dt)
            _cpu.gemm_ex(x, w, c.reshape(-1), 1, n, m, k, 0, 1, 1.0, 0.0, 0, 0, 0, bias, act)
            if n > 16:  # (outside the small-m and narrow paths' other orders)
                np.testing.assert_array_equal(ct, c.T)
            want = w.astype(np.float64) @ x.astype(np.float64).T + bias[:, None]
            if act == _cpu.UNARY_RELU:
                want = np.maximum(want, 0)
            np.testing.assert_allclose(ct, want, rtol=1e-4, atol=1e-4)


def test_gemm_ex_bias_rows_errors():
    a, b, c = (np.zeros(16, np.float32) for _ in range(3))
    bias = np.zeros(4, np.float32)
    for batch, alpha, act in [(2, 1.0, -1), (1, 0.5, -1), (1, 1.0, _cpu.UNARY_GELU)]:
        with pytest.raises(ValueError, match="gemm_ex: bias_rows=1 needs batch 1"):
            _cpu.gemm_ex(a, b, c, batch, 4, 2, 2, 0, 0, alpha, 0.0, 0, 0, 8, bias, act, 1)
    with pytest.raises(ValueError, match="bias"):  # m values, not n
        _cpu.gemm_ex(a, b, c, 1, 8, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, bias, -1, 1)
    with pytest.raises(ValueError, match="bias_rows"):
        _cpu.gemm_ex(a, b, c, 1, 4, 2, 2, 0, 0, 1.0, 0.0, 0, 0, 0, bias, -1, 2)


ISA_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    from test_layout import chain, both
    from runtime_models import rand
    from gpucore import _cpu
    bad, used = [], 0
    for widths, acts, batch in [([300, 300, 300], ["relu", None], 32),
                                ([257, 301, 290, 33], ["relu", None, "relu"], 40),
                                ([512, 512, 512], ["relu", None], 64)]:
        a, b, lay = both(chain(widths, acts, seed=7), rand(batch, widths[0], seed=8))
        used += len(lay)
        if not np.array_equal(a, b):
            bad.append((widths, batch))
    print(_cpu.info()["isa"], used, bad)
    sys.exit(1 if bad else 0)
    """
)


def test_bitwise_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has), one subprocess each."""
    script = tmp_path / "isa_layout.py"
    script.write_text(ISA_SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    runtime_dir = os.path.dirname(here)
    root = os.path.dirname(os.path.dirname(runtime_dir))
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    procs = {}
    for isa in ISAS:
        env = dict(os.environ, GPUCORE_CPU_ISA=isa, PYTHONPATH=path)
        procs[isa] = subprocess.Popen(
            [sys.executable, str(script), here, runtime_dir],
            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
    for isa, p in procs.items():
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"GPUCORE_CPU_ISA={isa}:\n{out}"
        assert out.split()[0] == isa
