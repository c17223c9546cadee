"""Adam / AdamW (gpucore._cpu.adam_step, adam_step_multi) bit for bit against a numpy replay of
PyTorch's single-tensor formula in the parameter's precision (float32, float64), one correctly
rounded operation at a time (``denom = sqrt(v) / sqrt(bc2) + eps``, ``p += (-lr / bc1) * m /
denom``, lerp for m), under every ISA, for every option (weight decay coupled and decoupled,
AMSGrad, maximize, both lerp branches), special values (zeros of both signs, infinities, NaN,
subnormals, huge and tiny moments), bias corrections far from the usual (beta2 = 0, beta2 up to
the largest double below 1), sizes around the vector widths; the division by sqrt(bc2) on 2^16
values per constant, on both sides of the rule that picks how the kernel divides; and the
multi-tensor call over mixed sizes at the thread split's edges, bitwise the same for 1, 2, 3 and
8 threads."""

from __future__ import annotations

import itertools
import math
import os
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest
from cpu_isa_harness import C, run_under_every_isa

F = np.float32
SIZES = [1, 7, 15, 16, 17, 31, 33, 100]
# (beta1, beta2, step): usual; short memories (1 - beta1 > 0.5: torch.lerp's other branch);
# beta2 = 0 (sqrt(bc2) = 1); beta2 near 1 (sqrt(bc2) ~ 3e-5 at step 1) and the largest beta2
# below 1 (bc2 = 2^-53, sqrt(bc2) = 2^-26.5, the smallest the binding's [0, 1) allows); long runs.
SCHEDULES = [
    (0.9, 0.999, 1),
    (0.9, 0.999, 2),
    (0.9, 0.999, 1000),
    (0.9, 0.999, 10**7),
    (0.3, 0.8, 3),
    (0.9, 0.0, 5),
    (0.0, 1 - 1e-9, 1),
    (0.99, 1 - 1e-12, 40),
    (0.9, 1 - 2.0**-53, 1),
    (0.5, 1 - 2.0**-53, 3),
]
OPTIONS = [
    dict(wd=wd, decoupled=dec, amsgrad=ams, maximize=mx)
    for (wd, dec), ams, mx in itertools.product(
        ((0.0, 0), (0.1, 0), (0.05, 1)), (False, True), (0, 1)
    )
]
SPECIALS = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-30, 2.0**-149, -(2.0**-140), 3e38, 1e-38],
    F,
)


def replay(p, g, m, v, vmax, step, lr, b1, b2, eps, wd, decoupled, maximize):
    """One update in numpy in p's precision, operation by operation as the kernel's contract
    states (hyper-parameters rounded to it first, bias corrections in float64); in place."""
    F = p.dtype.type  # noqa: N806 (the float type, as at module level)
    with np.errstate(all="ignore"):
        bc1, bc2 = 1.0 - b1**step, 1.0 - b2**step
        neg_step, c = F(-(lr / bc1)), F(np.sqrt(np.float64(bc2)))  # NaN as sqrt makes it
        w1, w2 = F(1.0 - b1), F(1.0 - b2)
        g = F(-1) * g if maximize else g.copy()
        pv = p.copy()
        if wd and decoupled:
            pv = pv * F(1.0 - lr * wd)
        elif wd:
            g = g + F(wd) * pv
        d = g - m
        mv = m + w1 * d if w1 < F(0.5) else g - d * (F(1) - w1)
        vv = v * F(b2) + w2 * g * g
        m[...], v[...] = mv, vv
        if vmax is not None:
            vv = np.where(np.isnan(vmax) | (vmax > vv), vmax, vv)
            vmax[...] = vv
        denom = np.sqrt(vv) / c + F(eps)
        p[...] = pv + neg_step * mv / denom


def inputs(n, seed, dtype=F):
    """param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq: random, with special values spread
    over every buffer (exp_avg_sq also negative and subnormal)."""
    r = np.random.default_rng(seed)
    specials = SPECIALS.astype(dtype)
    if dtype is np.float64:
        specials = np.concatenate([specials, [1e300, -1e-300, 5e-324, 1e-310]])
    out = []
    for k in range(5):
        a = (r.standard_normal(n) * 10.0 ** r.integers(-20, 5, n)).astype(dtype)
        if k >= 3:
            a = np.abs(a)
        hit = r.random(n) < 0.15
        a[hit] = r.choice(specials, int(hit.sum()))
        out.append(a)
    return out


def same_bits(got, want):
    """Bit for bit, except that a NaN matches any NaN: where two NaNs meet (a NaN gradient and a
    NaN or infinite moment, say) the one returned follows the operand order the compiler chose
    for the build (scalar / SSE2 builds differ from the vector ones there), not the formula."""
    nan = np.isnan(got)
    if not np.array_equal(nan, np.isnan(want)):
        return False
    u = np.uint32 if got.dtype == np.float32 else np.uint64
    return np.array_equal(got.view(u)[~nan], want.view(u)[~nan])


def check_all() -> list:
    """Every schedule x option x size through adam_step against replay(); the mismatches."""
    bad = []
    cases = itertools.product(SCHEDULES, OPTIONS, SIZES, (np.float32, np.float64))
    for (b1, b2, step), o, n, dt in cases:
        p, g, m, v, vmax = inputs(n, n + step, dt)
        vmax = vmax if o["amsgrad"] else None
        want = [a.copy() if a is not None else None for a in (p, m, v, vmax)]
        hp = (step, 1e-3, b1, b2, 1e-8, o["wd"], o["decoupled"], o["maximize"])
        replay(want[0], g, want[1], want[2], want[3], *hp)
        C.adam_step(p, g, m, v, vmax, *hp)
        for got, w in zip((p, m, v, vmax), want):
            if got is not None and not same_bits(got, w):
                bad.append((dt.__name__, b1, b2, step, n, tuple(o.values())))
                break
    return bad


def test_adam_float32_equals_the_replay():
    bad = check_all()
    assert not bad, f"{len(bad)} cases differ, first {bad[:5]}"


def division_mode(beta2, step, dtype=F):
    """How FMA builds divide by c = sqrt(bc2) (cpu/isa/optim.h: adam_range's rule, replicated to
    pick cases on each side): 2 the FMA-corrected reciprocal, else float32's float64 reciprocal
    (1) or float64's division (0)."""
    c = dtype(math.sqrt(1.0 - beta2**step))
    y = dtype(1.0 / float(c))
    b = 2.0 * math.frexp(float(c))[0]
    u = abs(float(Fraction(float(c)) * Fraction(float(y)) - 1)) * 2.0 ** (25 if dtype is F else 54)
    return 2 if (u + 1.0) * u * b < 3.99 else (1 if dtype is F else 0)


# (beta2, step) with c's significand all over [1, 2), on both sides of the FMA rule
DIVISION_CASES = [(0.999, t) for t in (1, 2, 3, 5, 9, 30, 100, 1000, 1001, 1002, 1003, 5000)]


def check_division() -> list:
    """p = 0, eps = 0, g = 0 and beta1 = 1 - 2^-20 (m stays near 1.5): the new p is
    (-lr / bc1) m / (sqrt(v) / c), so any difference in the quotient sqrt(v) / c shows; 2^16
    values of v per case, significands everywhere."""
    bad = []
    r = np.random.default_rng(11)
    n = 1 << 16
    for (b2, t), dt in itertools.product(DIVISION_CASES, (np.float32, np.float64)):
        scale = 60 if dt is F else 500
        v = (r.random(n) * 2.0 ** r.integers(-scale, scale, n)).astype(dt)
        g = np.zeros(n, dt)
        m = np.full(n, 1.5, dt)
        p = np.zeros(n, dt)
        want = [a.copy() for a in (p, m, v)]
        hp = (t, 1e-3, 1.0 - 2.0**-20, b2, 0.0, 0.0, 0, 0)
        replay(want[0], g, want[1], want[2], None, *hp)
        C.adam_step(p, g, m, v, None, *hp)
        if not all(same_bits(x, w) for x, w in zip((p, m, v), want)):
            bad.append((dt.__name__, b2, t, division_mode(b2, t, dt)))
    return bad


def test_the_division_by_sqrt_bc2_is_exact():
    for dt, other in ((np.float32, 1), (np.float64, 0)):
        assert {division_mode(b2, t, dt) for b2, t in DIVISION_CASES} == {other, 2}
    bad = check_division()
    assert not bad, bad


ISA_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    from test_optim_adam_bits import C, check_all, check_division
    bad = check_all() + check_division()
    print(C.info()["isa"], len(bad), bad[:5])
    sys.exit(1 if bad else 0)
    """
)


def test_adam_float32_equals_the_replay_under_every_isa(tmp_path):
    """GPUCORE_CPU_ISA=scalar|sse2|avx2|avx512 (those this CPU has), one subprocess each."""
    script = tmp_path / "isa_adam.py"
    script.write_text(ISA_SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    run_under_every_isa(script, here, path=(here, root))


# Sizes that put items' edges on, before and after the thread split's boundaries (multiples of
# 16 of the concatenated range) and below / above the one-thread grain (65536 elements).
MULTI_SIZES = [
    [70001, 1, 16, 15, 65536, 17, 33, 3],
    [131072, 131073, 5],
    [0, 200003, 0, 7],
    [65535] * 5,
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", MULTI_SIZES, ids=lambda s: f"{len(s)}items")
@pytest.mark.parametrize("amsgrad", [False, True])
def test_multi_tensor_bits_do_not_depend_on_the_thread_count(threads, dtype, sizes, amsgrad):
    r = np.random.default_rng(sum(sizes))
    base = [[r.standard_normal(n).astype(dtype) for n in sizes] for _ in range(5)]
    for k in (3, 4):
        base[k] = [np.abs(a) for a in base[k]]
    steps = [1 + i % 3 for i in range(len(sizes))]
    results = {}
    for nt in (1, 2, 3, 8):
        threads(nt)
        p, g, m, v, vmax = ([a.copy() for a in col] for col in base)
        for _ in range(2):
            C.adam_step_multi(
                p, g, m, v, vmax if amsgrad else None, steps, 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, 0
            )
        results[nt] = [a.view(np.uint8).copy() for col in (p, m, v, vmax) for a in col]
    for nt in (2, 3, 8):
        for a, b in zip(results[nt], results[1]):
            np.testing.assert_array_equal(a, b, err_msg=f"{nt} threads")
    if dtype is np.float32:  # and every element as the replay computes it
        p, g, m, v, vmax = ([a.copy() for a in col] for col in base)
        for _ in range(2):
            for j in range(len(sizes)):
                hp = (steps[j], 1e-2, 0.9, 0.999, 1e-8, 0.01, 1, 0)
                replay(p[j], g[j], m[j], v[j], vmax[j] if amsgrad else None, *hp)
        want = [a.view(np.uint8) for col in (p, m, v, vmax) for a in col]
        for a, b in zip(results[1], want):
            np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(sys.platform == "win32", reason="torch comparison: Linux / macOS")
def test_adam_float32_close_to_torch():
    """torch.optim.Adam / AdamW (single-tensor, foreach, fused) over five steps: within a few
    float32 roundings (torch's CPU kernels do not round as its formula reads, so not bitwise:
    ~4 % of the elements differ by an ulp, as before this kernel's reciprocal multiplication)."""
    torch = pytest.importorskip("torch")
    r = np.random.default_rng(3)
    p0 = r.standard_normal(1001).astype(F)
    grads = [r.standard_normal(1001).astype(F) for _ in range(5)]
    for cls, wd, ams, mx in [
        (torch.optim.Adam, 0.0, False, False),
        (torch.optim.Adam, 0.1, True, True),
        (torch.optim.AdamW, 0.05, False, False),
    ]:
        p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
        vmax = np.zeros_like(p0) if ams else None
        for t, g in enumerate(grads, 1):
            dec = int(cls is torch.optim.AdamW)
            C.adam_step(p, g, m, v, vmax, t, 1e-2, 0.9, 0.999, 1e-8, wd, dec, int(mx))
        for mode in (dict(foreach=False), dict(foreach=True), dict(fused=True)):
            tp = torch.nn.Parameter(torch.from_numpy(p0.copy()))
            opt = cls([tp], lr=1e-2, weight_decay=wd, amsgrad=ams, maximize=mx, **mode)
            for g in grads:
                tp.grad = torch.from_numpy(g.copy())
                opt.step()
            np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_hyper_parameter_messages_show_the_values():
    p, g, m, v = (np.zeros(3, F) for _ in range(4))
    betas = r"adam_step: betas must be in \[0, 1\), got \(0.9, 1.0\)$"
    with pytest.raises(ValueError, match=betas):
        C.adam_step(p, g, m, v, None, 1, 1e-3, 0.9, 1.0, 1e-8, 0.0, 0, 0)
    lr = r"adam_step: 'lr' must be a finite number >= 0.0, got -1.0"
    with pytest.raises(ValueError, match=lr):
        C.adam_step(p, g, m, v, None, 1, -1.0, 0.9, 0.999, 1e-8, 0.0, 0, 0)
