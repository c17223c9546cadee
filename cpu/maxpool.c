/* max_pool2d forward (values + flat int64 indices into each H*W plane) and its backward (a
 * scatter-add at the indices), over [planes, H, W] planes split across the thread pool.
 *
 * Semantics are PyTorch's: padding counts as -inf; the scan goes in window order (ki, kj) and
 * takes `v > max || isnan(v)`, so the first maximum wins, and a NaN wins (the window's last NaN);
 * a window of -inf keeps its first in-image position.  For each (ki, kj) the range of ox whose
 * input column lies inside the image is computed once, so the inner loops carry no bounds tests.
 * Each output is computed the same way whatever thread runs it, and the backward sums every
 * plane in output order on one thread, so results do not depend on the thread count. */
#ifndef GC_T

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <stdatomic.h>

#include "isa.h"
#include "kernels.h"

/* [lo, hi): the o for which 0 <= o*s + off < size, clamped to [0, n) */
static inline void mp_range(ptrdiff_t off, ptrdiff_t s, ptrdiff_t size, ptrdiff_t n,
                            ptrdiff_t *lo, ptrdiff_t *hi)
{
    if (off >= 0 && off + (n - 1) * s < size) { /* the common case: no division */
        *lo = 0;
        *hi = n;
        return;
    }
    ptrdiff_t l = off >= 0 ? 0 : (-off + s - 1) / s;
    ptrdiff_t h = size - off <= 0 ? 0 : (size - off + s - 1) / s;
    if (h > n)
        h = n;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

#define GC_T float
#define GC_UT uint32_t
#define GC_SFX f32
#include "maxpool.c"
#undef GC_T
#undef GC_UT
#undef GC_SFX

#define GC_T double
#define GC_UT uint64_t
#define GC_SFX f64
#include "maxpool.c"
#undef GC_T
#undef GC_UT
#undef GC_SFX

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *x;
    GC_T *vals;
    int64_t *idx;
    const GC_T *g;
    const int64_t *bidx;
    GC_T *gx;
    const gc_pool2d *p;
    atomic_int bad;
} GC_FN(mp_job);

static void GC_FN(mp_fwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(mp_job) *J = (GC_FN(mp_job) *)ctx;
    const gc_pool2d *p = J->p;
    const ptrdiff_t hw = p->h * p->w, ohw = p->oh * p->ow;
    for (ptrdiff_t pl = lo; pl < hi; pl++) {
        const GC_T *x = J->x + pl * hw;
        GC_T *v = J->vals + pl * ohw;
        int64_t *id = J->idx + pl * ohw;
        for (ptrdiff_t i = 0; i < ohw; i++) {
            v[i] = (GC_T)-INFINITY;
            id[i] = -1;
        }
        /* Window positions outer, outputs of a row inner: the outputs are independent, so the
         * compare-select chains of neighbouring outputs overlap (one window at a time is bound
         * by the chain's latency, 3x slower). */
        for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
            GC_T *vr = v + oy * p->ow;
            int64_t *ir = id + oy * p->ow;
            for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
                const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
                if (iy < 0 || iy >= p->h)
                    continue;
                for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
                    const ptrdiff_t off = kj * p->dw - p->pw;
                    ptrdiff_t a, b;
                    mp_range(off, p->sw, p->w, p->ow, &a, &b);
                    const GC_T *xr = x + iy * p->w + off;
                    const int64_t base = (int64_t)(iy * p->w + off);
                    for (ptrdiff_t ox = a; ox < b; ox++) {
                        const GC_T val = xr[ox * p->sw];
                        GC_T cur = vr[ox];
                        const int64_t ci = ir[ox];
                        /* The first in-image position is taken whatever its value (a window
                         * of -inf keeps it; cur is -inf then).  Integer masks, not branches:
                         * a compiler turns float selects into jumps, and random data
                         * mispredicts half of them. */
                        const int64_t take = -(int64_t)((val > cur) | (val != val) | (ci < 0));
                        GC_UT vb, cb;
                        memcpy(&vb, &val, sizeof vb);
                        memcpy(&cb, &cur, sizeof cb);
                        cb = (cb & ~(GC_UT)take) | (vb & (GC_UT)take);
                        memcpy(&cur, &cb, sizeof cb);
                        vr[ox] = cur;
                        ir[ox] = (ci & ~take) | ((base + (int64_t)(ox * p->sw)) & take);
                    }
                }
            }
        }
    }
}

static void GC_FN(mp_bwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(mp_job) *J = (GC_FN(mp_job) *)ctx;
    const gc_pool2d *p = J->p;
    const ptrdiff_t hw = p->h * p->w, ohw = p->oh * p->ow;
    for (ptrdiff_t pl = lo; pl < hi; pl++) {
        GC_T *gx = J->gx + pl * hw;
        const GC_T *g = J->g + pl * ohw;
        const int64_t *id = J->bidx + pl * ohw;
        for (ptrdiff_t i = 0; i < hw; i++)
            gx[i] = (GC_T)0;
        for (ptrdiff_t i = 0; i < ohw; i++) {
            const int64_t k = id[i];
            if (k < 0 || k >= hw) {
                atomic_store_explicit(&J->bad, 1, memory_order_relaxed);
                continue;
            }
            gx[k] += g[i];
        }
    }
}

void GC_FN(gc_max_pool2d)(const GC_T *x, GC_T *vals, int64_t *idx, const gc_pool2d *p)
{
    GC_FN(mp_job) J = {.x = x, .vals = vals, .idx = idx, .p = p};
    const double cost = (double)p->planes * (double)(p->oh * p->ow) * (double)(p->kh * p->kw);
    gc_parallel_range(p->planes, 1, cost * 0.7, GC_FN(mp_fwd_range), &J);
}

int GC_FN(gc_max_pool2d_backward)(const GC_T *g, const int64_t *idx, GC_T *gx,
                                  const gc_pool2d *p)
{
    GC_FN(mp_job) J = {.g = g, .bidx = idx, .gx = gx, .p = p};
    atomic_init(&J.bad, 0);
    const double cost = (double)p->planes * (double)(p->h * p->w + 2 * p->oh * p->ow);
    gc_parallel_range(p->planes, 1, cost * 0.5, GC_FN(mp_bwd_range), &J);
    return atomic_load(&J.bad) ? -1 : 0;
}

#endif
