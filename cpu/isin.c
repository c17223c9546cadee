/* isin.c: membership (torch.isin).  The test elements are copied into the caller's scratch
 * (NaNs dropped: NaN is never a member), sorted, and every element is found by binary search;
 * a handful of test elements are compared directly instead.  Any order of the work gives the
 * same bits (each output depends on its element only). */
#include "isa.h"
#include "kernels.h"

#include <stdlib.h>

/* Up to this many test elements, each element is compared with all of them (no sort). */
#define GC_ISIN_DIRECT 12

#define GC_ISIN_TYPES(X)                                                                          \
    X(U8, uint8_t) X(I8, int8_t) X(I16, int16_t) X(I32, int32_t) X(I64, int64_t) X(F32, float)    \
    X(F64, double)

#define GC_ISIN_DEFINE(E, T)                                                                      \
    static int cmp_##E(const void *pa, const void *pb)                                            \
    {                                                                                             \
        const T a = *(const T *)pa, b = *(const T *)pb;                                           \
        return (a > b) - (a < b);                                                                 \
    }                                                                                             \
    /* test's m elements without NaNs into s (sorted when more than GC_ISIN_DIRECT); count. */   \
    static ptrdiff_t prep_##E(const T *test, ptrdiff_t m, T *s)                                   \
    {                                                                                             \
        ptrdiff_t k = 0;                                                                          \
        for (ptrdiff_t i = 0; i < m; i++)                                                         \
            if (test[i] == test[i])                                                               \
                s[k++] = test[i];                                                                 \
        if (k > GC_ISIN_DIRECT)                                                                   \
            qsort(s, (size_t)k, sizeof(T), cmp_##E);                                              \
        return k;                                                                                 \
    }                                                                                             \
    static void find_##E(const T *x, ptrdiff_t lo, ptrdiff_t hi, const T *s, ptrdiff_t k,         \
                         unsigned char *out, unsigned char hit)                                   \
    {                                                                                             \
        if (k <= GC_ISIN_DIRECT) { /* blocks of elements against each test value: vectorizes */ \
            for (ptrdiff_t b0 = lo; b0 < hi; b0 += 256) {                                         \
                const ptrdiff_t nb = hi - b0 < 256 ? hi - b0 : 256;                               \
                unsigned char f[256] = {0};                                                       \
                for (ptrdiff_t j = 0; j < k; j++) {                                               \
                    const T t = s[j];                                                             \
                    for (ptrdiff_t i = 0; i < nb; i++)                                            \
                        f[i] |= x[b0 + i] == t;                                                   \
                }                                                                                 \
                for (ptrdiff_t i = 0; i < nb; i++)                                                \
                    out[b0 + i] = f[i] ^ (unsigned char)!hit;                                     \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        for (ptrdiff_t i = lo; i < hi; i++) {                                                     \
            const T v = x[i];                                                                     \
            ptrdiff_t a = 0, b = k; /* the first s[j] >= v (NaN v: none match) */                 \
            while (a < b) {                                                                       \
                const ptrdiff_t mid = a + (b - a) / 2;                                            \
                if (s[mid] < v)                                                                   \
                    a = mid + 1;                                                                  \
                else                                                                              \
                    b = mid;                                                                      \
            }                                                                                     \
            out[i] = (a < k && s[a] == v) ? hit : (unsigned char)!hit;                            \
        }                                                                                         \
    }
GC_ISIN_TYPES(GC_ISIN_DEFINE)
#undef GC_ISIN_DEFINE

typedef struct {
    gc_elem t;
    const void *x, *s;
    ptrdiff_t k;
    unsigned char *out, hit;
} isin_ctx;

static void isin_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const isin_ctx *c = ctx;
    switch (c->t) {
#define GC_ISIN_CASE(E, T)                                                                        \
    case GC_ELEM_##E:                                                                             \
        find_##E((const T *)c->x, lo, hi, (const T *)c->s, c->k, c->out, c->hit);                 \
        break;
        GC_ISIN_TYPES(GC_ISIN_CASE)
#undef GC_ISIN_CASE
    default: break;
    }
}

int gc_isin(gc_elem t, const void *x, ptrdiff_t n, const void *test, ptrdiff_t m, void *scratch,
            unsigned char *out, int invert)
{
    isin_ctx c = {.t = t, .x = x, .s = scratch, .out = out, .hit = (unsigned char)!invert};
    switch (t) {
#define GC_ISIN_CASE(E, T)                                                                        \
    case GC_ELEM_##E: c.k = prep_##E((const T *)test, m, (T *)scratch); break;
        GC_ISIN_TYPES(GC_ISIN_CASE)
#undef GC_ISIN_CASE
    default: return -1;
    }
    /* ~ log2(k) + 2 compares per element, a few ns each */
    double steps = 2.0;
    for (ptrdiff_t k = c.k; k > 1; k >>= 1)
        steps += 1.0;
    if (c.k <= GC_ISIN_DIRECT)
        steps = (double)c.k + 1.0;
    gc_parallel_range(n, 64, (double)n * steps * 1.5, isin_range, &c);
    return 0;
}
