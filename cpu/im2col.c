/* im2col / col2im for NCHW convolution with stride, padding and dilation.
 *
 * col [n, c*kh*kw, oh*ow], row (ci*kh + ki)*kw + kj, column oy*ow + ox reads
 * x[b, ci, oy*sh - ph + ki*dh, ox*sw - pw + kj*dw] (0 outside the image).  For each (ki, kj) the
 * range of ox whose input column lies inside the image is computed once, so the inner loops
 * carry no bounds tests.  col2im is the exact adjoint: it zeroes x and accumulates.
 * gc_im2col_pack writes one image's col straight into the panels of a packed GEMM operand (the
 * layout gemm_pack gives col as side B), for the fused convolution's pre-packed weights. */
#ifndef GC_T

#include <string.h>

#include "kernels.h"
#include "vec.h"

/* pixels gathered per step of gc_im2col_fill (a stack row; at least the widest panel, 32) */
#define GC_FILL_CHUNK 512

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
#define GC_VT gc_v4f
#define GC_VN 4
#define GC_EVEN(a, b) GC_SHUF4(a, b, 0, 2, 4, 6)
#include "im2col.c"
#undef GC_T
#undef GC_SFX
#undef GC_VT
#undef GC_VN
#undef GC_EVEN

#define GC_T double
#define GC_SFX f64
#define GC_VT gc_v2d
#define GC_VN 2
#define GC_EVEN(a, b) GC_SHUF2(a, b, 0, 2)
#include "im2col.c"
#undef GC_T
#undef GC_SFX
#undef GC_VT
#undef GC_VN
#undef GC_EVEN

#else /* type-generic body, T = GC_T */

/* Columns [l0, l1) of row (ci, ki, kj) of one image's col: dst[l - l0] for pixel l = oy*ow + ox,
 * img = the image's channel ci. */
static void GC_FN(im2col_range)(const GC_T *restrict img, GC_T *restrict dst, const gc_conv *p,
                                ptrdiff_t ki, ptrdiff_t kj, ptrdiff_t l0, ptrdiff_t l1)
{
    const ptrdiff_t xoff = kj * p->dw - p->pw;
    ptrdiff_t lo, hi;
    gc_valid_range(xoff, p->sw, p->w, p->ow, &lo, &hi);
    for (ptrdiff_t oy = l0 / p->ow; oy * p->ow < l1; oy++) {
        /* columns [a, b) of output row oy */
        const ptrdiff_t a = l0 > oy * p->ow ? l0 - oy * p->ow : 0;
        const ptrdiff_t b = l1 < (oy + 1) * p->ow ? l1 - oy * p->ow : p->ow;
        GC_T *d = dst + oy * p->ow - l0;
        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
        if (iy < 0 || iy >= p->h) {
            for (ptrdiff_t ox = a; ox < b; ox++)
                d[ox] = (GC_T)0;
            continue;
        }
        const ptrdiff_t c0 = lo > a ? lo : a, c1 = hi < b ? hi : b;
        for (ptrdiff_t ox = a; ox < (c0 < b ? c0 : b); ox++)
            d[ox] = (GC_T)0;
        if (c0 < c1) {
            /* s points at the input of column c0 */
            const GC_T *s = img + iy * p->w + c0 * p->sw + xoff;
            GC_T *dl = d + c0;
            const ptrdiff_t cnt = c1 - c0;
            if (p->sw == 1) {
                for (ptrdiff_t t = 0; t < cnt; t++)
                    dl[t] = s[t];
            } else if (p->sw == 2) {
                /* even elements of two vectors; the pair's second element s[2t + 1] must lie in
                 * the row: whole vectors while 2 * (c0 + t + GC_VN) - 1 + xoff < w */
                ptrdiff_t t = 0;
                for (; t + GC_VN <= cnt && 2 * (c0 + t + GC_VN) - 1 + xoff < p->w; t += GC_VN) {
                    GC_VT v0, v1, v;
                    memcpy(&v0, s + 2 * t, sizeof v0);
                    memcpy(&v1, s + 2 * t + GC_VN, sizeof v1);
                    v = GC_EVEN(v0, v1);
                    memcpy(dl + t, &v, sizeof v);
                }
                for (; t < cnt; t++)
                    dl[t] = s[2 * t];
            } else {
                for (ptrdiff_t t = 0; t < cnt; t++)
                    dl[t] = s[t * p->sw];
            }
        }
        for (ptrdiff_t ox = c1 > a ? c1 : a; ox < b; ox++)
            d[ox] = (GC_T)0;
    }
}

static void GC_FN(im2col_row)(const GC_T *restrict img, GC_T *restrict dst, const gc_conv *p,
                              ptrdiff_t ki, ptrdiff_t kj)
{
    GC_FN(im2col_range)(img, dst, p, ki, kj, 0, p->oh * p->ow);
}

void GC_FN(gc_im2col)(const GC_T *restrict x, GC_T *restrict col, const gc_conv *p)
{
    const ptrdiff_t ohw = p->oh * p->ow, rows = p->c * p->kh * p->kw;
    for (ptrdiff_t b = 0; b < p->n; b++)
        for (ptrdiff_t ci = 0; ci < p->c; ci++)
            for (ptrdiff_t ki = 0; ki < p->kh; ki++)
                for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                    GC_FN(im2col_row)(x + (b * p->c + ci) * p->h * p->w,
                                      col + (b * rows + (ci * p->kh + ki) * p->kw + kj) * ohw, p,
                                      ki, kj);
}

/* w elements (a panel row) from s to d, in 16-byte moves where whole: a plain loop that the
 * compiler would otherwise turn into a memcpy call per panel row. */
GC_NO_MEMCPY_IDIOM static void GC_FN(panel_row)(GC_T *restrict d, const GC_T *restrict s,
                                                 ptrdiff_t n, ptrdiff_t w)
{
    ptrdiff_t i = 0;
    for (; i + 16 / (ptrdiff_t)sizeof(GC_T) <= n; i += 16 / (ptrdiff_t)sizeof(GC_T)) {
        unsigned char v[16];
        memcpy(v, s + i, 16);
        memcpy(d + i, v, 16);
    }
    for (; i < n; i++)
        d[i] = s[i];
    for (; i < w; i++)
        d[i] = (GC_T)0;
}

void GC_FN(gc_im2col_pack)(const GC_T *restrict x, const gc_packed *P, GC_T *restrict rows,
                           const gc_conv *p)
{
    const ptrdiff_t l = p->oh * p->ow, w = P->w, kc = P->kc, np = P->npan;
    const ptrdiff_t nr = p->c * p->kh * p->kw, khw = p->kh * p->kw;
    GC_T *data = (GC_T *)P->data;
    /* GC_PACK_ROWS rows of col at a time (inside one K block), then each panel's slice of them:
     * contiguous writes rather than one panel row per page */
    for (ptrdiff_t r0 = 0; r0 < nr;) {
        const ptrdiff_t pc = r0 / kc * kc, kb = P->k - pc < kc ? P->k - pc : kc;
        ptrdiff_t r1 = r0 + GC_PACK_ROWS < pc + kb ? r0 + GC_PACK_ROWS : pc + kb;
        for (ptrdiff_t r = r0; r < r1; r++) {
            const ptrdiff_t ci = r / khw, ki = r % khw / p->kw, kj = r % p->kw;
            GC_FN(im2col_row)(x + ci * p->h * p->w, rows + (r - r0) * l, p, ki, kj);
        }
        for (ptrdiff_t q = 0; q < np; q++) {
            GC_T *d = data + pc * np * w + q * w * kb + (r0 - pc) * w;
            const ptrdiff_t n = l - q * w < w ? l - q * w : w;
            for (ptrdiff_t r = r0; r < r1; r++)
                GC_FN(panel_row)(d + (r - r0) * w, rows + (r - r0) * l + q * w, n, w);
        }
        r0 = r1;
    }
}

void GC_FN(gc_im2col_fill)(const void *ctx, void *dst, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t f0,
                           ptrdiff_t nf)
{
    const gc_im2col_src *S = (const gc_im2col_src *)ctx;
    const gc_conv *p = S->p;
    const GC_T *x = (const GC_T *)S->x;
    const ptrdiff_t w = S->w, khw = p->kh * p->kw;
    /* pixels by chunks of whole panels, each row of col gathered into row[] first */
    GC_T row[GC_FILL_CHUNK];
    const ptrdiff_t chunk = GC_FILL_CHUNK / w * w;
    for (ptrdiff_t g0 = 0; g0 < nf; g0 += chunk) {
        const ptrdiff_t gn = nf - g0 < chunk ? nf - g0 : chunk;
        GC_T *dg = (GC_T *)dst + g0 * kb; /* (g0 / w panels of w * kb) */
        for (ptrdiff_t r = pc; r < pc + kb; r++) {
            const ptrdiff_t ci = r / khw, ki = r % khw / p->kw, kj = r % p->kw;
            GC_FN(im2col_range)(x + ci * p->h * p->w, row, p, ki, kj, f0 + g0, f0 + g0 + gn);
            GC_T *d = dg + (r - pc) * w;
            for (ptrdiff_t q = 0; q * w < gn; q++)
                GC_FN(panel_row)(d + q * w * kb, row + q * w, gn - q * w < w ? gn - q * w : w, w);
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
