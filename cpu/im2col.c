/* im2col / col2im for NCHW convolution with stride, padding and dilation.
 *
 * col [n, c*kh*kw, oh*ow], row (ci*kh + ki)*kw + kj, column oy*ow + ox reads
 * x[b, ci, oy*sh - ph + ki*dh, ox*sw - pw + kj*dw] (0 outside the image).  For each (ki, kj) the
 * range of ox whose input column lies inside the image is computed once, so the inner loops
 * carry no bounds tests.  col2im is the exact adjoint: it zeroes x and accumulates. */
#ifndef GC_T

#include "kernels.h"

/* ceil(a / b) for b > 0 and any a */
static inline ptrdiff_t gc_ceil_div(ptrdiff_t a, ptrdiff_t b)
{
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/* [lo, hi): the ox for which 0 <= ox*s + off < w, clamped to [0, o] */
static inline void gc_valid_range(ptrdiff_t off, ptrdiff_t s, ptrdiff_t w, ptrdiff_t o,
                                  ptrdiff_t *lo, ptrdiff_t *hi)
{
    ptrdiff_t l = gc_ceil_div(-off, s), h = gc_ceil_div(w - off, s);
    if (l < 0)
        l = 0;
    if (h > o)
        h = o;
    if (h < l)
        h = l;
    *lo = l;
    *hi = h;
}

#define GC_T float
#define GC_SFX f32
#include "im2col.c"
#undef GC_T
#undef GC_SFX

#define GC_T double
#define GC_SFX f64
#include "im2col.c"
#undef GC_T
#undef GC_SFX

#else /* type-generic body, T = GC_T */

void GC_FN(gc_im2col)(const GC_T *restrict x, GC_T *restrict col, const gc_conv *p)
{
    const ptrdiff_t ohw = p->oh * p->ow, rows = p->c * p->kh * p->kw;
    for (ptrdiff_t b = 0; b < p->n; b++) {
        for (ptrdiff_t ci = 0; ci < p->c; ci++) {
            const GC_T *img = x + (b * p->c + ci) * p->h * p->w;
            for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
                for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
                    const ptrdiff_t row = (ci * p->kh + ki) * p->kw + kj;
                    GC_T *dst = col + (b * rows + row) * ohw;
                    const ptrdiff_t xoff = kj * p->dw - p->pw;
                    ptrdiff_t lo, hi;
                    gc_valid_range(xoff, p->sw, p->w, p->ow, &lo, &hi);
                    for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
                        GC_T *d = dst + oy * p->ow;
                        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
                        if (iy < 0 || iy >= p->h) {
                            for (ptrdiff_t ox = 0; ox < p->ow; ox++)
                                d[ox] = (GC_T)0;
                            continue;
                        }
                        for (ptrdiff_t ox = 0; ox < lo; ox++)
                            d[ox] = (GC_T)0;
                        if (lo < hi) {
                            /* s points at the input of column lo */
                            const GC_T *s = img + iy * p->w + lo * p->sw + xoff;
                            GC_T *dl = d + lo;
                            const ptrdiff_t cnt = hi - lo;
                            if (p->sw == 1) {
                                for (ptrdiff_t t = 0; t < cnt; t++)
                                    dl[t] = s[t];
                            } else {
                                for (ptrdiff_t t = 0; t < cnt; t++)
                                    dl[t] = s[t * p->sw];
                            }
                        }
                        for (ptrdiff_t ox = hi; ox < p->ow; ox++)
                            d[ox] = (GC_T)0;
                    }
                }
            }
        }
    }
}

void GC_FN(gc_col2im)(const GC_T *restrict col, GC_T *restrict x, const gc_conv *p)
{
    const ptrdiff_t ohw = p->oh * p->ow, rows = p->c * p->kh * p->kw;
    const ptrdiff_t total = p->n * p->c * p->h * p->w;
    for (ptrdiff_t i = 0; i < total; i++)
        x[i] = (GC_T)0;
    for (ptrdiff_t b = 0; b < p->n; b++) {
        for (ptrdiff_t ci = 0; ci < p->c; ci++) {
            GC_T *img = x + (b * p->c + ci) * p->h * p->w;
            for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
                for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
                    const ptrdiff_t row = (ci * p->kh + ki) * p->kw + kj;
                    const GC_T *src = col + (b * rows + row) * ohw;
                    const ptrdiff_t xoff = kj * p->dw - p->pw;
                    ptrdiff_t lo, hi;
                    gc_valid_range(xoff, p->sw, p->w, p->ow, &lo, &hi);
                    for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
                        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
                        if (iy < 0 || iy >= p->h)
                            continue;
                        if (lo >= hi)
                            continue;
                        const GC_T *sr = src + oy * p->ow + lo;
                        GC_T *d = img + iy * p->w + lo * p->sw + xoff;
                        const ptrdiff_t cnt = hi - lo;
                        if (p->sw == 1) {
                            for (ptrdiff_t t = 0; t < cnt; t++)
                                d[t] += sr[t];
                        } else {
                            for (ptrdiff_t t = 0; t < cnt; t++)
                                d[t * p->sw] += sr[t];
                        }
                    }
                }
            }
        }
    }
}

#endif
