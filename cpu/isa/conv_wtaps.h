/* The few-taps weight gradient's pixel loop (gc_isa_kernels.wtaps_f32; driver cpu/conv_wtaps.c),
 * instantiated by avx2_conv_backward.c and avx512_conv_backward.c after the vector set
 * (isa/vec_f32x8.h, vec_f32x16.h: UKR_VT / UKR_VL, V_LOADU, V_STOREU, V_FMA) with:
 *   WT_LOADM(p, n)     the first n < UKR_VL lanes, zeros beyond (nothing past them read)
 *   WT_GB(s, v)        s (__m256, 8 lanes) + v added 8 lanes at a time, in order
 *   WT_OB, WT_TB       the register tile: WT_OB output channels x up to WT_TB taps
 *   WT_NAME            the kernel's name.
 *
 * For output channels o < no and taps t < nt, over the l pixels p of one image:
 *   acc[(o*nt + t)*VL + j] += g[o*l + p] * xs[tb[t] + p]   for the p = j (mod VL), in p order;
 *   gacc[o*8 + k] += g[o*l + p]                            for the p = k (mod 8), in p order,
 * gacc (NULL: none) being conv.c's gc_conv_rowsum's eight lanes (the bias gradient's bits on every
 * path).  Lanes past l get zeros: 0*0 added to a lane that started at +0 leaves it as it is (a
 * sum that starts at +0 never holds -0), so the tail adds exactly what the loop's scalar form
 * would.  The tile's accumulators stay in registers over the whole image: each g vector is
 * loaded once per tile and multiplied into nt taps, each tap's vector (one load, reused for
 * the tile's WT_OB channels) comes from the per-image shifted copies xs (L1-resident). */

#define WT_CAT_(a, b) a##_##b
#define WT_CAT(a, b) WT_CAT_(a, b)
#define WT_FN(x) WT_CAT(WT_NAME, x)

static inline __attribute__((always_inline)) void WT_FN(tile)(
    const int ob, const int tbn, const int withgb, ptrdiff_t l, const float *g,
    const float *xs, const ptrdiff_t *tb, ptrdiff_t nt, float *acc, float *gacc)
{
    UKR_VT a[WT_OB][WT_TB];
    __m256 s[WT_OB];
    const float *xt[WT_TB];
    for (int t = 0; t < tbn; t++)
        xt[t] = xs + tb[t];
    for (int o = 0; o < ob; o++) {
        for (int t = 0; t < tbn; t++)
            a[o][t] = V_LOADU(acc + (o * nt + t) * UKR_VL);
        if (withgb)
            s[o] = _mm256_loadu_ps(gacc + o * 8);
    }
    ptrdiff_t p = 0;
    for (; p + UKR_VL <= l; p += UKR_VL) {
        UKR_VT gv[WT_OB];
        for (int o = 0; o < ob; o++)
            gv[o] = V_LOADU(g + o * l + p);
        for (int t = 0; t < tbn; t++) {
            UKR_VT xv = V_LOADU(xt[t] + p);
            /* one load per tap vector, in a register for the tile's channels: the compiler
             * would fold it into each FMA, loading it WT_OB times (the loads, each across two
             * cache lines, bound the loop: the CNN's 1 -> 16 layer 0.30 -> 0.21 ms, one thread) */
            if (ob > 1)
                __asm__("" : "+v"(xv));
            for (int o = 0; o < ob; o++)
                a[o][t] = V_FMA(gv[o], xv, a[o][t]);
        }
        if (withgb)
            for (int o = 0; o < ob; o++)
                s[o] = WT_GB(s[o], gv[o]);
    }
    if (p < l) {
        const int n = (int)(l - p);
        UKR_VT gv[WT_OB];
        for (int o = 0; o < ob; o++)
            gv[o] = WT_LOADM(g + o * l + p, n);
        for (int t = 0; t < tbn; t++) {
            const UKR_VT xv = WT_LOADM(xt[t] + p, n);
            for (int o = 0; o < ob; o++)
                a[o][t] = V_FMA(gv[o], xv, a[o][t]);
        }
        if (withgb)
            for (int o = 0; o < ob; o++)
                s[o] = WT_GB(s[o], gv[o]);
    }
    for (int o = 0; o < ob; o++) {
        for (int t = 0; t < tbn; t++)
            V_STOREU(acc + (o * nt + t) * UKR_VL, a[o][t]);
        if (withgb)
            _mm256_storeu_ps(gacc + o * 8, s[o]);
    }
}

/* the tile of (ob, tbn) channels x taps with compile-time bounds (its accumulators then live
 * in registers): one case per (ob, tbn, withgb), tbn up to WT_TB = 5 (both ISAs' tile) */
#if WT_TB != 5
#error "WT_TB: 5 (the cases below)"
#endif
#define WT_CASE(O, T)                                                                          \
    case (O) * 64 + (T) * 2:                                                                   \
        WT_FN(tile)(O, T, 0, l, g, xs, tb, nt, acc, gacc);                                     \
        return;                                                                                \
    case (O) * 64 + (T) * 2 + 1:                                                               \
        WT_FN(tile)(O, T, 1, l, g, xs, tb, nt, acc, gacc);                                     \
        return;
#define WT_CASES(O) WT_CASE(O, 1) WT_CASE(O, 2) WT_CASE(O, 3) WT_CASE(O, 4) WT_CASE(O, 5)
static void WT_FN(call)(int ob, int tbn, int withgb, ptrdiff_t l, const float *g,
                        const float *xs, const ptrdiff_t *tb, ptrdiff_t nt, float *acc,
                        float *gacc)
{
    switch (ob * 64 + tbn * 2 + withgb) {
        WT_CASES(1)
#if WT_OB >= 2
        WT_CASES(2)
#endif
#if WT_OB >= 3
        WT_CASES(3)
#endif
#if WT_OB >= 4
        WT_CASES(4)
#endif
    default: /* WT_NAME's blocks: 1 <= ob <= WT_OB, 1 <= tbn <= WT_TB, every one a case */
        __builtin_unreachable();
    }
}
#undef WT_CASES
#undef WT_CASE

static void WT_NAME(ptrdiff_t l, const float *g, ptrdiff_t no, const float *xs,
                    const ptrdiff_t *tb, ptrdiff_t nt, float *acc, float *gacc)
{
    /* taps in nb blocks of at most WT_TB (sizes as even as they go: 16 taps are 4 + 4 + 4 + 4,
     * 9 are 5 + 4), the channel block outside them so its g rows stay in L1 from one tap block
     * to the next */
    const ptrdiff_t nb = (nt + WT_TB - 1) / WT_TB;
    for (ptrdiff_t o0 = 0; o0 < no; o0 += WT_OB) {
        const int ob = no - o0 < WT_OB ? (int)(no - o0) : WT_OB;
        for (ptrdiff_t b = 0, t0 = 0; b < nb; b++) {
            const int tbn = (int)((nt - t0 + (nb - b) - 1) / (nb - b));
            WT_FN(call)(ob, tbn, gacc && b == 0, l, g + o0 * l, xs, tb + t0, nt,
                           acc + (o0 * nt + t0) * UKR_VL, gacc ? gacc + o0 * 8 : NULL);
            t0 += tbn;
        }
    }
}
