/* grid_sample forward and backward (torch.nn.functional.grid_sample) over contiguous
 * x [n, c, *in] (in: nd = 2 sizes [h, w] or 3 sizes [d, h, w]), grid [n, p, nd] (the sampling
 * points of each image, coordinate 0 = x along w, 1 = y along h, 2 = z along d, in [-1, 1]) and
 * out / g [n, c, p].  Modes: bilinear (trilinear for nd = 3: 2^nd corners), nearest (round half
 * to even, PyTorch's nearbyint) and bicubic (nd = 2; A = -0.75); padding zeros / border /
 * reflection, align_corners: PyTorch's GridSampler.h formulas, step by step, including the
 * gradient multipliers of each coordinate transform.  A non-finite (or beyond 1e15) coordinate
 * becomes -100, outside the input (where border or reflection padding lets it be).
 *
 * Forward: the points of all images split over the pool; the taps and weights of a block of 32
 * points of one image are found once, then applied channel by channel (contiguous output rows).
 * Backward: the images split over the pool (gx of image b is only written by b's points, so no
 * two threads add into one element); each image's gx is zeroed, then its points add in order,
 * so results do not depend on the thread count.  The grid's gradient of a point sums its
 * channels in order.  No scratch memory (the blocks' taps live on the stack, ~20 KB). */
#ifndef GC_T

#include <math.h>
#include <stddef.h>

#include "isa.h"
#include "kernels.h"

#define GS_A (-0.75) /* the cubic convolution's A (PyTorch's bicubic) */
#define GS_BLOCK 32   /* points per block: their taps stay in L1 while the channels pass */

#define GC_BODY "grid_sample.c"
#include "each_float.h"

#else /* type-generic body, T = GC_T */

/* PyTorch's grid_sampler_unnormalize_set_grad: [-1, 1] to pixel units; *gm its derivative */
static inline GC_T GC_FN(gs_unnorm)(GC_T v, ptrdiff_t size, int align, GC_T *gm)
{
    if (align) {
        *gm = (GC_T)(size - 1) / 2;
        return ((v + 1) / 2) * (GC_T)(size - 1);
    }
    *gm = (GC_T)size / 2;
    return ((v + 1) * (GC_T)size - 1) / 2;
}

/* clip_coordinates_set_grad */
static inline GC_T GC_FN(gs_clip)(GC_T v, ptrdiff_t size, GC_T *gm)
{
    if (v <= 0) {
        *gm = 0;
        return 0;
    }
    const GC_T hi = (GC_T)(size - 1);
    if (v >= hi) {
        *gm = 0;
        return hi;
    }
    *gm = 1;
    return v;
}

/* Mirror v into [a, b] = [lo2 / 2, hi2 / 2] (an empty one maps everything to 0): the distance
 * from a is folded by the interval's length len; the number of whole lengths crossed, q, says
 * whether the point comes back from b (odd q) or goes on from a (even q), the remainder r how
 * far. *gm: the derivative, the side of a v lies on times the direction. */
static inline GC_T GC_FN(gs_reflect)(GC_T v, ptrdiff_t lo2, ptrdiff_t hi2, GC_T *gm)
{
    if (lo2 == hi2) {
        *gm = 0;
        return 0;
    }
    const GC_T a = (GC_T)lo2 / 2, len = (GC_T)(hi2 - lo2) / 2, d = v - a;
    const GC_T dist = GC_M(fabs)(d), q = GC_M(floor)(dist / len), r = dist - q * len;
    const GC_T dir = d < 0 ? (GC_T)-1 : (GC_T)1;
    if (GC_M(fmod)(q, 2) != 0) { /* odd, or not finite: back from b */
        *gm = -dir;
        return len - r + a;
    }
    *gm = dir;
    return r + a;
}

/* compute_coordinates_set_grad: the padding mode's transform of a pixel coordinate */
static inline GC_T GC_FN(gs_pad)(GC_T v, ptrdiff_t size, int pad, int align, GC_T *gm)
{
    *gm = 1;
    if (pad == GC_GRID_BORDER)
        return GC_FN(gs_clip)(v, size, gm);
    if (pad == GC_GRID_REFLECTION) {
        GC_T g1, g2;
        /* align: between the edge pixels' centres; else between their outer borders */
        v = align ? GC_FN(gs_reflect)(v, 0, 2 * (size - 1), &g1)
                  : GC_FN(gs_reflect)(v, -1, 2 * size - 1, &g1);
        v = GC_FN(gs_clip)(v, size, &g2);
        *gm = g1 * g2;
    }
    return v;
}

/* grid_sampler_compute_source_index_set_grad; a non-finite result becomes -100 (outside) */
static inline GC_T GC_FN(gs_source)(GC_T v, ptrdiff_t size, int pad, int align, GC_T *gm)
{
    GC_T g1, g2;
    v = GC_FN(gs_unnorm)(v, size, align, &g1);
    v = GC_FN(gs_pad)(v, size, pad, align, &g2);
    *gm = g1 * g2;
    if (!isfinite(v) || v > (GC_T)1e15 || v < (GC_T)-1e15) {
        *gm = 0;
        return (GC_T)-100;
    }
    return v;
}

/* cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from floor(x), t = frac */
static inline void GC_FN(gs_cubic)(GC_T t, GC_T w[4])
{
    const GC_T A = (GC_T)GS_A, x1 = t + 1, x2 = 1 - t, x3 = 2 - t;
    w[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
    w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    w[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    w[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* d w[i] / d t (PyTorch's get_cubic_coefficients_grad, negated: it subtracts them) */
static inline void GC_FN(gs_cubic_grad)(GC_T t, GC_T d[4])
{
    const GC_T A = (GC_T)GS_A;
    GC_T x = -1 - t;
    d[0] = -((-3 * A * x - 10 * A) * x - 8 * A);
    x = -t;
    d[1] = -((-3 * (A + 2) * x - 2 * (A + 3)) * x);
    x = 1 - t;
    d[2] = -((3 * (A + 2) * x - 2 * (A + 3)) * x);
    x = 2 - t;
    d[3] = -((3 * A * x - 10 * A) * x + 8 * A);
}

/* A bicubic tap's in-plane offset (-1: outside, zero), PyTorch's get_value_bounded: the integer
 * position goes through the padding transform, then truncates. */
static inline ptrdiff_t GC_FN(gs_tap)(ptrdiff_t ix, ptrdiff_t iy, const gc_grid *p)
{
    GC_T gm;
    const GC_T x = GC_FN(gs_pad)((GC_T)ix, p->w, p->pad, p->align, &gm);
    const GC_T y = GC_FN(gs_pad)((GC_T)iy, p->h, p->pad, p->align, &gm);
    if (!(x >= 0 && x < (GC_T)p->w && y >= 0 && y < (GC_T)p->h))
        return -1;
    return (ptrdiff_t)y * p->w + (ptrdiff_t)x;
}

/* One sampling point: its taps inside the plane (up to 16 (offset, weight) pairs; the taps
 * outside, which sample zero, are left out), and for the backward each tap's weight derivative
 * along each coordinate (already times the coordinate's multiplier). */
typedef struct {
    int n;
    ptrdiff_t off[16];
    GC_T w[16];
    GC_T dw[3][16];
} GC_FN(gs_taps);

static void GC_FN(gs_point)(const GC_T *gp, const gc_grid *p, GC_FN(gs_taps) * t, int grad)
{
    const int nd = p->nd;
    const ptrdiff_t size[3] = {p->w, p->h, p->d}; /* along coordinates 0, 1, 2 */
    const ptrdiff_t stride[3] = {1, p->w, p->w * p->h};
    if (p->mode == GC_GRID_BICUBIC) {
        GC_T gmx, gmy, wx[4], wy[4], dx[4], dy[4];
        GC_T ix = GC_FN(gs_unnorm)(gp[0], p->w, p->align, &gmx);
        GC_T iy = GC_FN(gs_unnorm)(gp[1], p->h, p->align, &gmy);
        t->n = 0;
        if (!isfinite(ix) || GC_M(fabs)(ix) > (GC_T)1e15) /* samples what -100 samples */
            ix = -100;
        if (!isfinite(iy) || GC_M(fabs)(iy) > (GC_T)1e15)
            iy = -100;
        const GC_T fx = GC_M(floor)(ix), fy = GC_M(floor)(iy);
        GC_FN(gs_cubic)(ix - fx, wx);
        GC_FN(gs_cubic)(iy - fy, wy);
        if (grad) {
            GC_FN(gs_cubic_grad)(ix - fx, dx);
            GC_FN(gs_cubic_grad)(iy - fy, dy);
        }
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++) {
                const ptrdiff_t off =
                    GC_FN(gs_tap)((ptrdiff_t)fx - 1 + i, (ptrdiff_t)fy - 1 + j, p);
                if (off < 0)
                    continue;
                const int k = t->n++;
                t->off[k] = off;
                t->w[k] = wx[i] * wy[j];
                if (grad) {
                    t->dw[0][k] = dx[i] * wy[j] * gmx;
                    t->dw[1][k] = wx[i] * dy[j] * gmy;
                }
            }
        return;
    }
    GC_T src[3], gm[3];
    for (int k = 0; k < nd; k++)
        src[k] = GC_FN(gs_source)(gp[k], size[k], p->pad, p->align, &gm[k]);
    if (p->mode == GC_GRID_NEAREST) {
        ptrdiff_t off = 0;
        int in = 1;
        for (int k = 0; k < nd; k++) {
            const GC_T r = GC_M(nearbyint)(src[k]);
            in &= r >= 0 && r < (GC_T)size[k];
            off += in ? (ptrdiff_t)r * stride[k] : 0;
        }
        t->n = in;
        t->off[0] = off;
        t->w[0] = 1;
        for (int k = 0; k < 3; k++)
            t->dw[k][0] = 0;
        return;
    }
    /* (tri)linear: corner bits b (bit k: +1 along coordinate k) */
    ptrdiff_t lo[3];
    GC_T fr[3];
    for (int k = 0; k < nd; k++) {
        const GC_T f = GC_M(floor)(src[k]);
        lo[k] = (ptrdiff_t)f;
        fr[k] = src[k] - f;
    }
    t->n = 0;
    for (int b = 0; b < (1 << nd); b++) {
        ptrdiff_t off = 0;
        int in = 1;
        GC_T w = 1;
        for (int k = 0; k < nd; k++) {
            const int up = (b >> k) & 1;
            const ptrdiff_t i = lo[k] + up;
            in &= i >= 0 && i < size[k];
            off += in ? i * stride[k] : 0; /* i is up to 1e15 outside: i * stride could overflow */
            w *= up ? fr[k] : 1 - fr[k];
        }
        if (!in)
            continue;
        const int m = t->n++;
        t->off[m] = off;
        t->w[m] = w;
        if (grad)
            for (int k = 0; k < nd; k++) {
                GC_T d = ((b >> k) & 1) ? gm[k] : -gm[k];
                for (int j = 0; j < nd; j++)
                    if (j != k)
                        d *= ((b >> j) & 1) ? fr[j] : 1 - fr[j];
                t->dw[k][m] = d;
            }
    }
}

typedef struct {
    const GC_T *x, *grid, *g;
    GC_T *out, *gx, *ggrid;
    const gc_grid *p;
} GC_FN(gs_job);

/* Points are taken in blocks of GS_BLOCK of one image: their taps found once, then each
 * channel's plane read for the whole block, so the outputs (and g) run contiguously. */
static void GC_FN(gs_fwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(gs_job) *J = (const GC_FN(gs_job) *)ctx;
    const gc_grid *p = J->p;
    const ptrdiff_t plane = p->d * p->h * p->w;
    GC_FN(gs_taps) t[GS_BLOCK];
    for (ptrdiff_t q0 = lo; q0 < hi;) { /* q = image * points + point */
        const ptrdiff_t b = q0 / p->p, pt0 = q0 % p->p;
        ptrdiff_t q1 = q0 + GS_BLOCK < hi ? q0 + GS_BLOCK : hi;
        q1 = q1 < (b + 1) * p->p ? q1 : (b + 1) * p->p;
        const int m = (int)(q1 - q0);
        for (int j = 0; j < m; j++)
            GC_FN(gs_point)(J->grid + (q0 + j) * p->nd, p, &t[j], 0);
        const GC_T *x = J->x + b * p->c * plane;
        GC_T *y = J->out + b * p->c * p->p + pt0;
        for (ptrdiff_t ch = 0; ch < p->c; ch++, x += plane, y += p->p)
            for (int j = 0; j < m; j++) {
                GC_T s = 0;
                for (int i = 0; i < t[j].n; i++)
                    s += x[t[j].off[i]] * t[j].w[i];
                y[j] = s;
            }
        q0 = q1;
    }
}

static void GC_FN(gs_bwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(gs_job) *J = (const GC_FN(gs_job) *)ctx;
    const gc_grid *p = J->p;
    const ptrdiff_t plane = p->d * p->h * p->w;
    const int want_grid = J->ggrid != NULL && p->mode != GC_GRID_NEAREST;
    GC_FN(gs_taps) t[GS_BLOCK];
    GC_T acc[GS_BLOCK][3];
    for (ptrdiff_t b = lo; b < hi; b++) {
        GC_T *gx = J->gx ? J->gx + b * p->c * plane : NULL;
        if (gx)
            for (ptrdiff_t i = 0; i < p->c * plane; i++)
                gx[i] = 0;
        const GC_T *x = J->x + b * p->c * plane;
        for (ptrdiff_t pt0 = 0; pt0 < p->p; pt0 += GS_BLOCK) {
            const int m = (int)(p->p - pt0 < GS_BLOCK ? p->p - pt0 : GS_BLOCK);
            const ptrdiff_t q0 = b * p->p + pt0;
            for (int j = 0; j < m; j++) {
                GC_FN(gs_point)(J->grid + (q0 + j) * p->nd, p, &t[j], want_grid);
                acc[j][0] = acc[j][1] = acc[j][2] = 0;
            }
            const GC_T *g = J->g + b * p->c * p->p + pt0;
            for (ptrdiff_t ch = 0; ch < p->c; ch++, g += p->p) {
                const GC_T *xc = x + ch * plane;
                GC_T *gxc = gx ? gx + ch * plane : NULL;
                for (int j = 0; j < m; j++) {
                    const GC_T gv = g[j];
                    const GC_FN(gs_taps) *tj = &t[j];
                    if (gxc)
                        for (int i = 0; i < tj->n; i++)
                            gxc[tj->off[i]] += gv * tj->w[i];
                    if (want_grid)
                        for (int i = 0; i < tj->n; i++) {
                            const GC_T v = xc[tj->off[i]] * gv;
                            for (int k = 0; k < p->nd; k++)
                                acc[j][k] += v * tj->dw[k][i];
                        }
                }
            }
            if (J->ggrid)
                for (int j = 0; j < m; j++)
                    for (int k = 0; k < p->nd; k++)
                        J->ggrid[(q0 + j) * p->nd + k] = want_grid ? acc[j][k] : 0;
        }
    }
}

static double GC_FN(gs_cost)(const gc_grid *p)
{
    const double taps = p->mode == GC_GRID_BICUBIC ? 16.0 : p->mode == GC_GRID_NEAREST ? 1.0 : (double)(1 << p->nd);
    return (double)p->n * (double)p->p * ((double)p->c * taps * 0.7 + 10.0 + taps * 4.0);
}

void GC_FN(gc_grid_sample)(const GC_T *x, const GC_T *grid, GC_T *out, const gc_grid *p)
{
    GC_FN(gs_job) J = {.x = x, .grid = grid, .out = out, .p = p};
    gc_parallel_range(p->n * p->p, 1, GC_FN(gs_cost)(p), GC_FN(gs_fwd_range), &J);
}

void GC_FN(gc_grid_sample_backward)(const GC_T *g, const GC_T *x, const GC_T *grid, GC_T *gx,
                                    GC_T *ggrid, const gc_grid *p)
{
    GC_FN(gs_job) J = {.x = x, .grid = grid, .g = g, .gx = gx, .ggrid = ggrid, .p = p};
    gc_parallel_range(p->n, 1, 2.5 * GC_FN(gs_cost)(p), GC_FN(gs_bwd_range), &J);
}

#endif
