/* Philox4x32-10 counter-based generator (Salmon et al., Random123) and the streams built on it.
 *
 * Stream layout: word i of the stream for (seed, offset) is word i % 4 of the block at counter
 * (c0, c1, c2, c3) = (low 32 bits, high 32 bits of offset + i / 4, 0, 0) under key
 * (k0, k1) = (seed & 0xffffffff, seed >> 32); the 64-bit block counter wraps modulo 2**64. */
#include <math.h>

#include "kernels.h"

#define GC_PHILOX_M0 0xD2511F53u
#define GC_PHILOX_M1 0xCD9E8D57u
#define GC_PHILOX_W0 0x9E3779B9u
#define GC_PHILOX_W1 0xBB67AE85u

static inline void gc_philox_round(uint32_t c[4], const uint32_t k[2])
{
    const uint64_t p0 = (uint64_t)GC_PHILOX_M0 * c[0];
    const uint64_t p1 = (uint64_t)GC_PHILOX_M1 * c[2];
    const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    const uint32_t n0 = hi1 ^ c[1] ^ k[0], n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

void gc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    gc_philox_round(c, k);
    for (int r = 1; r < 10; r++) {
        k[0] += GC_PHILOX_W0;
        k[1] += GC_PHILOX_W1;
        gc_philox_round(c, k);
    }
    out[0] = c[0];
    out[1] = c[1];
    out[2] = c[2];
    out[3] = c[3];
}

static inline void gc_philox_block(uint64_t seed, uint64_t counter, uint32_t w[4])
{
    const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0u};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    gc_philox4x32_10(ctr, key, w);
}

void gc_philox_fill(uint64_t seed, uint64_t offset, uint32_t *out, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i += 4) {
        uint32_t w[4];
        gc_philox_block(seed, offset + (uint64_t)(i / 4), w);
        const ptrdiff_t cnt = n - i < 4 ? n - i : 4;
        for (ptrdiff_t j = 0; j < cnt; j++)
            out[i + j] = w[j];
    }
}

/* u = (word >> 8) * 2**-24 in [0, 1); out = low + (high - low) * u in float32 arithmetic. */
void gc_uniform_f32(uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float low, float high)
{
    const float span = high - low;
    for (ptrdiff_t i = 0; i < n; i += 4) {
        uint32_t w[4];
        gc_philox_block(seed, offset + (uint64_t)(i / 4), w);
        const ptrdiff_t cnt = n - i < 4 ? n - i : 4;
        for (ptrdiff_t j = 0; j < cnt; j++)
            out[i + j] = low + span * ((float)(w[j] >> 8) * 0x1p-24f);
    }
}

/* Box-Muller over word pairs (2p, 2p+1), in float32 arithmetic:
 * u1 = ((w0 >> 8) + 1) * 2**-24 in (0, 1], u2 = (w1 >> 8) * 2**-24, r = sqrt(-2 ln u1),
 * out[2p] = mean + std * r cos(2 pi u2), out[2p+1] = mean + std * r sin(2 pi u2).
 * One block holds two pairs: out[i .. i+3] for i = 4 * block. */
void gc_normal_f32(uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float mean, float std)
{
    const float two_pi = 6.28318530717958647692f;
    for (ptrdiff_t i = 0; i < n; i += 4) {
        uint32_t w[4];
        gc_philox_block(seed, offset + (uint64_t)(i / 4), w);
        float z[4];
        for (int p = 0; p < 2; p++) {
            const float u1 = (float)((w[2 * p] >> 8) + 1u) * 0x1p-24f;
            const float u2 = (float)(w[2 * p + 1] >> 8) * 0x1p-24f;
            const float r = sqrtf(-2.0f * logf(u1));
            const float th = two_pi * u2;
            z[2 * p] = r * cosf(th);
            z[2 * p + 1] = r * sinf(th);
        }
        const ptrdiff_t cnt = n - i < 4 ? n - i : 4;
        for (ptrdiff_t j = 0; j < cnt; j++)
            out[i + j] = mean + std * z[j];
    }
}
