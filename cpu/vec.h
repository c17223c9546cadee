/* 16-byte vectors through the compiler's generic vector extensions (GCC / clang): SSE2 on x86,
 * NEON on arm64 -- portable code for the few loops the compiler does not vectorize by itself
 * (register transposes in GEMM packing, NaN-ignoring maxima, chunked sums). */
#ifndef GPUCORE_VEC_H
#define GPUCORE_VEC_H

#include <string.h>

/* On a function whose plain copy loops must stay loops: GCC turns them into memcpy / memset calls,
 * which cost more than the copy for the few elements of a panel row (packing, im2col). */
#if defined(__GNUC__) && !defined(__clang__)
#define GC_NO_MEMCPY_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define GC_NO_MEMCPY_IDIOM
#endif

typedef float gc_v4f __attribute__((vector_size(16)));
typedef double gc_v2d __attribute__((vector_size(16)));
typedef int gc_v4i __attribute__((vector_size(16)));
typedef long long gc_v2l __attribute__((vector_size(16)));

#if defined(__clang__)
#define GC_SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#define GC_SHUF2(a, b, i0, i1) __builtin_shufflevector(a, b, i0, i1)
#else
#define GC_SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (gc_v4i){i0, i1, i2, i3})
#define GC_SHUF2(a, b, i0, i1) __builtin_shuffle(a, b, (gc_v2l){i0, i1})
#endif

/* In-register transpose of x[0..3] (4 rows of 4 floats) / x[0..1] (2 rows of 2 doubles). */
#define GC_TRANSPOSE4(x)                                                                          \
    do {                                                                                          \
        const gc_v4f t0 = GC_SHUF4(x[0], x[1], 0, 4, 1, 5), t1 = GC_SHUF4(x[2], x[3], 0, 4, 1, 5); \
        const gc_v4f t2 = GC_SHUF4(x[0], x[1], 2, 6, 3, 7), t3 = GC_SHUF4(x[2], x[3], 2, 6, 3, 7); \
        x[0] = GC_SHUF4(t0, t1, 0, 1, 4, 5);                                                      \
        x[1] = GC_SHUF4(t0, t1, 2, 3, 6, 7);                                                      \
        x[2] = GC_SHUF4(t2, t3, 0, 1, 4, 5);                                                      \
        x[3] = GC_SHUF4(t2, t3, 2, 3, 6, 7);                                                      \
    } while (0)
#define GC_TRANSPOSE2(x)                                                                          \
    do {                                                                                          \
        const gc_v2d t0 = GC_SHUF2(x[0], x[1], 0, 2);                                             \
        x[1] = GC_SHUF2(x[0], x[1], 1, 3);                                                        \
        x[0] = t0;                                                                                \
    } while (0)

/* a > b ? a : b per lane (NaN in a is ignored, like maxps with a first) */
static inline gc_v4f gc_vmax4(gc_v4f a, gc_v4f b)
{
    const gc_v4i m = a > b;
    return (gc_v4f)(((gc_v4i)a & m) | ((gc_v4i)b & ~m));
}

static inline gc_v2d gc_vmax2(gc_v2d a, gc_v2d b)
{
    const gc_v2l m = a > b;
    return (gc_v2d)(((gc_v2l)a & m) | ((gc_v2l)b & ~m));
}

#endif /* GPUCORE_VEC_H */
