"""gpucore._cpu.special / special2 (cpu/special*.c through cpu/python/special.c): the op tables,
one-element operands broadcast by the C loop, in-place outputs, results independent of the
thread count and of how a call is split, and bad calls raising with the argument's name."""

from __future__ import annotations

import numpy as np
import pytest

from gpucore import _cpu as C

UNARY = C.OPCODES["special"]
BINARY = C.OPCODES["special2"]


def test_the_op_tables():
    assert {"i0", "bessel_j0", "modified_bessel_k1", "airy_ai", "spherical_bessel_j0"} <= set(UNARY)
    assert sorted(UNARY.values()) == list(range(len(UNARY)))
    assert sorted(BINARY.values()) == list(range(len(BINARY)))
    assert {"zeta", "igamma", "igammac", "legendre_polynomial_p"} <= set(BINARY)
    assert sum("polynomial" in n for n in BINARY) == 12


def _pair(name, m, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if "polynomial" in name:
        return rng.uniform(-1.2, 1.2, m).astype(dtype), rng.integers(-2, 40, m).astype(dtype)
    return rng.uniform(1.1, 20, m).astype(dtype), rng.uniform(0.1, 30, m).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_one_element_operands_broadcast(name, dtype):
    a, b = _pair(name, 50, dtype)
    full, out = np.empty_like(a), np.empty_like(a)
    C.special2(BINARY[name], a, np.full_like(b, b[3]), full)
    C.special2(BINARY[name], a, b[3:4].copy(), out)
    np.testing.assert_array_equal(out, full)
    C.special2(BINARY[name], np.full_like(a, a[5]), b, full)
    C.special2(BINARY[name], a[5:6].copy(), b, out)
    np.testing.assert_array_equal(out, full)


def test_in_place_outputs():
    a, b = _pair("zeta", 40, np.float64)
    want = np.empty_like(a)
    C.special2(BINARY["zeta"], a, b, want)
    C.special2(BINARY["zeta"], a, b, b)  # out is b itself
    np.testing.assert_array_equal(b, want)
    x = np.linspace(0.5, 30, 40)
    want = np.empty_like(x)
    C.special(UNARY["bessel_y1"], x, want)
    C.special(UNARY["bessel_y1"], x, x)
    np.testing.assert_array_equal(x, want)


def test_results_do_not_depend_on_threads_or_splits(threads):
    """Every element is computed on its own: one call over 200,000 elements on 1 or 2 threads
    gives the bits of many small calls."""
    rng = np.random.default_rng(4)
    x = rng.uniform(-40, 40, 200_000)
    for name in ("bessel_j0", "modified_bessel_k0", "airy_ai"):
        small = np.concatenate([_one(name, c) for c in np.array_split(x, 97)])
        for t in (1, 2):
            threads(t)
            np.testing.assert_array_equal(_one(name, x), small, err_msg=name)
    a, b = _pair("chebyshev_polynomial_u", 200_000, np.float32, seed=2)
    small = np.empty_like(a)
    for s in range(0, a.size, 3001):
        C.special2(
            BINARY["chebyshev_polynomial_u"], a[s : s + 3001], b[s : s + 3001], small[s : s + 3001]
        )
    for t in (1, 2):
        threads(t)
        out = np.empty_like(a)
        C.special2(BINARY["chebyshev_polynomial_u"], a, b, out)
        np.testing.assert_array_equal(out, small)


def _one(name, x):
    out = np.empty_like(x)
    C.special(UNARY[name], x, out)
    return out


def test_bad_calls_raise():
    a, b = _pair("zeta", 10, np.float64)
    out = np.empty_like(a)
    op = BINARY["zeta"]
    with pytest.raises(ValueError, match="special2.*b holds 3 elements but out 10"):
        C.special2(op, a, b[:3].copy(), out)
    with pytest.raises(TypeError, match="special2"):
        C.special2(op, a.astype(np.float32), b, out)  # formats differ
    with pytest.raises(TypeError, match="special2"):
        C.special2(op, a.astype(np.int64), b.astype(np.int64), out.astype(np.int64))
    with pytest.raises(ValueError, match="special2"):
        C.special2(op, a[::2], b[::2], out[:5])  # not contiguous
    with pytest.raises(ValueError, match="special2"):
        C.special2(len(BINARY), a, b, out)  # no such code
    with pytest.raises(ValueError, match="special2"):
        C.special2(op, a, b, a[1:].copy()[:0])  # out of another size
    with pytest.raises(ValueError, match="special2"):
        C.special2(op, out[1:], b[1:], out[:-1])  # out partly overlapping an input
    with pytest.raises(ValueError, match="special2"):
        C.special2(op, out[:1], b, out)  # out starting at a broadcast input: out[0] changes it
    with pytest.raises(ValueError, match="special"):
        C.special(len(UNARY), a, out)
    with pytest.raises(TypeError, match="special2"):
        C.special2(op, a, b)
    ro = b.copy()
    ro.flags.writeable = False
    with pytest.raises((TypeError, ValueError, BufferError), match="special2|writable"):
        C.special2(op, a, b, ro)
