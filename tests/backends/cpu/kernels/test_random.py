"""gpucore._cpu against float64 numpy references (cpu/README.md): the Philox4x32-10
stream (known answers, layout, offsets) and the uniform and normal fills."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_ext import C

# ------------------------------------------------------------------------------------- philox
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_philox_known_answers(ctr, key, expected):
    assert C.philox_block(*ctr, *key) == expected


def stream_ref(seed, offset, nwords):
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    words = []
    for i in range(nwords):
        ctr = (offset + i // 4) % 2**64
        words.append(C.philox_block(ctr & 0xFFFFFFFF, ctr >> 32, 0, 0, k0, k1)[i % 4])
    return np.array(words, np.uint32)


@pytest.mark.parametrize("seed", [0, 1234, 0xDEADBEEF_CAFEF00D, 2**64 - 1])
@pytest.mark.parametrize("offset", [0, 5, 2**32 - 1, 2**64 - 2])
@pytest.mark.parametrize("n", [0, 1, 7, 13])
def test_philox_stream_layout(seed, offset, n):
    out = np.empty(n, np.uint32)
    C.philox(seed, offset, out)
    np.testing.assert_array_equal(out, stream_ref(seed, offset, n))


def test_philox_stream_is_consistent_across_offsets():
    a = np.empty(40, np.uint32)
    C.philox(7, 3, a)
    b = np.empty(20, np.uint32)
    C.philox(7, 8, b)  # starts 5 blocks (20 words) later
    np.testing.assert_array_equal(a[20:], b)


@pytest.mark.parametrize("n", [1, 7, 13, 257])
def test_uniform(n):
    out = np.empty(n, np.float32)
    C.uniform(42, 9, out, -2.0, 3.0)
    u = (stream_ref(42, 9, n) >> 8).astype(np.float32) * np.float32(2.0**-24)
    ref = np.float32(-2.0) + np.float32(5.0) * u
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)
    assert (out >= -2.0).all() and (out < 3.0).all()


@pytest.mark.parametrize("n", [1, 2, 7, 13, 258])
def test_normal(n):
    out = np.empty(n, np.float32)
    C.normal(42, 9, out, 1.5, 2.0)
    w = stream_ref(42, 9, 2 * ((n + 1) // 2)).astype(np.float64)
    u1 = (np.floor(w[0::2] / 256) + 1) * 2.0**-24
    u2 = np.floor(w[1::2] / 256) * 2.0**-24
    r = np.sqrt(-2 * np.log(u1))
    z = np.empty(2 * len(u1))
    z[0::2] = r * np.cos(2 * np.pi * u2)
    z[1::2] = r * np.sin(2 * np.pi * u2)
    np.testing.assert_allclose(out, 1.5 + 2.0 * z[:n], rtol=1e-5, atol=2e-5)
    longer = np.empty(n + 3, np.float32)
    C.normal(42, 9, longer, 1.5, 2.0)
    np.testing.assert_array_equal(longer[:n], out)  # element i depends only on its block


def test_normal_moments():
    out = np.empty(200_001, np.float32)
    C.normal(1, 0, out, 0.0, 1.0)
    assert np.isfinite(out).all()
    assert abs(out.mean()) < 0.01 and abs(out.std() - 1) < 0.01


def test_rng_argument_errors():
    out = np.empty(4, np.uint32)
    with pytest.raises(ValueError, match="seed"):
        C.philox(-1, 0, out)
    with pytest.raises(ValueError, match="offset"):
        C.philox(0, 2**64, out)
    with pytest.raises(TypeError, match="uint32"):
        C.philox(0, 0, np.empty(4, np.int32))
    with pytest.raises(TypeError, match="float32"):
        C.uniform(0, 0, np.empty(4), 0.0, 1.0)
    with pytest.raises(ValueError, match="c0"):
        C.philox_block(2**32, 0, 0, 0, 0, 0)
