/* max_pool2d forward (values + flat int64 indices into each H*W plane, or the values alone when
 * idx is NULL) and its backward (a scatter-add at the indices), over [planes, H, W] planes split
 * across the thread pool.
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
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

#include "isa.h"
#include "kernels.h"
#include "vec.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* columns of an output row per step of the vector path (its buffers live on the stack) */
#define MP_CHUNK 512
/* outputs of a plane whose indices the values-only forward may keep on the stack (32 KiB) */
#define MP_PLANE_IDX 4096
/* the relu-fused backward masks up to this many gradients of a plane on the stack */
#define MP_MASK_STACK 1024

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
#define MP_IT int32_t /* in-plane positions: the lanes' width */
#define MP_VT gc_v4f
#define MP_VI gc_v4i
#define MP_VN 4
#include "maxpool.c"
#undef GC_T
#undef GC_UT
#undef GC_SFX
#undef MP_IT
#undef MP_VT
#undef MP_VI
#undef MP_VN

#define GC_T double
#define GC_UT uint64_t
#define GC_SFX f64
#define MP_IT int64_t
#define MP_VT gc_v2d
#define MP_VI gc_v2l
#define MP_VN 2
#include "maxpool.c"
#undef GC_T
#undef GC_UT
#undef GC_SFX
#undef MP_IT
#undef MP_VT
#undef MP_VI
#undef MP_VN

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *x;
    GC_T *vals;
    int64_t *idx;
    const GC_T *g;
    const int64_t *bidx;
    GC_T *gx;
    const GC_T *mvals; /* backward: the pooled values whose > 0 masks g (relu fused), or NULL */
    const gc_pool2d *p;
    atomic_int bad; /* backward: 1 an index outside its plane, 2 no memory */
} GC_FN(mp_job);

/* One step of the vector path: lanes [i, i + MP_VN) of the running maxima cur (idx: and the
 * offsets ct of their positions) take v (offset tv) by the scalar loop's rule (mp_row_scan),
 * with lane masks. */
static inline __attribute__((always_inline)) void GC_FN(mp_take)(GC_T *cur, MP_IT *ct,
                                                                 ptrdiff_t i, MP_VT v, MP_VI tv,
                                                                 const int idx)
{
    MP_VT c;
    memcpy(&c, cur + i, sizeof c);
    if (idx) {
        MP_VI q;
        memcpy(&q, ct + i, sizeof q);
        const MP_VI take = (v > c) | (v != v) | (q < 0);
        c = (MP_VT)(((MP_VI)v & take) | ((MP_VI)c & ~take));
        q = (tv & take) | (q & ~take);
        memcpy(cur + i, &c, sizeof c);
        memcpy(ct + i, &q, sizeof q);
    } else {
        const MP_VI take = (v > c) | (v != v);
        c = (MP_VT)(((MP_VI)v & take) | ((MP_VI)c & ~take));
        memcpy(cur + i, &c, sizeof c);
    }
}

/* Output row oy, columns [c0, c1) (at most MP_CHUNK) of one plane, in 16-byte vectors: for each
 * window position (ki, kj) in order, the running maxima take the inputs of the columns inside
 * the image (mp_take), and with idx keep the position's offset from the window's corner t =
 * ki*dh*w + kj*dw (as wide as the values' lanes), made a position once at the end.  Inputs at
 * column stride 2 are two loads and a shuffle; other strides are gathered.  idx is a constant
 * at each call (mp_row_vec, mp_row_max): the compiler makes each its own loop, the values-only
 * one straight into the output row (c0 = 0, c1 = ow) without the offsets.  (The indexed scan's
 * running maxima live in this frame, addressed from the stack pointer: passed in as pointers,
 * the indexed scan ran 2-3 % slower.) */
static inline __attribute__((always_inline)) void GC_FN(mp_row_scan)(const gc_pool2d *p,
                                                                     const GC_T *x, GC_T *vr,
                                                                     int64_t *ir, ptrdiff_t oy,
                                                                     ptrdiff_t c0, ptrdiff_t c1,
                                                                     const int idx)
{
    _Alignas(16) GC_T buf[MP_CHUNK]; /* (idx; else unused, and no part of the frame) */
    _Alignas(16) MP_IT ct[MP_CHUNK];
    GC_T *cur = idx ? buf : vr;
    const ptrdiff_t nc = c1 - c0, sw = p->sw;
    for (ptrdiff_t i = 0; i < nc; i++) {
        cur[i] = (GC_T)-INFINITY;
        if (idx)
            ct[i] = -1;
    }
    for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
        if (iy < 0 || iy >= p->h)
            continue;
        for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
            const ptrdiff_t off = kj * p->dw - p->pw;
            ptrdiff_t a, b;
            mp_range(off, sw, p->w, p->ow, &a, &b);
            if (idx) { /* (values only: all of the row, c0 = 0 and c1 = ow) */
                a = a > c0 ? a - c0 : 0;
                b = b < c1 ? b - c0 : nc;
            }
            const GC_T *xr = x + iy * p->w + off + c0 * sw; /* xr[i * sw]: column c0 + i */
            const MP_IT t = (MP_IT)(ki * p->dh * p->w + kj * p->dw); /* >= 0, < h*w */
            const MP_VI tv = t - (MP_VI){0};
            ptrdiff_t i = a;
            if (sw == 1) {
                for (; i + MP_VN <= b; i += MP_VN) {
                    MP_VT v;
                    memcpy(&v, xr + i, sizeof v);
                    GC_FN(mp_take)(cur, ct, i, v, tv, idx);
                }
            } else if (sw == 2) {
                /* pairs in the row: 2 * (c0 + i + MP_VN - 1) + off + 1 < w, i.e.
                 * i < floor((w - off) / 2) - MP_VN - c0 + 1 */
                const ptrdiff_t d = p->w - off;
                ptrdiff_t e = (d >= 0 ? d / 2 : -((1 - d) / 2)) - MP_VN - c0 + 1;
                e = e < b - MP_VN + 1 ? e : b - MP_VN + 1;
                for (; i < e; i += MP_VN) {
                    MP_VT v0, v1;
                    memcpy(&v0, xr + 2 * i, sizeof v0);
                    memcpy(&v1, xr + 2 * i + MP_VN, sizeof v1);
#if MP_VN == 4
                    const MP_VT v = GC_SHUF4(v0, v1, 0, 2, 4, 6);
#else
                    const MP_VT v = GC_SHUF2(v0, v1, 0, 2);
#endif
                    GC_FN(mp_take)(cur, ct, i, v, tv, idx);
                }
            }
            for (; i + MP_VN <= b; i += MP_VN) { /* (gathered) */
                MP_VT v;
                for (int l = 0; l < MP_VN; l++)
                    v[l] = xr[(i + l) * sw];
                GC_FN(mp_take)(cur, ct, i, v, tv, idx);
            }
            for (; i < b; i++) {
                const GC_T v = xr[i * sw];
                if (v > cur[i] || v != v || (idx && ct[i] < 0)) {
                    cur[i] = v;
                    if (idx)
                        ct[i] = t;
                }
            }
        }
    }
    if (idx) {
        const int64_t o0 = (int64_t)((oy * p->sh - p->ph) * p->w + c0 * sw - p->pw);
        for (ptrdiff_t i = 0; i < nc; i++) {
            vr[c0 + i] = cur[i];
            ir[c0 + i] = ct[i] < 0 ? -1 : o0 + (int64_t)(i * sw) + (int64_t)ct[i];
        }
    }
}

/* Output row oy, columns [c0, c1) (at most MP_CHUNK) of one plane, values and indices. */
static void GC_FN(mp_row_vec)(const gc_pool2d *p, const GC_T *x, GC_T *vr, int64_t *ir,
                              ptrdiff_t oy, ptrdiff_t c0, ptrdiff_t c1)
{
    GC_FN(mp_row_scan)(p, x, vr, ir, oy, c0, c1, 1);
}

/* Values only (idx NULL: an inference that drops the indices), output row oy of one plane: the
 * same scan and rule (v > max || isnan(v), window order), so the same value bits; -inf where
 * the window holds no element.  (Not inlined into mp_fwd_range: its own function measured as
 * fast as the separate loop it replaced, or up to 3 % faster; inlined, 1-2 % slower.) */
static __attribute__((noinline)) void GC_FN(mp_row_max)(const gc_pool2d *p, const GC_T *x,
                                                        GC_T *vr, ptrdiff_t oy)
{
    GC_FN(mp_row_scan)(p, x, vr, NULL, oy, 0, p->ow, 0);
}

/* Values only at column stride 2 (dw = 1, kw <= 8, kh <= 16: the ResNet stem's 3x3/2 pool, the
 * 2x2/2 ones).  Each vector of MP_VN outputs keeps its maximum in a register over the whole
 * window instead of a pass over the row per window position, MP_U vectors at a time (independent
 * chains): for each in-image row and each kj, the inputs of a vector's columns are the even
 * lanes of two contiguous loads, and m = v > m ? v : m (maxps) in window order, which is the
 * scan's rule for numbers (the first maximum wins: a +0 after a -0 keeps the -0; a window of
 * -inf keeps -inf).  A NaN would take the rule's other branch (the window's last NaN wins), so
 * the window's inputs are also summed on the side: a NaN makes the sum NaN (so may inf + -inf:
 * harmless), and such a vector is redone by the exact rule.  Outputs whose windows reach past a
 * row's ends take the scalar rule. */
#define MP_U 4

static inline MP_VT GC_FN(mp_vmax)(MP_VT v, MP_VT m) /* v > m ? v : m per lane */
{
#if defined(__SSE2__) && MP_VN == 4
    return (MP_VT)_mm_max_ps((__m128)v, (__m128)m);
#elif defined(__SSE2__)
    return (MP_VT)_mm_max_pd((__m128d)v, (__m128d)m);
#else
    const MP_VI k = v > m;
    return (MP_VT)(((MP_VI)v & k) | ((MP_VI)m & ~k));
#endif
}

/* nu (1 or MP_U) vectors of outputs whose windows start at input column c0 (then c0 + 2 * MP_VN,
 * ...) of each row, written to out */
static inline __attribute__((always_inline)) void GC_FN(mp_s2_vecs)(const GC_T *const *rows,
                                                                    int nr, ptrdiff_t kw,
                                                                    ptrdiff_t c0, GC_T *out,
                                                                    const int nu)
{
    MP_VT m[MP_U], sum[MP_U];
    for (int u = 0; u < nu; u++) {
        m[u] = (GC_T)-INFINITY - (MP_VT){0};
        sum[u] = (MP_VT){0};
    }
    for (int r = 0; r < nr; r++)
        for (ptrdiff_t kj = 0; kj < kw; kj++) {
            const GC_T *xr = rows[r] + c0 + kj;
            for (int u = 0; u < nu; u++) {
                MP_VT v0, v1;
                memcpy(&v0, xr + 2 * u * MP_VN, sizeof v0);
                memcpy(&v1, xr + 2 * u * MP_VN + MP_VN, sizeof v1);
#if MP_VN == 4
                const MP_VT v = GC_SHUF4(v0, v1, 0, 2, 4, 6);
#else
                const MP_VT v = GC_SHUF2(v0, v1, 0, 2);
#endif
                sum[u] += v;
                m[u] = GC_FN(mp_vmax)(v, m[u]);
            }
        }
    for (int u = 0; u < nu; u++) {
        const MP_VI nan = sum[u] != sum[u];
        int any = 0;
        for (int l = 0; l < MP_VN; l++)
            any |= nan[l] != 0;
        if (any) { /* the exact rule: v > m || isnan(v) */
            MP_VT e = (GC_T)-INFINITY - (MP_VT){0};
            for (int r = 0; r < nr; r++)
                for (ptrdiff_t kj = 0; kj < kw; kj++) {
                    MP_VT v;
                    for (int l = 0; l < MP_VN; l++)
                        v[l] = rows[r][c0 + kj + 2 * (u * MP_VN + l)];
                    const MP_VI k = (v > e) | (v != v);
                    e = (MP_VT)(((MP_VI)v & k) | ((MP_VI)e & ~k));
                }
            m[u] = e;
        }
        memcpy(out + u * MP_VN, &m[u], sizeof m[u]);
    }
}

static void GC_FN(mp_row_max_s2)(const gc_pool2d *p, const GC_T *x, GC_T *vr, ptrdiff_t oy)
{
    const GC_T *rows[16];
    int nr = 0;
    for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
        if (iy >= 0 && iy < p->h)
            rows[nr++] = x + iy * p->w;
    }
    const ptrdiff_t kw = p->kw, pw = p->pw, w = p->w, ow = p->ow;
    /* vectors start at ox in [lo, last]: first input column 2*ox - pw >= 0, last one read
     * 2*ox - pw + kw - 1 + 2*MP_VN - 1 < w */
    const ptrdiff_t lo = (pw + 1) / 2, top = w + pw - kw - 2 * MP_VN + 1;
    ptrdiff_t last = top < 0 ? -1 : top / 2;
    if (last > ow - MP_VN)
        last = ow - MP_VN;
    ptrdiff_t vend = lo; /* outputs [lo, vend) come out of the vector loop */
    if (last >= lo) {
        ptrdiff_t ox = lo;
#if MP_VN == 4
        /* 8 outputs a vector (isa.h's mp_s2_f32, AVX2): outputs [lo, lo + 8 nv) read up to
         * the 4-wide vector at lo + 8 nv - 4 <= last */
        const ptrdiff_t nv = (last + 4 - lo) / 8;
        if (gc_isa.mp_s2_f32 && nv > 0) {
            if (gc_isa.mp_s2_f32(rows, nr, kw, 2 * lo - pw, vr + lo, nv))
                for (; ox < lo + 8 * nv; ox += MP_VN) /* a NaN: the exact rule where it lies */
                    GC_FN(mp_s2_vecs)(rows, nr, kw, 2 * ox - pw, vr + ox, 1);
            ox = lo + 8 * nv;
        }
#endif
        for (; ox + (MP_U - 1) * MP_VN <= last; ox += MP_U * MP_VN)
            GC_FN(mp_s2_vecs)(rows, nr, kw, 2 * ox - pw, vr + ox, MP_U);
        for (; ox <= last; ox += MP_VN)
            GC_FN(mp_s2_vecs)(rows, nr, kw, 2 * ox - pw, vr + ox, 1);
        if (ox < last + MP_VN) /* the last one overlaps: the same bits */
            GC_FN(mp_s2_vecs)(rows, nr, kw, 2 * last - pw, vr + last, 1);
        vend = last + MP_VN;
    }
    for (ptrdiff_t ox = 0; ox < ow; ox++) {
        if (ox == lo && vend > lo)
            ox = vend;
        if (ox >= ow)
            break;
        GC_T cur = (GC_T)-INFINITY;
        for (int r = 0; r < nr; r++)
            for (ptrdiff_t kj = 0; kj < kw; kj++) {
                const ptrdiff_t c = 2 * ox - pw + kj;
                if (c < 0 || c >= w)
                    continue;
                const GC_T v = rows[r][c];
                if (v > cur || v != v)
                    cur = v;
            }
        vr[ox] = cur;
    }
}

static int GC_FN(mp_is_s2)(const gc_pool2d *p)
{
    return p->sw == 2 && p->dw == 1 && p->kw <= 8 && p->kh <= 16;
}

/* The values path at column stride 2 a whole plane per call, separably: the window maximum in
 * window order (row by row, kj within a row) equals the maximum over the window's rows, in row
 * order, of each row's maximum over kj, both by v > m ? v : m from -inf (the value is the window's
 * maximum either way; between +0 and -0 each pass keeps its first, which is the window's first in
 * row-major order). So each input row's 3-wide maxima at stride 2 (the H rows) are computed once
 * (isa.h's mp_s2_f32 with one row, else mp_s2_vecs) from a copy of the row between -inf columns
 * (padding reads as -inf: the same bits as skipping it) and shared by the output rows whose
 * windows hold it (2 of 3 rows for the stem's 3x3 / 2), then contiguous vertical maxima; no per-
 * row scalar edges. A NaN in the plane (the ISA's flag, or a NaN H read by the vertical pass: a
 * lane mask or-ed, no add chain through the plane) returns 0 and the caller redoes the plane by
 * mp_row_max_s2's exact rule; so does a geometry whose buffers exceed the stack ones. H rows go in
 * bands of output rows whose input rows fit MP_HBUF (32 KiB: L1); a band's first rows recomputed
 * at its start give the same bits. AVX-512 runs each pass a band per call (isa.h's mp_h2_f32,
 * mp_v_f32). ResNet's stem pool (64 x 112 x 112), one thread: ~0.45 -> ~0.15 ms
 * (benchmarks/cnn_step_kernels.py -k stem).
 */
#define MP_HBUF ((ptrdiff_t)(32768 / sizeof(GC_T)))
#define MP_PROW 2048
#define MP_VROWS 256 /* window rows of a band's output rows (the ISA's vertical pass) */

static int GC_FN(mp_plane_s2)(const gc_pool2d *p, const GC_T *x, GC_T *out)
{
    const ptrdiff_t w = p->w, h = p->h, kw = p->kw, pw = p->pw, ow = p->ow, oh = p->oh;
    const ptrdiff_t kh = p->kh, sh = p->sh, ph = p->ph, dh = p->dh;
    const ptrdiff_t owp = (ow + 15) & ~(ptrdiff_t)15; /* H's row stride, whole vectors */
    /* both horizontal kernels read columns up to 2 owp + kw - 2 of the padded row */
    ptrdiff_t plen = 2 * owp + kw;
    if (plen < pw + w)
        plen = pw + w;
    const ptrdiff_t hrows = MP_HBUF / owp, span = (kh - 1) * dh + 1;
    if (plen > MP_PROW || span > hrows || ow <= 0 || oh <= 0)
        return 0;
    GC_T prow[MP_PROW];
    GC_T hb[MP_HBUF];
    for (ptrdiff_t i = 0; i < plen; i++)
        prow[i] = (GC_T)-INFINITY;
    const GC_T *pr = prow;
    MP_VI bad = {0}; /* NaN lanes read by the vertical pass (mp_s2_vecs's H keeps NaN) */
    for (ptrdiff_t o0 = 0; o0 < oh;) {
        /* the band [o0, o1): its in-image input rows [y0, y1) fit hb */
        const ptrdiff_t y0 = o0 * sh - ph < 0 ? 0 : o0 * sh - ph;
        ptrdiff_t o1 = o0 + 1;
        while (o1 < oh && o1 * sh - ph + span - y0 <= hrows && (o1 + 1 - o0) * kh <= MP_VROWS)
            o1++;
        ptrdiff_t y1 = (o1 - 1) * sh - ph + span;
        if (y1 > h)
            y1 = h;
#if MP_VN == 4
        if (gc_isa.mp_h2_f32 && gc_isa.mp_v_f32) { /* AVX-512: a band per call of each pass */
            if (gc_isa.mp_h2_f32(x + y0 * w, w, y1 - y0, kw, pw, hb, owp))
                return 0;
            const GC_T *vrows[MP_VROWS];
            int vn[MP_VROWS];
            for (ptrdiff_t oy = o0; oy < o1; oy++) {
                int nr = 0;
                for (ptrdiff_t ki = 0; ki < kh; ki++) {
                    const ptrdiff_t iy = oy * sh - ph + ki * dh;
                    if (iy >= 0 && iy < h)
                        vrows[(oy - o0) * kh + nr++] = hb + (iy - y0) * owp;
                }
                vn[oy - o0] = nr;
            }
            gc_isa.mp_v_f32(vrows, vn, kh, o1 - o0, out + o0 * ow, ow);
            o0 = o1;
            continue;
        }
#endif
        for (ptrdiff_t iy = y0; iy < y1; iy++) {
            memcpy(prow + pw, x + iy * w, (size_t)w * sizeof(GC_T));
            GC_T *hr = hb + (iy - y0) * owp;
#if MP_VN == 4
            if (gc_isa.mp_s2_f32) {
                if (gc_isa.mp_s2_f32(&pr, 1, kw, 0, hr, owp / 8))
                    return 0;
                continue;
            }
#endif
            for (ptrdiff_t ox = 0; ox < owp; ox += MP_U * MP_VN)
                GC_FN(mp_s2_vecs)(&pr, 1, kw, 2 * ox, hr + ox, MP_U);
        }
        for (ptrdiff_t oy = o0; oy < o1; oy++) {
            const GC_T *rows[16];
            int nr = 0;
            for (ptrdiff_t ki = 0; ki < kh; ki++) {
                const ptrdiff_t iy = oy * sh - ph + ki * dh;
                if (iy >= 0 && iy < h)
                    rows[nr++] = hb + (iy - y0) * owp;
            }
            GC_T *orow = out + oy * ow;
            /* whole vectors, the last one overlapping the one before (the same bits) */
            const ptrdiff_t vend = ow >= MP_VN ? ow : 0;
            ptrdiff_t ox = 0;
            for (; ox < vend; ox += MP_VN) {
                if (ox + MP_VN > vend)
                    ox = vend - MP_VN;
                MP_VT m = (GC_T)-INFINITY - (MP_VT){0};
                for (int r = 0; r < nr; r++) {
                    MP_VT v;
                    memcpy(&v, rows[r] + ox, sizeof v);
                    bad |= v != v; /* an or: no add chain through the plane */
                    m = GC_FN(mp_vmax)(v, m);
                }
                memcpy(orow + ox, &m, sizeof m);
            }
            for (; ox < ow; ox++) { /* ow < MP_VN */
                GC_T m = (GC_T)-INFINITY;
                for (int r = 0; r < nr; r++) {
                    const GC_T v = rows[r][ox];
                    bad[0] |= v != v;
                    m = v > m ? v : m;
                }
                orow[ox] = m;
            }
        }
        o0 = o1;
    }
    int any = 0;
    for (int l = 0; l < MP_VN; l++)
        any |= bad[l] != 0;
    return !any;
}
#undef MP_HBUF
#undef MP_PROW
#undef MP_VROWS
#undef MP_U

/* The common 2-wide window (kw = sw = 2, dw = 1, pw = 0, every column of a window inside the
 * row: 2*ow <= w), any rows: each row of a window is one pair of adjacent inputs, so a vector of
 * MP_VN outputs takes two contiguous loads and an even/odd shuffle per window row, and the
 * scan keeps the offset (0 or 1 plus the row's) in an integer lane.  Same rule and order as the
 * general path (first in-image position taken, then `v > max || isnan(v)`), so the results are
 * the same bits.  The general path's per-row set-up (ranges, stack buffers) costs more than the
 * work on rows of 7-14 outputs, which is what a CNN's pools have. */
static void GC_FN(mp_row_w2)(const gc_pool2d *p, const GC_T *x, GC_T *vr, int64_t *ir,
                             ptrdiff_t oy)
{
    const GC_T *rows[8];
    MP_IT toff[8];
    int nr = 0;
    for (ptrdiff_t ki = 0; ki < p->kh && nr < 8; ki++) {
        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
        if (iy < 0 || iy >= p->h)
            continue;
        rows[nr] = x + iy * p->w;
        toff[nr] = (MP_IT)(ki * p->dh * p->w);
        nr++;
    }
    if (nr == 0) { /* every window of the row in the padding: the general path's -inf, -1 */
        for (ptrdiff_t ox = 0; ox < p->ow; ox++) {
            vr[ox] = (GC_T)-INFINITY;
            ir[ox] = -1;
        }
        return;
    }
    const int64_t o0 = (int64_t)((oy * p->sh - p->ph) * p->w);
#if MP_VN == 4
    if (gc_isa.mp_fwd_w2_f32) { /* wider vectors (AVX-512), the same rule and bits */
        gc_isa.mp_fwd_w2_f32(rows, toff, nr, p->ow, o0, vr, ir, 1, 0);
        return;
    }
#endif
    /* a last partial vector is redone overlapping the one before (ow >= MP_VN): same bits, no
     * scalar tail (its compare branches mispredict on random data) */
    const ptrdiff_t vend = p->ow >= MP_VN ? p->ow : 0;
    ptrdiff_t ox = 0;
    for (; ox < vend; ox += MP_VN) {
        if (ox + MP_VN > vend)
            ox = vend - MP_VN;
        MP_VT cur = {0};
        MP_VI ct = {0};
        for (int r = 0; r < nr; r++) {
            MP_VT v0, v1;
            memcpy(&v0, rows[r] + 2 * ox, sizeof v0);
            memcpy(&v1, rows[r] + 2 * ox + MP_VN, sizeof v1);
#if MP_VN == 4
            const MP_VT ev = GC_SHUF4(v0, v1, 0, 2, 4, 6), od = GC_SHUF4(v0, v1, 1, 3, 5, 7);
#else
            const MP_VT ev = GC_SHUF2(v0, v1, 0, 2), od = GC_SHUF2(v0, v1, 1, 3);
#endif
            const MP_VI te = toff[r] - (MP_VI){0}, to = te + 1;
            if (r == 0) {
                cur = ev;
                ct = te;
            } else {
                const MP_VI k = (ev > cur) | (ev != ev);
                cur = (MP_VT)(((MP_VI)ev & k) | ((MP_VI)cur & ~k));
                ct = (te & k) | (ct & ~k);
            }
            const MP_VI k = (od > cur) | (od != od);
            cur = (MP_VT)(((MP_VI)od & k) | ((MP_VI)cur & ~k));
            ct = (to & k) | (ct & ~k);
        }
        memcpy(vr + ox, &cur, sizeof cur);
        for (int l = 0; l < MP_VN; l++)
            ir[ox + l] = o0 + 2 * (ox + l) + (int64_t)ct[l];
    }
    for (; ox < p->ow; ox++) { /* ow < MP_VN */
        GC_T cur = (GC_T)0;
        int64_t ct = 0;
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < 2; j++) {
                const GC_T v = rows[r][2 * ox + j];
                if ((r == 0 && j == 0) || v > cur || v != v) {
                    cur = v;
                    ct = (int64_t)toff[r] + j;
                }
            }
        vr[ox] = cur;
        ir[ox] = o0 + 2 * ox + ct;
    }
}

/* Whether mp_row_w2 serves the geometry (a row of some window inside the image: pooling
 * arguments guarantee that, padding at most half the window). */
static int GC_FN(mp_is_w2)(const gc_pool2d *p)
{
    return p->kw == 2 && p->sw == 2 && p->dw == 1 && p->pw == 0 && 2 * p->ow <= p->w &&
           p->kh <= 8 && p->h * p->w <= INT32_MAX;
}

static void GC_FN(mp_fwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(mp_job) *J = (GC_FN(mp_job) *)ctx;
    const gc_pool2d *p = J->p;
    const ptrdiff_t hw = p->h * p->w, ohw = p->oh * p->ow;
#if MP_VN == 4
    /* values only, 2-wide windows that stay in the image, AVX-512: the indexed plane kernel (the
     * same rule, so the same value bits) into a stack index buffer is faster than the values
     * path's per-row set-up on rows this short (64 x 16 x 28 x 28, one thread: 0.54 -> 0.13 ms) */
    if (!J->idx && gc_isa.mp_fwd_w2_f32 && GC_FN(mp_is_w2)(p) && p->ph == 0 &&
        (p->oh - 1) * p->sh + (p->kh - 1) * p->dh < p->h && ohw <= MP_PLANE_IDX) {
        int64_t ibuf[MP_PLANE_IDX];
        const GC_T *rows[8];
        MP_IT toff[8];
        for (ptrdiff_t pl = lo; pl < hi; pl++) {
            for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
                toff[ki] = (MP_IT)(ki * p->dh * p->w);
                rows[ki] = J->x + pl * hw + toff[ki];
            }
            gc_isa.mp_fwd_w2_f32(rows, toff, (int)p->kh, p->ow, 0, J->vals + pl * ohw, ibuf,
                                 p->oh, p->sh * p->w);
        }
        return;
    }
#endif
    if (!J->idx) {
        const int s2 = GC_FN(mp_is_s2)(p);
        for (ptrdiff_t pl = lo; pl < hi; pl++) {
            if (s2 && GC_FN(mp_plane_s2)(p, J->x + pl * hw, J->vals + pl * ohw))
                continue; /* else (a NaN, or too wide) the plane row by row */
            for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
                GC_T *vr = J->vals + pl * ohw + oy * p->ow;
                if (s2)
                    GC_FN(mp_row_max_s2)(p, J->x + pl * hw, vr, oy);
                else
                    GC_FN(mp_row_max)(p, J->x + pl * hw, vr, oy);
            }
        }
        return;
    }
    if (GC_FN(mp_is_w2)(p)) {
#if MP_VN == 4
        /* no window row in the padding or past the image: every output row reads the same
         * window rows shifted by sh rows, the whole plane in one ISA call */
        if (gc_isa.mp_fwd_w2_f32 && p->ph == 0 &&
            (p->oh - 1) * p->sh + (p->kh - 1) * p->dh < p->h) {
            const GC_T *rows[8];
            MP_IT toff[8];
            for (ptrdiff_t pl = lo; pl < hi; pl++) {
                for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
                    toff[ki] = (MP_IT)(ki * p->dh * p->w);
                    rows[ki] = J->x + pl * hw + toff[ki];
                }
                gc_isa.mp_fwd_w2_f32(rows, toff, (int)p->kh, p->ow, 0, J->vals + pl * ohw,
                                     J->idx + pl * ohw, p->oh, p->sh * p->w);
            }
            return;
        }
#endif
        for (ptrdiff_t pl = lo; pl < hi; pl++)
            for (ptrdiff_t oy = 0; oy < p->oh; oy++)
                GC_FN(mp_row_w2)(p, J->x + pl * hw, J->vals + pl * ohw + oy * p->ow,
                                 J->idx + pl * ohw + oy * p->ow, oy);
        return;
    }
    if (sizeof(MP_IT) == 8 || hw <= INT32_MAX) { /* the vector path */
        for (ptrdiff_t pl = lo; pl < hi; pl++)
            for (ptrdiff_t oy = 0; oy < p->oh; oy++)
                for (ptrdiff_t c0 = 0; c0 < p->ow; c0 += MP_CHUNK)
                    GC_FN(mp_row_vec)(p, J->x + pl * hw, J->vals + pl * ohw + oy * p->ow,
                                      J->idx + pl * ohw + oy * p->ow, oy, c0,
                                      c0 + MP_CHUNK < p->ow ? c0 + MP_CHUNK : p->ow);
        return;
    }
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

/* The backward of the 2-wide path when the windows tile the plane without overlap (kh = sh,
 * dh = 1, ph = 0; rows and columns past the last window get zeros): each input is written once,
 * g where the window's index points at it, else 0 (0 + g, the scatter's sum: -0 becomes +0), in
 * one streaming pass instead of a zero-fill and a scatter.  Returns 0 when some index does not
 * point into its own window (then the caller scatters the plane, which checks the indices). */
static int GC_FN(mp_bwd_tiled)(const gc_pool2d *p, const GC_T *g, const int64_t *id, GC_T *gx)
{
    const ptrdiff_t w = p->w;
    if (sizeof(GC_T) == 4 && gc_isa.mp_bwd_w2_f32) { /* the whole plane in one call */
        if (gc_isa.mp_bwd_w2_f32((const float *)g, id, (float *)gx, p->ow, p->oh, p->kh, w) !=
            p->oh * p->ow)
            return 0;
        if (2 * p->ow < w)
            for (ptrdiff_t row = 0; row < p->oh * p->kh; row++)
                for (ptrdiff_t c = 2 * p->ow; c < w; c++)
                    gx[row * w + c] = (GC_T)0;
    } else {
        for (ptrdiff_t oy = 0; oy < p->oh; oy++) {
            const GC_T *gr = g + oy * p->ow;
            const int64_t *ir = id + oy * p->ow;
            ptrdiff_t hits = 0;
            for (ptrdiff_t r = 0; r < p->kh; r++) {
                const ptrdiff_t row = oy * p->kh + r;
                GC_T *xr = gx + row * w;
                const int64_t base = (int64_t)(row * w);
                for (ptrdiff_t ox = 0; ox < p->ow; ox++) {
                    const int64_t k = ir[ox] - base - 2 * (int64_t)ox; /* 0 or 1: in the pair */
                    const GC_T v = (GC_T)0 + gr[ox];
                    /* integer masks, not branches (random data mispredicts half of them) */
                    GC_UT vb;
                    memcpy(&vb, &v, sizeof vb);
                    const GC_UT m0 = (GC_UT)0 - (GC_UT)(k == 0), m1 = (GC_UT)0 - (GC_UT)(k == 1);
                    const GC_UT e = vb & m0, o = vb & m1;
                    memcpy(xr + 2 * ox, &e, sizeof e);
                    memcpy(xr + 2 * ox + 1, &o, sizeof o);
                    hits += (k == 0) | (k == 1);
                }
                for (ptrdiff_t c = 2 * p->ow; c < w; c++)
                    xr[c] = (GC_T)0;
            }
            if (hits != p->ow)
                return 0;
        }
    }
    for (ptrdiff_t i = p->oh * p->kh * w; i < p->h * w; i++)
        gx[i] = (GC_T)0;
    return 1;
}

static void GC_FN(mp_bwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(mp_job) *J = (GC_FN(mp_job) *)ctx;
    const gc_pool2d *p = J->p;
    const ptrdiff_t hw = p->h * p->w, ohw = p->oh * p->ow;
    const int tiled = GC_FN(mp_is_w2)(p) && p->kh == p->sh && p->dh == 1 && p->ph == 0 &&
                      p->oh * p->kh <= p->h;
    /* relu fused (mvals): the plane's g masked by its pooled values > 0 first, into a buffer
     * that stays in L1, relu_backward's rule (s > 0 ? g : +0); every window that picked an input
     * saw that input's value, so masking the windows' gradients masks the input's sum, and a
     * masked input gets a sum of +0, relu_backward's zero */
    GC_T stackbuf[MP_MASK_STACK];
    GC_T *gm = NULL;
    if (J->mvals) {
        gm = ohw <= MP_MASK_STACK ? stackbuf : malloc((size_t)ohw * sizeof(GC_T));
        if (!gm) {
            atomic_store_explicit(&J->bad, 2, memory_order_relaxed);
            return;
        }
    }
    for (ptrdiff_t pl = lo; pl < hi; pl++) {
        GC_T *gx = J->gx + pl * hw;
        const GC_T *g = J->g + pl * ohw;
        const int64_t *id = J->bidx + pl * ohw;
        if (gm) {
            const GC_T *v = J->mvals + pl * ohw;
            for (ptrdiff_t i = 0; i < ohw; i++) { /* both loaded: a select, not a branch */
                const GC_T gv = g[i], vv = v[i];
                gm[i] = vv > (GC_T)0 ? gv : (GC_T)0;
            }
            g = gm;
        }
        if (tiled && GC_FN(mp_bwd_tiled)(p, g, id, gx))
            continue;
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
    if (gm && gm != stackbuf)
        free(gm);
}

void GC_FN(gc_max_pool2d)(const GC_T *x, GC_T *vals, int64_t *idx, const gc_pool2d *p)
{
    GC_FN(mp_job) J = {.x = x, .vals = vals, .idx = idx, .p = p};
    const double cost = (double)p->planes * (double)(p->oh * p->ow) * (double)(p->kh * p->kw);
    gc_parallel_range(p->planes, 1, cost * 0.7, GC_FN(mp_fwd_range), &J);
}

int GC_FN(gc_max_pool2d_relu_backward)(const GC_T *g, const int64_t *idx, const GC_T *vals,
                                       GC_T *gx, const gc_pool2d *p)
{
    GC_FN(mp_job) J = {.g = g, .bidx = idx, .gx = gx, .mvals = vals, .p = p};
    atomic_init(&J.bad, 0);
    const double cost = (double)p->planes * (double)(p->h * p->w + (vals ? 3 : 2) * p->oh * p->ow);
    gc_parallel_range(p->planes, 1, cost * 0.5, GC_FN(mp_bwd_range), &J);
    return -atomic_load(&J.bad);
}

int GC_FN(gc_max_pool2d_backward)(const GC_T *g, const int64_t *idx, GC_T *gx,
                                  const gc_pool2d *p)
{
    return GC_FN(gc_max_pool2d_relu_backward)(g, idx, NULL, gx, p);
}

#endif
