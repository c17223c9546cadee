/* Broadcasting binary kernels (a op b) and where (cond ? a : b).
 *
 * The bindings (python/binary.c) build the gc_iter: out's shape, each operand's element strides
 * (0 where it is broadcast), size-1 dimensions dropped and mergeable dimensions collapsed.  The
 * kernels walk the outer dimensions and run a row loop over the innermost one, with fast paths for
 * contiguous operands and for a broadcast (stride 0) operand. */
#ifndef GC_T

#include <math.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

#define GC_BODY "binary.c"
#include "each_float.h"

/* ---- where: type-agnostic select over items of 1, 2, 4 or 8 bytes ---- */

#define GC_WHERE_ROW(U)                                                                           \
    static void gc_where_row_##U(ptrdiff_t n, const unsigned char *c, ptrdiff_t sc, const U *a,   \
                                 ptrdiff_t sa, const U *b, ptrdiff_t sb, U *o)                    \
    {                                                                                             \
        if (sc == 1 && sa == 1 && sb == 1) {                                                      \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                o[i] = c[i] ? a[i] : b[i];                                                        \
        } else if (sc == 1 && sa == 0 && sb == 0) {                                               \
            const U av = a[0], bv = b[0];                                                         \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                o[i] = c[i] ? av : bv;                                                            \
        } else {                                                                                  \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                o[i] = c[i * sc] ? a[i * sa] : b[i * sb];                                         \
        }                                                                                         \
    }

GC_WHERE_ROW(uint8_t)
GC_WHERE_ROW(uint16_t)
GC_WHERE_ROW(uint32_t)
GC_WHERE_ROW(uint64_t)

void gc_where(const gc_iter *it, const unsigned char *cond, const void *a, const void *b, void *out,
              size_t itemsize)
{
    ptrdiff_t idx[GC_MAX_DIMS] = {0}, off[4] = {0, 0, 0, 0};
    const int last = it->ndim - 1;
    const ptrdiff_t n = it->shape[last];
    do {
        const unsigned char *c = cond + off[0];
        switch (itemsize) {
        case 1:
            gc_where_row_uint8_t(n, c, it->stride[0][last], (const uint8_t *)a + off[1],
                                 it->stride[1][last], (const uint8_t *)b + off[2],
                                 it->stride[2][last], (uint8_t *)out + off[3]);
            break;
        case 2:
            gc_where_row_uint16_t(n, c, it->stride[0][last], (const uint16_t *)a + off[1],
                                  it->stride[1][last], (const uint16_t *)b + off[2],
                                  it->stride[2][last], (uint16_t *)out + off[3]);
            break;
        case 4:
            gc_where_row_uint32_t(n, c, it->stride[0][last], (const uint32_t *)a + off[1],
                                  it->stride[1][last], (const uint32_t *)b + off[2],
                                  it->stride[2][last], (uint32_t *)out + off[3]);
            break;
        default:
            gc_where_row_uint64_t(n, c, it->stride[0][last], (const uint64_t *)a + off[1],
                                  it->stride[1][last], (const uint64_t *)b + off[2],
                                  it->stride[2][last], (uint64_t *)out + off[3]);
            break;
        }
    } while (gc_iter_next(it, idx, off, 4));
}

#else /* type-generic body, T = GC_T */

/* One output row of n elements: out[i] = EXPR(x = a[i*sa], y = b[i*sb]); out is contiguous. */
#define GC_BIN_ROW(OT, EXPR)                                                                      \
    do {                                                                                          \
        OT *o = (OT *)out;                                                                        \
        if (sa == 1 && sb == 1) {                                                                 \
            for (ptrdiff_t i = 0; i < n; i++) {                                                   \
                const GC_T x = a[i], y = b[i];                                                    \
                o[i] = (OT)(EXPR);                                                                \
            }                                                                                     \
        } else if (sa == 0 && sb == 1) {                                                          \
            const GC_T x = a[0];                                                                  \
            for (ptrdiff_t i = 0; i < n; i++) {                                                   \
                const GC_T y = b[i];                                                              \
                o[i] = (OT)(EXPR);                                                                \
            }                                                                                     \
        } else if (sa == 1 && sb == 0) {                                                          \
            const GC_T y = b[0];                                                                  \
            for (ptrdiff_t i = 0; i < n; i++) {                                                   \
                const GC_T x = a[i];                                                              \
                o[i] = (OT)(EXPR);                                                                \
            }                                                                                     \
        } else {                                                                                  \
            for (ptrdiff_t i = 0; i < n; i++) {                                                   \
                const GC_T x = a[i * sa], y = b[i * sb];                                          \
                o[i] = (OT)(EXPR);                                                                \
            }                                                                                     \
        }                                                                                         \
    } while (0);                                                                                  \
    break

/* out may be the same memory as a or b (same shape, contiguous), so no restrict. */
static void GC_FN(binary_row)(int op, ptrdiff_t n, const GC_T *a, ptrdiff_t sa, const GC_T *b,
                              ptrdiff_t sb, void *out)
{
    switch (op) {
    case GC_BINARY_ADD: GC_BIN_ROW(GC_T, x + y);
    case GC_BINARY_SUB: GC_BIN_ROW(GC_T, x - y);
    case GC_BINARY_MUL: GC_BIN_ROW(GC_T, x * y);
    case GC_BINARY_DIV: GC_BIN_ROW(GC_T, x / y);
    case GC_BINARY_POW: GC_BIN_ROW(GC_T, GC_M(pow)(x, y));
    /* NaN-propagating: a NaN x wins via x != x, a NaN y wins because the comparison fails. */
    case GC_BINARY_MAXIMUM: GC_BIN_ROW(GC_T, (x > y || x != x) ? x : y);
    case GC_BINARY_MINIMUM: GC_BIN_ROW(GC_T, (x < y || x != x) ? x : y);
    case GC_BINARY_EQ: GC_BIN_ROW(unsigned char, x == y);
    case GC_BINARY_NE: GC_BIN_ROW(unsigned char, x != y);
    case GC_BINARY_LT: GC_BIN_ROW(unsigned char, x < y);
    case GC_BINARY_LE: GC_BIN_ROW(unsigned char, x <= y);
    case GC_BINARY_GT: GC_BIN_ROW(unsigned char, x > y);
    case GC_BINARY_GE: GC_BIN_ROW(unsigned char, x >= y);
    default: break;
    }
}
#undef GC_BIN_ROW

typedef struct {
    int op;
    const gc_iter *it;
    const GC_T *a, *b;
    void *out;
} GC_FN(binary_job);

/* Elements [lo, hi) of the iteration space in C order (rows of it->shape[last] elements). */
static void GC_FN(binary_span)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(binary_job) *J = (const GC_FN(binary_job) *)ctx;
    const gc_iter *it = J->it;
    const int op = J->op, last = it->ndim - 1;
    const size_t osize = gc_binary_writes_bool(op) ? 1 : sizeof(GC_T);
    const ptrdiff_t len = it->shape[last], sa = it->stride[0][last], sb = it->stride[1][last];
    ptrdiff_t idx[GC_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    ptrdiff_t r = lo / len, c = lo % len;
    for (int d = last - 1; d >= 0; d--) { /* the multi-index of row r */
        idx[d] = r % it->shape[d];
        r /= it->shape[d];
        for (int o = 0; o < 3; o++)
            off[o] += idx[d] * it->stride[o][d];
    }
    while (lo < hi) {
        const ptrdiff_t cnt = (len - c < hi - lo) ? len - c : hi - lo;
        GC_FN(binary_row)(op, cnt, J->a + off[0] + c * sa, sa, J->b + off[1] + c * sb, sb,
                          (char *)J->out + (size_t)(off[2] + c) * osize);
        lo += cnt;
        c = 0;
        if (lo < hi && !gc_iter_next(it, idx, off, 3))
            break;
    }
}

void GC_FN(gc_binary)(int op, const gc_iter *it, const GC_T *a, const GC_T *b, void *out)
{
    ptrdiff_t total = 1;
    for (int d = 0; d < it->ndim; d++)
        total *= it->shape[d];
    const double per = op == GC_BINARY_POW ? 8.0 : 0.4; /* ns per element */
    GC_FN(binary_job) J = {.op = op, .it = it, .a = a, .b = b, .out = out};
    gc_parallel_range(total, 64, (double)total * per, GC_FN(binary_span), &J);
}

#endif
