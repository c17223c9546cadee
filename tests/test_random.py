"""The random stream: Philox4x32-10 against an independent pure-Python implementation, the value
transforms of rand/randn/randint, offset bookkeeping and statistical sanity."""

import math

import numpy as np
import pytest

import gpucore
from gpucore import _cpu

M32 = 0xFFFFFFFF


def philox_ref(ctr, key):
    """Philox4x32-10 (Salmon et al. 2011), written from the paper's definition."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0 = (k0 + 0x9E3779B9) & M32
            k1 = (k1 + 0xBB67AE85) & M32
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
    return [c0, c1, c2, c3]


def stream_ref(seed, offset, nwords):
    """Word i = word i % 4 of the block at counter offset + i // 4 (mod 2**64), key = seed."""
    out = []
    block = offset
    while len(out) < nwords:
        ctr = block % 2**64
        out += philox_ref((ctr & M32, ctr >> 32, 0, 0), (seed & M32, seed >> 32))
        block += 1
    return np.array(out[:nwords], dtype=np.uint64)


KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((M32,) * 4, (M32, M32), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_known_answers_reference(ctr, key, expected):
    assert tuple(philox_ref(ctr, key)) == expected


@pytest.mark.parametrize("ctr,key,expected", KAT)
def test_known_answers_extension(ctr, key, expected):
    assert tuple(_cpu.philox_block(*ctr, *key)) == expected


@pytest.mark.parametrize(
    "seed,offset",
    [(0, 0), (12345, 7), (2**64 - 1, 2**32 - 1), (0xDEADBEEFCAFEBABE, 2**40 + 3), (5, 2**64 - 2)],
)
def test_raw_stream_matches_reference(seed, offset):
    out = np.empty(23, np.uint32)
    _cpu.philox(seed, offset, out)
    np.testing.assert_array_equal(out.astype(np.uint64), stream_ref(seed, offset, 23))


def _uniform_ref(words):
    return ((words >> 8).astype(np.float64) * 2.0**-24).astype(np.float32)


def test_rand_bits_match_reference_stream():
    gpucore.manual_seed(2024)
    a = gpucore.rand(3, 7)  # 21 words -> 6 blocks
    b = gpucore.rand(5)
    words = stream_ref(2024, 0, 24 + 5)
    np.testing.assert_array_equal(a.numpy().ravel(), _uniform_ref(words[:21]))
    np.testing.assert_array_equal(b.numpy(), _uniform_ref(words[24:29]))
    ref_bits = _uniform_ref(words[:21]).view(np.uint32)
    assert a.numpy().ravel().view(np.uint32).tolist() == ref_bits.tolist()


def test_rand_big_seed_uses_both_key_words():
    seed = 0x0123456789ABCDEF
    gpucore.manual_seed(seed)
    np.testing.assert_array_equal(gpucore.rand(9).numpy(), _uniform_ref(stream_ref(seed, 0, 9)))


def test_offset_bookkeeping_documented():
    # random.py: each call starts at a fresh block; rand(5) touches 2 blocks, so the next call
    # begins at word 8: rand(5), rand(5) == rand(13)[:5], rand(13)[8:].
    gpucore.manual_seed(5)
    a, b = gpucore.rand(5), gpucore.rand(5)
    assert gpucore.get_rng_state() == (5, 4)
    gpucore.manual_seed(5)
    c = gpucore.rand(13)
    np.testing.assert_array_equal(a.numpy(), c.numpy()[:5])
    np.testing.assert_array_equal(b.numpy(), c.numpy()[8:13])
    gpucore.manual_seed(5)
    d = gpucore.rand(10)
    assert not np.array_equal(np.concatenate([a.numpy(), b.numpy()]), d.numpy())


@pytest.mark.parametrize(
    "make,nwords",
    [
        (lambda: gpucore.rand(4), 4),
        (lambda: gpucore.rand(1), 1),
        (lambda: gpucore.rand(2, 3), 6),
        (lambda: gpucore.randn(3), 4),
        (lambda: gpucore.randn(8), 8),
        (lambda: gpucore.randint(0, 10, (3,)), 6),
        (lambda: gpucore.rand(0), 0),
    ],
)
def test_offset_advances_by_blocks(make, nwords):
    gpucore.manual_seed(1)
    make()
    assert gpucore.get_rng_state() == (1, math.ceil(nwords / 4))


def test_offset_wraps_at_2_64():
    gpucore.set_rng_state((99, 2**64 - 1))
    a = gpucore.rand(8)  # blocks 2**64 - 1 and 0
    np.testing.assert_array_equal(a.numpy(), _uniform_ref(stream_ref(99, 2**64 - 1, 8)))
    assert gpucore.get_rng_state() == (99, 1)
    b = gpucore.rand(2)
    np.testing.assert_array_equal(b.numpy(), _uniform_ref(stream_ref(99, 1, 2)))


def test_set_state_rejects_out_of_range():
    with pytest.raises(ValueError, match="2\\*\\*64"):
        gpucore.set_rng_state((1, 2**64))
    with pytest.raises(ValueError):
        gpucore.set_rng_state((-1, 0))


def test_state_roundtrip():
    gpucore.manual_seed(77)
    gpucore.rand(3)
    st = gpucore.get_rng_state()
    a = gpucore.randn(6)
    gpucore.set_rng_state(st)
    np.testing.assert_array_equal(gpucore.randn(6).numpy(), a.numpy())


def test_seed_modulo_2_64():
    gpucore.manual_seed(-1)
    assert gpucore.initial_seed() == 2**64 - 1
    a = gpucore.rand(4)
    gpucore.manual_seed(2**64 - 1)
    np.testing.assert_array_equal(gpucore.rand(4).numpy(), a.numpy())
    gpucore.manual_seed(2**64 + 3)
    assert gpucore.initial_seed() == 3


def test_reproducible_and_seed_dependent():
    outs = {}
    for s in (0, 1, 0):
        gpucore.manual_seed(s)
        outs.setdefault(s, []).append(
            (
                gpucore.rand(50).numpy(),
                gpucore.randn(50).numpy(),
                gpucore.randint(0, 1000, (50,)).numpy(),
            )
        )
    for x, y in zip(outs[0][0], outs[0][1]):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(outs[0][0], outs[1][0]):
        assert not np.array_equal(x, y)


def test_generator_object_independent_of_default():
    g1, g2 = gpucore.Generator(7), gpucore.Generator(7)
    gpucore.manual_seed(0)
    a = gpucore.rand(5, generator=g1)
    gpucore.rand(3)  # the default generator does not disturb g2
    b = gpucore.rand(5, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(a.numpy(), _uniform_ref(stream_ref(7, 0, 5)))
    assert g1.get_state() == (7, 2)


def test_randn_box_muller_matches_reference():
    gpucore.manual_seed(3)
    z = gpucore.randn(7).numpy()  # 8 words
    w = stream_ref(3, 0, 8)
    u1 = ((w[0::2] >> 8) + 1).astype(np.float64) * 2.0**-24
    u2 = (w[1::2] >> 8).astype(np.float64) * 2.0**-24
    r = np.sqrt(-2 * np.log(u1))
    ref = np.empty(8)
    ref[0::2] = r * np.cos(2 * np.pi * u2)
    ref[1::2] = r * np.sin(2 * np.pi * u2)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z, ref[:7], rtol=1e-5, atol=1e-5)


def test_randint_matches_reference():
    gpucore.manual_seed(11)
    x = gpucore.randint(-5, 12, (2, 5))
    w = stream_ref(11, 0, 20)
    ref = ((w[0::2] | (w[1::2] << np.uint64(32))) % np.uint64(17)).astype(np.int64) - 5
    assert x.dtype is gpucore.int64
    np.testing.assert_array_equal(x.numpy().ravel(), ref)


def test_randint_full_int64_range():
    gpucore.manual_seed(4)
    x = gpucore.randint(-(2**63), 2**63, (6,))
    w = stream_ref(4, 0, 12)
    ref = [int(lo) + (int(hi) << 32) - 2**63 for lo, hi in zip(w[0::2], w[1::2])]
    assert x.tolist() == ref


def test_randint_forms_and_bounds():
    gpucore.manual_seed(0)
    a = gpucore.randint(5, (1000,))
    assert a.shape == (1000,) and a.dtype is gpucore.int64
    assert set(a.numpy().tolist()) == {0, 1, 2, 3, 4}
    b = gpucore.randint(-3, 3, (2000,))
    assert set(b.numpy().tolist()) == set(range(-3, 3))
    c = gpucore.randint(0, 10, size=(4, 5), dtype=gpucore.int32)
    assert c.dtype is gpucore.int32 and c.shape == (4, 5)
    assert c.numpy().min() >= 0 and c.numpy().max() < 10
    d = gpucore.randint(0, 2, (64,), dtype=gpucore.bool)
    assert d.dtype is gpucore.bool and d.numpy().any() and not d.numpy().all()
    e = gpucore.randint(10, size=(3,))
    assert e.shape == (3,)


def test_randint_errors():
    with pytest.raises(ValueError, match="empty range"):
        gpucore.randint(3, 3, (2,))
    with pytest.raises(ValueError, match="uint8"):
        gpucore.randint(0, 300, (2,), dtype=gpucore.uint8)
    with pytest.raises(ValueError, match="int8"):
        gpucore.randint(-200, 0, (2,), dtype=gpucore.int8)
    with pytest.raises(TypeError, match="size"):
        gpucore.randint(0, 3)
    with pytest.raises(TypeError):
        gpucore.randint(0.5, 3, (2,))


def test_randn_statistics():
    gpucore.manual_seed(123)
    n = 100_000
    z = gpucore.randn(n).numpy().astype(np.float64)
    assert abs(z.mean()) < 4 / math.sqrt(n)
    # std of the sample variance of N(0,1) is sqrt(2/n)
    assert abs(z.var() - 1) < 4 * math.sqrt(2 / n)
    assert np.isfinite(z).all()
    # symmetric tails: P(|z| > 2) ~ 0.0455
    assert abs((np.abs(z) > 2).mean() - 0.0455) < 4 * math.sqrt(0.0455 * 0.9545 / n)


def test_rand_statistics_and_range():
    gpucore.manual_seed(321)
    n = 100_000
    u = gpucore.rand(n).numpy().astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 4 * math.sqrt(1 / 12 / n)
    hist = np.histogram(u, bins=10, range=(0, 1))[0]
    assert (np.abs(hist - n / 10) < 4 * math.sqrt(n / 10)).all()


def test_randint_uniform_counts():
    gpucore.manual_seed(9)
    n = 60_000
    x = gpucore.randint(0, 6, (n,)).numpy()
    counts = np.bincount(x, minlength=6)
    assert (np.abs(counts - n / 6) < 4 * math.sqrt(n / 6 * 5 / 6)).all()


@pytest.mark.parametrize("dtype,bits", [(gpucore.float16, 11), (gpucore.bfloat16, 8)])
def test_rand_low_precision_exact_and_below_one(dtype, bits):
    gpucore.manual_seed(6)
    x = gpucore.rand(20_000, dtype=dtype)
    assert x.dtype is dtype
    v = x.float().numpy().astype(np.float64)
    assert v.max() < 1.0 and v.min() >= 0.0
    ref = (stream_ref(6, 0, 20_000) >> (32 - bits)).astype(np.float64) * 2.0**-bits
    np.testing.assert_array_equal(v, ref)


def test_rand_randn_dtypes_and_requires_grad():
    assert gpucore.rand(2, 3, dtype=gpucore.float64).dtype is gpucore.float64
    gpucore.manual_seed(8)
    a = gpucore.rand(4, dtype=gpucore.float64)
    gpucore.manual_seed(8)
    np.testing.assert_array_equal(a.numpy(), gpucore.rand(4).numpy().astype(np.float64))
    assert gpucore.randn(3, dtype=gpucore.bfloat16).dtype is gpucore.bfloat16
    assert gpucore.rand((2, 2)).shape == (2, 2)
    t = gpucore.randn(3, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    with pytest.raises(gpucore.DTypeError, match="randint"):
        gpucore.rand(3, dtype=gpucore.int64)


def test_like_variants():
    base = gpucore.zeros(2, 3, dtype=gpucore.float64)
    assert gpucore.rand_like(base).dtype is gpucore.float64
    assert gpucore.randn_like(base).shape == (2, 3)
    r = gpucore.randint_like(gpucore.zeros(4, dtype=gpucore.int32), 3, 7)
    assert r.dtype is gpucore.int32 and r.numpy().min() >= 3 and r.numpy().max() < 7
    with pytest.raises(gpucore.DTypeError):
        gpucore.rand_like(gpucore.zeros(2, dtype=gpucore.int64))
