/* Strided copy of items of 1, 2, 4 or 8 bytes between two same-shaped views, and the collapse of
 * an iteration space (gc_iter_collapse, kernels.h: the bindings' and the C API's). */
#include <string.h>

#include "kernels.h"

#define GC_COPY_ROW(U)                                                                            \
    static void gc_copy_row_##U(ptrdiff_t n, const U *restrict s, ptrdiff_t ss, U *restrict d,    \
                                ptrdiff_t ds)                                                     \
    {                                                                                             \
        if (ss == 1 && ds == 1) {                                                                 \
            memcpy(d, s, (size_t)n * sizeof(U));                                                  \
        } else if (ss == 0) {                                                                     \
            const U v = s[0];                                                                     \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                d[i * ds] = v;                                                                    \
        } else if (ds == 1) {                                                                     \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                d[i] = s[i * ss];                                                                 \
        } else {                                                                                  \
            for (ptrdiff_t i = 0; i < n; i++)                                                     \
                d[i * ds] = s[i * ss];                                                            \
        }                                                                                         \
    }

GC_COPY_ROW(uint8_t)
GC_COPY_ROW(uint16_t)
GC_COPY_ROW(uint32_t)
GC_COPY_ROW(uint64_t)

void gc_iter_collapse(gc_iter *it, int nops)
{
    gc_iter r;
    memset(&r, 0, sizeof r);
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1)
            continue;
        if (nd > 0) {
            int merge = 1;
            for (int o = 0; o < nops; o++)
                merge &= r.stride[o][nd - 1] == it->stride[o][d] * it->shape[d];
            if (merge) {
                r.shape[nd - 1] *= it->shape[d];
                for (int o = 0; o < nops; o++)
                    r.stride[o][nd - 1] = it->stride[o][d];
                continue;
            }
        }
        r.shape[nd] = it->shape[d];
        for (int o = 0; o < nops; o++)
            r.stride[o][nd] = it->stride[o][d];
        nd++;
    }
    if (nd == 0) {
        r.shape[0] = 1;
        nd = 1;
    }
    r.ndim = nd;
    *it = r;
}

void gc_copy(const gc_iter *it, const void *src, void *dst, size_t itemsize)
{
    ptrdiff_t idx[GC_MAX_DIMS] = {0}, off[2] = {0, 0};
    const int last = it->ndim - 1;
    const ptrdiff_t n = it->shape[last], ss = it->stride[0][last], ds = it->stride[1][last];
    if (src == dst && ss == ds) {
        /* same elements: a no-op when every stride agrees */
        int same = 1;
        for (int d = 0; d < it->ndim; d++)
            same &= it->stride[0][d] == it->stride[1][d];
        if (same)
            return;
    }
    /* The two innermost dims in a plain loop, the iterator over the rest: short rows (a head's
     * 32 floats when a [B, H, S, D] attention output is transposed back) would otherwise pay the
     * iterator's step per row. */
    gc_iter outer = *it;
    ptrdiff_t rows = 1, rs = 0, rd = 0;
    if (it->ndim >= 2) {
        outer.ndim = it->ndim - 1;
        rows = it->shape[last - 1];
        rs = it->stride[0][last - 1];
        rd = it->stride[1][last - 1];
    }
    do {
        for (ptrdiff_t r = 0; r < rows; r++) {
            const ptrdiff_t os = off[0] + r * rs, od = off[1] + r * rd;
            switch (itemsize) {
            case 1:
                gc_copy_row_uint8_t(n, (const uint8_t *)src + os, ss, (uint8_t *)dst + od, ds);
                break;
            case 2:
                gc_copy_row_uint16_t(n, (const uint16_t *)src + os, ss, (uint16_t *)dst + od, ds);
                break;
            case 4:
                gc_copy_row_uint32_t(n, (const uint32_t *)src + os, ss, (uint32_t *)dst + od, ds);
                break;
            default:
                gc_copy_row_uint64_t(n, (const uint64_t *)src + os, ss, (uint64_t *)dst + od, ds);
                break;
            }
        }
    } while (it->ndim >= 2 && gc_iter_next(&outer, idx, off, 2));
}
