/* gather along one dim (torch.gather): out[i] = x[i with its dim-th index replaced by index[i]],
 * any strides, items of 1, 2, 4 or 8 bytes. */
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
