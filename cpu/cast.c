/* Strided conversion between gpucore's element types (bool, uint8, int8, int16, int32, int64,
 * float32, float64): Tensor.to(dtype) in compiled programs and deployed models.
 *
 * Every value goes through one of two carriers, so that each conversion rounds once: integers
 * and bools as int64 (exact), floats as double (exact for float32).  From a carrier to the
 * destination: the C conversion where C defines it, and numpy's x86-64 results where C leaves it
 * undefined (a float outside the integer range: cvttss2si's "integer indefinite", the type's
 * minimum), so compiled programs give the eager path's (numpy's) bits on every input. */
#include <stdint.h>

#include "kernels.h"

/* float -> int32 / int64 as cvttsd2si: truncation, or the minimum when out of range or NaN */
static inline int32_t trunc_i32(double x)
{
    return x > -2147483649.0 && x < 2147483648.0 ? (int32_t)x : INT32_MIN;
}

static inline int64_t trunc_i64(double x)
{
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0 ? (int64_t)x : INT64_MIN;
}

/* The destinations: from an int64 carrier (_i) and from a double carrier (_f).  Narrow integers
 * keep the low bits (numpy converts floats to them through int32). */
#define TO_BOOL_I(v) ((uint8_t)((v) != 0))
#define TO_BOOL_F(v) ((uint8_t)((v) != 0.0))
#define TO_U8_I(v) ((uint8_t)(uint64_t)(v))
#define TO_U8_F(v) ((uint8_t)(uint32_t)trunc_i32(v))
#define TO_I8_I(v) ((int8_t)(uint8_t)(uint64_t)(v))
#define TO_I8_F(v) ((int8_t)(uint8_t)(uint32_t)trunc_i32(v))
#define TO_I16_I(v) ((int16_t)(uint16_t)(uint64_t)(v))
#define TO_I16_F(v) ((int16_t)(uint16_t)(uint32_t)trunc_i32(v))
#define TO_I32_I(v) ((int32_t)(uint32_t)(uint64_t)(v))
#define TO_I32_F(v) trunc_i32(v)
#define TO_I64_I(v) ((int64_t)(v))
#define TO_I64_F(v) trunc_i64(v)
#define TO_F32_I(v) ((float)(v))
#define TO_F32_F(v) ((float)(v))
#define TO_F64_I(v) ((double)(v))
#define TO_F64_F(v) ((double)(v))

/* X(elem, C type, carrier type, carrier suffix) */
#define GC_CAST_TYPES(X)                                                                          \
    X(BOOL, uint8_t, int64_t, I)                                                                  \
    X(U8, uint8_t, int64_t, I)                                                                    \
    X(I8, int8_t, int64_t, I)                                                                     \
    X(I32, int32_t, int64_t, I)                                                                   \
    X(I64, int64_t, int64_t, I)                                                                   \
    X(F32, float, double, F)                                                                      \
    X(F64, double, double, F)                                                                     \
    X(I16, int16_t, int64_t, I)

#define GC_CAST_ROW(SE, ST, SC, SK, DE, DT)                                                       \
    static void row_##SE##_##DE(ptrdiff_t n, const void *sv, ptrdiff_t ss, void *dv,             \
                                ptrdiff_t ds)                                                     \
    {                                                                                             \
        const ST *restrict s = sv;                                                                \
        DT *restrict d = dv;                                                                      \
        for (ptrdiff_t i = 0; i < n; i++) {                                                       \
            const SC v = (SC)s[i * ss];                                                           \
            d[i * ds] = TO_##DE##_##SK(v);                                                        \
        }                                                                                         \
    }

typedef void (*cast_row)(ptrdiff_t n, const void *s, ptrdiff_t ss, void *d, ptrdiff_t ds);

/* row_<src>_<dst> for every pair, and the table indexed [src][dst] */
#define GC_CAST_SRC(SE, ST, SC, SK)                                                               \
    GC_CAST_ROW(SE, ST, SC, SK, BOOL, uint8_t)                                                    \
    GC_CAST_ROW(SE, ST, SC, SK, U8, uint8_t)                                                      \
    GC_CAST_ROW(SE, ST, SC, SK, I8, int8_t)                                                       \
    GC_CAST_ROW(SE, ST, SC, SK, I32, int32_t)                                                     \
    GC_CAST_ROW(SE, ST, SC, SK, I64, int64_t)                                                     \
    GC_CAST_ROW(SE, ST, SC, SK, F32, float)                                                       \
    GC_CAST_ROW(SE, ST, SC, SK, F64, double)                                                      \
    GC_CAST_ROW(SE, ST, SC, SK, I16, int16_t)
GC_CAST_TYPES(GC_CAST_SRC)

#define GC_CAST_ENTRY(SE, ST, SC, SK)                                                             \
    [GC_ELEM_##SE] = {row_##SE##_BOOL, row_##SE##_U8,  row_##SE##_I8, row_##SE##_I32,              \
                      row_##SE##_I64,  row_##SE##_F32, row_##SE##_F64, row_##SE##_I16},
static const cast_row ROWS[GC_ELEM_COUNT][GC_ELEM_COUNT] = {GC_CAST_TYPES(GC_CAST_ENTRY)};

static const int ITEM[GC_ELEM_COUNT] = {1, 1, 1, 4, 8, 4, 8, 2};

void gc_cast(const gc_iter *it, const void *src, gc_elem st, void *dst, gc_elem dt)
{
    const cast_row row = ROWS[st][dt];
    ptrdiff_t idx[GC_MAX_DIMS] = {0}, off[2] = {0, 0};
    const int last = it->ndim - 1;
    const ptrdiff_t n = it->shape[last], ss = it->stride[0][last], ds = it->stride[1][last];
    do {
        row(n, (const char *)src + off[0] * ITEM[st], ss, (char *)dst + off[1] * ITEM[dt], ds);
    } while (gc_iter_next(it, idx, off, 2));
}
