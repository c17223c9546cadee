/* avg_pool2d forward and backward over [planes, H, W] planes split across the thread pool
 * (gc_pool2d geometry; dilation 1).  PyTorch's divisor: with divisor > 0 that value; else the
 * window clipped to the padded input [-ph, h + ph) (ceil_mode's windows may pass it) when
 * count_include_pad, or to the input itself when not.  Padding adds zeros.
 *
 * Forward: each output sums its window's in-image inputs row by row (ki, then kj) and divides.
 * Backward: per plane, zeros, then each output adds g / divisor to its window's inputs in output
 * order (one division per output; a gather per input, recomputing its cover ranges and divisors,
 * measured ~2x slower); 2x2 windows are unrolled both ways.  Planes are split over the pool, each
 * summed on one thread in the same order: any split gives the same bits. */
#ifndef GC_T

#include <stddef.h>

#include "isa.h"
#include "kernels.h"

/* One axis's share of output o's divisor: the window [o*s - pad, o*s - pad + k) clipped to the
 * padded input [-pad, size + pad) when include_pad, else to the input [0, size).  PyTorch's
 * divisor is the product of the two axes' shares (or divisor when > 0). */
static inline ptrdiff_t ap_len(ptrdiff_t o, ptrdiff_t s, ptrdiff_t pad, ptrdiff_t k,
                               ptrdiff_t size, int include_pad)
{
    ptrdiff_t a = o * s - pad, b = a + k;
    if (b > size + pad)
        b = size + pad;
    if (!include_pad) {
        a = a < 0 ? 0 : a;
        b = b > size ? size : b;
    }
    return b > a ? b - a : 0;
}

static inline double ap_div(const gc_pool2d *p, ptrdiff_t oy, ptrdiff_t ox, int include_pad,
                            ptrdiff_t divisor)
{
    if (divisor > 0)
        return (double)divisor;
    const ptrdiff_t n = ap_len(oy, p->sh, p->ph, p->kh, p->h, include_pad) *
                        ap_len(ox, p->sw, p->pw, p->kw, p->w, include_pad);
    return n > 0 ? (double)n : 1.0;
}

#define GC_BODY "avgpool.c"
#include "each_float.h"

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *x;
    GC_T *y;
    const gc_pool2d *p;
    int include_pad;
    ptrdiff_t divisor;
} GC_FN(ap_job);

static void GC_FN(ap_fwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(ap_job) *J = (const GC_FN(ap_job) *)ctx;
    const gc_pool2d *p = J->p;
    const ptrdiff_t hw = p->h * p->w, ohw = p->oh * p->ow;
    for (ptrdiff_t pl = lo; pl < hi; pl++) {
        const GC_T *x = J->x + pl * hw;
        GC_T *y = J->y + pl * ohw;
        for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
            ptrdiff_t h0 = oy * p->sh - p->ph, h1 = h0 + p->kh;
            h0 = h0 < 0 ? 0 : h0;
            h1 = h1 > p->h ? p->h : h1;
            for (ptrdiff_t ox = 0; ox < p->ow; ox++) {
                ptrdiff_t w0 = ox * p->sw - p->pw, w1 = w0 + p->kw;
                w0 = w0 < 0 ? 0 : w0;
                w1 = w1 > p->w ? p->w : w1;
                GC_T s = (GC_T)0;
                if (h1 - h0 == 2 && w1 - w0 == 2) { /* the common 2x2 window, unrolled */
                    const GC_T *r = x + h0 * p->w + w0;
                    s = ((s + r[0]) + r[1]) + r[p->w];
                    s += r[p->w + 1];
                } else {
                    for (ptrdiff_t iy = h0; iy < h1; iy++)
                        for (ptrdiff_t ix = w0; ix < w1; ix++)
                            s += x[iy * p->w + ix];
                }
                y[oy * p->ow + ox] = s / (GC_T)ap_div(p, oy, ox, J->include_pad, J->divisor);
            }
        }
    }
}

static void GC_FN(ap_bwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(ap_job) *J = (const GC_FN(ap_job) *)ctx;
    const gc_pool2d *p = J->p;
    const ptrdiff_t hw = p->h * p->w, ohw = p->oh * p->ow;
    for (ptrdiff_t pl = lo; pl < hi; pl++) {
        const GC_T *g = J->x + pl * ohw; /* the incoming gradient [oh, ow] */
        GC_T *gx = J->y + pl * hw;
        for (ptrdiff_t i = 0; i < hw; i++)
            gx[i] = (GC_T)0;
        for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
            ptrdiff_t h0 = oy * p->sh - p->ph, h1 = h0 + p->kh;
            h0 = h0 < 0 ? 0 : h0;
            h1 = h1 > p->h ? p->h : h1;
            for (ptrdiff_t ox = 0; ox < p->ow; ox++) {
                ptrdiff_t w0 = ox * p->sw - p->pw, w1 = w0 + p->kw;
                w0 = w0 < 0 ? 0 : w0;
                w1 = w1 > p->w ? p->w : w1;
                const GC_T v =
                    g[oy * p->ow + ox] / (GC_T)ap_div(p, oy, ox, J->include_pad, J->divisor);
                if (h1 - h0 == 2 && w1 - w0 == 2) { /* the common 2x2 window, unrolled */
                    GC_T *r = gx + h0 * p->w + w0;
                    r[0] += v;
                    r[1] += v;
                    r[p->w] += v;
                    r[p->w + 1] += v;
                    continue;
                }
                for (ptrdiff_t iy = h0; iy < h1; iy++)
                    for (ptrdiff_t ix = w0; ix < w1; ix++)
                        gx[iy * p->w + ix] += v;
            }
        }
    }
}

void GC_FN(gc_avg_pool2d)(const GC_T *x, GC_T *y, const gc_pool2d *p, int include_pad,
                          ptrdiff_t divisor)
{
    GC_FN(ap_job) J = {.x = x, .y = y, .p = p, .include_pad = include_pad, .divisor = divisor};
    const double cost = (double)p->planes * (double)(p->oh * p->ow) * (double)(p->kh * p->kw);
    gc_parallel_range(p->planes, 1, cost * 0.5 + (double)p->planes * 20.0, GC_FN(ap_fwd_range),
                      &J);
}

void GC_FN(gc_avg_pool2d_backward)(const GC_T *g, GC_T *gx, const gc_pool2d *p, int include_pad,
                                   ptrdiff_t divisor)
{
    GC_FN(ap_job) J = {.x = g, .y = gx, .p = p, .include_pad = include_pad, .divisor = divisor};
    const double cost = (double)p->planes * (double)(p->h * p->w) *
                        (double)((p->kh + p->sh - 1) / p->sh * ((p->kw + p->sw - 1) / p->sw));
    gc_parallel_range(p->planes, 1, cost * 1.5 + (double)p->planes * 20.0, GC_FN(ap_bwd_range),
                      &J);
}

#endif
