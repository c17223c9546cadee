/* gather along one dim (torch.gather): out[i] = x[i with its dim-th index replaced by index[i]],
 * any strides, items of 1, 2, 4 or 8 bytes; and its row form's inverse, index_add_rows
 * (out[index[i]] += src[i] over rows: the gradient of an embedding lookup / index_select). */
#include "kernels.h"

#define GC_GATHER_ROW(U)                                                                          \
    static int gc_gather_row_##U(ptrdiff_t n, const U *x, ptrdiff_t xs, ptrdiff_t xd,             \
                                 ptrdiff_t nx, const int64_t *ix, ptrdiff_t is, U *o,              \
                                 ptrdiff_t os, int64_t *bad)                                      \
    {                                                                                             \
        for (ptrdiff_t i = 0; i < n; i++) {                                                       \
            const int64_t k = ix[i * is];                                                         \
            if (k < 0 || k >= nx) {                                                               \
                *bad = k;                                                                         \
                return -1;                                                                        \
            }                                                                                     \
            o[i * os] = x[i * xs + k * xd];                                                       \
        }                                                                                         \
        return 0;                                                                                 \
    }

GC_GATHER_ROW(uint8_t)
GC_GATHER_ROW(uint16_t)
GC_GATHER_ROW(uint32_t)
GC_GATHER_ROW(uint64_t)

int gc_gather(const gc_iter *it, const void *x, ptrdiff_t xd, ptrdiff_t nx, const int64_t *index,
              void *out, size_t itemsize, int64_t *bad)
{
    ptrdiff_t idx[GC_MAX_DIMS] = {0}, off[3] = {0, 0, 0};
    const int last = it->ndim - 1;
    const ptrdiff_t n = it->shape[last];
    const ptrdiff_t xs = it->stride[0][last], is = it->stride[1][last], os = it->stride[2][last];
    int rc = 0;
    do {
        const int64_t *ix = index + off[1];
        switch (itemsize) {
        case 1:
            rc = gc_gather_row_uint8_t(n, (const uint8_t *)x + off[0], xs, xd, nx, ix, is,
                                       (uint8_t *)out + off[2], os, bad);
            break;
        case 2:
            rc = gc_gather_row_uint16_t(n, (const uint16_t *)x + off[0], xs, xd, nx, ix, is,
                                        (uint16_t *)out + off[2], os, bad);
            break;
        case 4:
            rc = gc_gather_row_uint32_t(n, (const uint32_t *)x + off[0], xs, xd, nx, ix, is,
                                        (uint32_t *)out + off[2], os, bad);
            break;
        default:
            rc = gc_gather_row_uint64_t(n, (const uint64_t *)x + off[0], xs, xd, nx, ix, is,
                                        (uint64_t *)out + off[2], os, bad);
            break;
        }
    } while (rc == 0 && gc_iter_next(it, idx, off, 3));
    return rc;
}

/* out[index[i], :] += src[i, :] for i in order (repeated indices add up in the order they come,
 * as numpy's add.at): one thread, sequential, so the bits depend on nothing but the data. */
#define GC_INDEX_ADD_ROWS(T, SFX)                                                                 \
    int gc_index_add_rows_##SFX(T *out, ptrdiff_t n, ptrdiff_t inner, const int64_t *index,     \
                                ptrdiff_t m, const T *src, int64_t *bad)                        \
    {                                                                                             \
        for (ptrdiff_t i = 0; i < m; i++) {                                                       \
            int64_t k = index[i];                                                                 \
            if (k < 0)                                                                            \
                k += n;                                                                           \
            if (k < 0 || k >= n) {                                                                \
                *bad = index[i];                                                                  \
                return -1;                                                                        \
            }                                                                                     \
            T *restrict o = out + k * inner;                                                      \
            const T *restrict s = src + i * inner;                                                \
            for (ptrdiff_t c = 0; c < inner; c++)                                                 \
                o[c] += s[c];                                                                     \
        }                                                                                         \
        return 0;                                                                                 \
    }

GC_INDEX_ADD_ROWS(float, f32)
GC_INDEX_ADD_ROWS(double, f64)
