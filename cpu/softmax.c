/* Softmax / log-softmax over the middle axis of [outer, n, inner], their backward, and the
 * fused cross-entropy forward / backward over [n, c] logits.
 *
 * Numerically stable: the row max is subtracted before exp; sums accumulate in double.  For
 * inner > 1 the columns are processed in chunks of GC_SM_CHUNK (isa.h) with contiguous inner
 * loops.  float32 rows (inner == 1) take three passes: max, then exp(x - m) and its sum fused in
 * the ISA's gc_isa.vexp_shift_sum_f32 (the exps never leave the registers before being summed),
 * then the scale (softmax) or the shift by max + log(sum) (log-softmax, which writes nothing in
 * the middle pass).  float64 keeps the separate passes with libm exp. */
#ifndef GC_T

#include <math.h>

#include "isa.h"
#include "kernels.h"
#include "vec.h"

#define GC_SM_NS 1.5 /* estimated ns per element (a few passes and an exp) */

#define GC_T float
#define GC_SFX f32
#define GC_M(fn) fn##f
#define GC_VEXP gc_isa.vunary_f32[GC_UNARY_EXP]
#define GC_VT gc_v4f
#define GC_VN 4
#define GC_VMAX gc_vmax4
#define GC_SHIFT_SUM gc_isa.vexp_shift_sum_f32
#include "softmax.c"
#undef GC_T
#undef GC_SFX
#undef GC_M
#undef GC_VEXP
#undef GC_VT
#undef GC_VN
#undef GC_VMAX
#undef GC_SHIFT_SUM

#define GC_T double
#define GC_SFX f64
#define GC_M(fn) fn
#define GC_VEXP ((void (*)(const double *, double *, ptrdiff_t))NULL)
#define GC_VT gc_v2d
#define GC_VN 2
#define GC_VMAX gc_vmax2
#include "softmax.c"
#undef GC_T
#undef GC_SFX
#undef GC_M
#undef GC_VEXP
#undef GC_VT
#undef GC_VN
#undef GC_VMAX

#else /* type-generic body, T = GC_T */

/* y = exp(x) (y may be x): the ISA's vector exp for float32, else libm. */
static inline void GC_FN(exp_array)(const GC_T *x, GC_T *y, ptrdiff_t n)
{
    if (GC_VEXP) {
        GC_VEXP(x, y, n);
        return;
    }
    for (ptrdiff_t j = 0; j < n; j++)
        y[j] = GC_M(exp)(x[j]);
}

#ifndef GC_SHIFT_SUM
/* sum of x[0..n) in double, for x >= 0 (exp values): chunks of GC_SM_CHUNK summed in 4 vectors
 * of GC_T lanes, the chunk sums added in double.  The order depends on n only. */
static double GC_FN(sum_d)(const GC_T *x, ptrdiff_t n)
{
    double s = 0.0;
    for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_SM_CHUNK) {
        const ptrdiff_t w = (n - j0 < GC_SM_CHUNK) ? n - j0 : GC_SM_CHUNK;
        const GC_T *p = x + j0;
        GC_VT acc[4] = {{0}, {0}, {0}, {0}};
        ptrdiff_t j = 0;
        for (; j + 4 * GC_VN <= w; j += 4 * GC_VN) {
            for (int u = 0; u < 4; u++) {
                GC_VT v;
                memcpy(&v, p + j + u * GC_VN, sizeof v);
                acc[u] += v;
            }
        }
        const GC_VT t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        double cs = 0.0;
        for (int l = 0; l < GC_VN; l++)
            cs += (double)t[l];
        for (; j < w; j++)
            cs += (double)p[j];
        s += cs;
    }
    return s;
}

#endif

/* sum over j < n of e[j] = exp(x[j] - m), in double; e is written to y unless y is NULL (y may
 * equal x).  float32: one fused pass of the ISA (isa.h's contract); float64: exp into y (or a
 * stack chunk), then sum_d. */
static double GC_FN(sum_exp)(const GC_T *x, GC_T *y, ptrdiff_t n, GC_T m)
{
#ifdef GC_SHIFT_SUM
    /* A row whose max is +inf: exp(inf - inf) is NaN, so the sum is NaN and so is every output
     * (PyTorch's answer); the fused pass counts max-equal terms as exactly 1 and would not. */
    const double s = GC_SHIFT_SUM(x, y, n, m);
    return m == (GC_T)INFINITY ? (double)NAN : s;
#else
    if (y) {
        for (ptrdiff_t j = 0; j < n; j++)
            y[j] = x[j] - m;
        GC_FN(exp_array)(y, y, n);
        return GC_FN(sum_d)(y, n);
    }
    GC_T t[GC_SM_CHUNK];
    double s = 0.0;
    for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_SM_CHUNK) {
        const ptrdiff_t w = (n - j0 < GC_SM_CHUNK) ? n - j0 : GC_SM_CHUNK;
        for (ptrdiff_t j = 0; j < w; j++)
            t[j] = x[j0 + j] - m;
        GC_FN(exp_array)(t, t, w);
        s += GC_FN(sum_d)(t, w);
    }
    return s;
#endif
}

/* Max of a row ignoring NaN (vector lanes).  A NaN element still makes the whole row NaN, as it
 * should: exp(NaN - m) is NaN, so is the row's sum, and every output is divided by (or offset
 * by the log of) that sum.  8 independent vector maxima: with fewer the loop waits on the max
 * latency (2 vectors: a quarter of the load rate), and this pass is a third of float32 softmax. */
static inline GC_T GC_FN(row_max)(const GC_T *x, ptrdiff_t n)
{
    GC_T r = (GC_T)-INFINITY;
    ptrdiff_t j = 0;
    if (n >= 8 * GC_VN) {
        GC_VT mm[8];
        memcpy(mm, x, sizeof mm);
        for (j = 8 * GC_VN; j + 8 * GC_VN <= n; j += 8 * GC_VN) {
            for (int u = 0; u < 8; u++) {
                GC_VT v;
                memcpy(&v, x + j + u * GC_VN, sizeof v);
                mm[u] = GC_VMAX(v, mm[u]);
            }
        }
        const GC_VT m0 = GC_VMAX(GC_VMAX(mm[1], mm[0]), GC_VMAX(mm[3], mm[2]));
        const GC_VT m1 = GC_VMAX(GC_VMAX(mm[5], mm[4]), GC_VMAX(mm[7], mm[6]));
        const GC_VT mv = GC_VMAX(m1, m0);
        for (int l = 0; l < GC_VN; l++)
            r = mv[l] > r ? mv[l] : r;
    }
    for (; j < n; j++)
        r = x[j] > r ? x[j] : r;
    return r;
}

/* The row max: the ISA's (float32, where it has one) or row_max. */
static inline GC_T GC_FN(max_of)(const GC_T *x, ptrdiff_t n)
{
#ifdef GC_SHIFT_SUM
    if (gc_isa.vmax_f32)
        return gc_isa.vmax_f32(x, n);
#endif
    return GC_FN(row_max)(x, n);
}

/* Three passes (max, exp-shift-sum, output); out may equal x exactly (each pass reads x[j]
 * before writing out[j]).  Softmax stores the exps in the middle pass and scales them; log-softmax
 * only sums there and writes (x - m) - log(sum) at the end. */
static void GC_FN(softmax_row)(const GC_T *x, GC_T *out, ptrdiff_t n, int log_softmax)
{
    const GC_T m = GC_FN(max_of)(x, n);
    const double s = GC_FN(sum_exp)(x, log_softmax ? NULL : out, n, m);
    const GC_T ls = log_softmax ? (GC_T)log(s) : (GC_T)0;
    const GC_T inv = log_softmax ? (GC_T)1 : (GC_T)(1.0 / s);
#ifdef GC_SHIFT_SUM
    if (gc_isa.vsub2_mul_f32) {
        if (log_softmax)
            gc_isa.vsub2_mul_f32(x, out, n, m, ls, 1.0f);
        else
            gc_isa.vsub2_mul_f32(out, out, n, 0.0f, 0.0f, inv);
        return;
    }
#endif
    if (log_softmax) {
        for (ptrdiff_t j = 0; j < n; j++)
            out[j] = (x[j] - m) - ls;
    } else {
        for (ptrdiff_t j = 0; j < n; j++)
            out[j] *= inv;
    }
}

#ifdef GC_SHIFT_SUM
/* Rows [lo, hi) of n: 4 at a time through the ISA's vsoftmax4_f32 where it has one (the bits
 * of softmax_row over the ISA's vmax_f32 and vsub2_mul_f32), the rest one by one. */
static void GC_FN(softmax_rows)(const GC_T *x, GC_T *out, ptrdiff_t lo, ptrdiff_t hi, ptrdiff_t n,
                                int log_softmax)
{
    ptrdiff_t u = lo;
    if (gc_isa.vsoftmax4_f32 && gc_isa.vmax_f32 && gc_isa.vsub2_mul_f32)
        for (; u + 4 <= hi; u += 4)
            gc_isa.vsoftmax4_f32(x + u * n, out + u * n, n, log_softmax);
    for (; u < hi; u++)
        GC_FN(softmax_row)(x + u * n, out + u * n, n, log_softmax);
}
#endif

static void GC_FN(softmax_cols)(const GC_T *x, GC_T *out, ptrdiff_t n, ptrdiff_t inner,
                                ptrdiff_t w, int log_softmax)
{
    GC_T m[GC_SM_CHUNK];
    double s[GC_SM_CHUNK];
    for (ptrdiff_t t = 0; t < w; t++) {
        m[t] = (GC_T)-INFINITY;
        s[t] = 0.0;
    }
    for (ptrdiff_t j = 0; j < n; j++) {
        const GC_T *row = x + j * inner;
        for (ptrdiff_t t = 0; t < w; t++)
            m[t] = (row[t] > m[t] || row[t] != row[t]) ? row[t] : m[t];
    }
    if (log_softmax) {
        GC_T e[GC_SM_CHUNK];
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *row = x + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                e[t] = row[t] - m[t];
            GC_FN(exp_array)(e, e, w);
            for (ptrdiff_t t = 0; t < w; t++)
                s[t] += (double)e[t];
        }
        GC_T ls[GC_SM_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++)
            ls[t] = (GC_T)log(s[t]);
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *row = x + j * inner;
            GC_T *orow = out + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                orow[t] = (row[t] - m[t]) - ls[t];
        }
    } else {
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *row = x + j * inner;
            GC_T *orow = out + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                orow[t] = row[t] - m[t];
            GC_FN(exp_array)(orow, orow, w);
            for (ptrdiff_t t = 0; t < w; t++)
                s[t] += (double)orow[t];
        }
        GC_T inv[GC_SM_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++)
            inv[t] = (GC_T)(1.0 / s[t]);
        for (ptrdiff_t j = 0; j < n; j++) {
            GC_T *orow = out + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                orow[t] *= inv[t];
        }
    }
}

typedef struct {
    const GC_T *x, *g, *y, *lse, *gl;
    const int64_t *target;
    GC_T *out, *loss, *lse_out;
    ptrdiff_t n, inner, chunks, c;
    int log_softmax;
    int64_t ignore;
} GC_FN(sm_job);

/* Units [lo, hi): a row (inner == 1) or (row o, column chunk). */
static void GC_FN(softmax_units)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(sm_job) *J = (const GC_FN(sm_job) *)ctx;
    const ptrdiff_t n = J->n, inner = J->inner;
#ifdef GC_SHIFT_SUM
    if (inner == 1) {
        GC_FN(softmax_rows)(J->x, J->out, lo, hi, n, J->log_softmax);
        return;
    }
#endif
    for (ptrdiff_t u = lo; u < hi; u++) {
        if (inner == 1) {
            GC_FN(softmax_row)(J->x + u * n, J->out + u * n, n, J->log_softmax);
            continue;
        }
        const ptrdiff_t o = u / J->chunks, t0 = (u % J->chunks) * GC_SM_CHUNK;
        const ptrdiff_t w = (inner - t0 < GC_SM_CHUNK) ? inner - t0 : GC_SM_CHUNK;
        const ptrdiff_t base = o * n * inner + t0;
        GC_FN(softmax_cols)(J->x + base, J->out + base, n, inner, w, J->log_softmax);
    }
}

void GC_FN(gc_softmax)(const GC_T *x, GC_T *out, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner,
                       int log_softmax)
{
    if (n == 0 || inner == 0 || outer == 0)
        return;
    GC_FN(sm_job) J = {.x = x, .out = out, .n = n, .inner = inner, .log_softmax = log_softmax};
    J.chunks = (inner + GC_SM_CHUNK - 1) / GC_SM_CHUNK;
    const ptrdiff_t units = inner == 1 ? outer : outer * J.chunks;
    gc_parallel_range(units, 1, (double)outer * (double)n * (double)inner * GC_SM_NS,
                      GC_FN(softmax_units), &J);
}

/* softmax: out = y (g - sum(g y)); log-softmax: out = g - exp(y) sum(g).  out may equal grad or
 * y exactly: the sums are complete before out is written. */
static void GC_FN(softmax_backward_units)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(sm_job) *J = (const GC_FN(sm_job) *)ctx;
    const ptrdiff_t n = J->n, inner = J->inner;
    if (inner == 1) { /* rows (the last dim): the same sums and exps, a row at a time (the
                       * vector exp does the same operations in every lane and tail) */
        for (ptrdiff_t u = lo; u < hi; u++) {
            const GC_T *g = J->g + u * n, *yy = J->y + u * n;
            GC_T *ou = J->out + u * n;
            double s = 0.0;
            if (J->log_softmax) {
                for (ptrdiff_t j = 0; j < n; j++)
                    s += (double)g[j];
                const GC_T st = (GC_T)s;
                GC_T e[GC_SM_CHUNK];
                for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_SM_CHUNK) {
                    const ptrdiff_t w = (n - j0 < GC_SM_CHUNK) ? n - j0 : GC_SM_CHUNK;
                    GC_FN(exp_array)(yy + j0, e, w);
                    for (ptrdiff_t t = 0; t < w; t++)
                        ou[j0 + t] = g[j0 + t] - e[t] * st;
                }
                continue;
            }
            for (ptrdiff_t j = 0; j < n; j++)
                s += (double)g[j] * (double)yy[j];
            const GC_T st = (GC_T)s;
            for (ptrdiff_t j = 0; j < n; j++)
                ou[j] = yy[j] * (g[j] - st);
        }
        return;
    }
    for (ptrdiff_t u = lo; u < hi; u++) {
        const ptrdiff_t o = u / J->chunks, t0 = (u % J->chunks) * GC_SM_CHUNK;
        const ptrdiff_t w = (inner - t0 < GC_SM_CHUNK) ? inner - t0 : GC_SM_CHUNK;
        const ptrdiff_t base = o * n * inner + t0;
        const GC_T *g = J->g + base, *yy = J->y + base;
        GC_T *ou = J->out + base;
        double s[GC_SM_CHUNK];
        GC_T st[GC_SM_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++)
            s[t] = 0.0;
        if (J->log_softmax) {
            for (ptrdiff_t j = 0; j < n; j++)
                for (ptrdiff_t t = 0; t < w; t++)
                    s[t] += (double)g[j * inner + t];
            for (ptrdiff_t t = 0; t < w; t++)
                st[t] = (GC_T)s[t];
            GC_T e[GC_SM_CHUNK];
            for (ptrdiff_t j = 0; j < n; j++) {
                GC_FN(exp_array)(yy + j * inner, e, w);
                for (ptrdiff_t t = 0; t < w; t++)
                    ou[j * inner + t] = g[j * inner + t] - e[t] * st[t];
            }
        } else {
            for (ptrdiff_t j = 0; j < n; j++)
                for (ptrdiff_t t = 0; t < w; t++)
                    s[t] += (double)g[j * inner + t] * (double)yy[j * inner + t];
            for (ptrdiff_t t = 0; t < w; t++)
                st[t] = (GC_T)s[t];
            for (ptrdiff_t j = 0; j < n; j++)
                for (ptrdiff_t t = 0; t < w; t++)
                    ou[j * inner + t] = yy[j * inner + t] * (g[j * inner + t] - st[t]);
        }
    }
}

/* softmax: out = y (g - sum(g y)); log-softmax: out = g - exp(y) sum(g).  out may equal grad or
 * y exactly: the sums are complete before out is written. */
void GC_FN(gc_softmax_backward)(const GC_T *grad, const GC_T *y, GC_T *out, ptrdiff_t outer,
                                ptrdiff_t n, ptrdiff_t inner, int log_softmax)
{
    if (n == 0 || inner == 0 || outer == 0)
        return;
    GC_FN(sm_job) J = {.g = grad, .y = y, .out = out, .n = n, .inner = inner};
    J.log_softmax = log_softmax;
    J.chunks = (inner + GC_SM_CHUNK - 1) / GC_SM_CHUNK;
    gc_parallel_range(outer * J.chunks, 1, (double)outer * (double)n * (double)inner * GC_SM_NS,
                      GC_FN(softmax_backward_units), &J);
}

static void GC_FN(ce_forward_rows)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(sm_job) *J = (const GC_FN(sm_job) *)ctx;
    const ptrdiff_t c = J->c;
    for (ptrdiff_t i = lo; i < hi; i++) {
        const GC_T *row = J->x + i * c;
        const GC_T m = GC_FN(max_of)(row, c);
        const double s = GC_FN(sum_exp)(row, NULL, c, m);
        /* c == 0: m = -inf, s = 0 -> lse = -inf (only ignored rows can exist then) */
        const double l = c > 0 ? (double)m + log(s) : -INFINITY;
        J->lse_out[i] = (GC_T)l;
        const int64_t t = J->target[i];
        J->loss[i] = (t == J->ignore) ? (GC_T)0 : (GC_T)(l - (double)row[t]);
    }
}

/* lse[i] = logsumexp(logits[i]); loss[i] = lse[i] - logits[i, target[i]] or 0 if ignored. */
void GC_FN(gc_cross_entropy_forward)(const GC_T *restrict logits, const int64_t *restrict target,
                                     GC_T *restrict loss, GC_T *restrict lse, ptrdiff_t n,
                                     ptrdiff_t c, int64_t ignore_index)
{
    GC_FN(sm_job) J = {.x = logits, .target = target, .loss = loss, .lse_out = lse, .c = c};
    J.ignore = ignore_index;
    gc_parallel_range(n, 1, (double)n * (double)c * GC_SM_NS, GC_FN(ce_forward_rows), &J);
}

static void GC_FN(ce_backward_rows)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(sm_job) *J = (const GC_FN(sm_job) *)ctx;
    const ptrdiff_t c = J->c;
    for (ptrdiff_t i = lo; i < hi; i++) {
        const GC_T *row = J->x + i * c;
        GC_T *orow = J->out + i * c;
        const int64_t t = J->target[i];
        if (t == J->ignore) {
            for (ptrdiff_t j = 0; j < c; j++)
                orow[j] = (GC_T)0;
            continue;
        }
        const GC_T g = J->gl[i], l = J->lse[i];
        for (ptrdiff_t j = 0; j < c; j++)
            orow[j] = row[j] - l;
        GC_FN(exp_array)(orow, orow, c);
        for (ptrdiff_t j = 0; j < c; j++)
            orow[j] *= g;
        orow[t] -= g;
    }
}

/* out[i, j] = grad_loss[i] (exp(logits[i, j] - lse[i]) - (j == target[i])); 0 on ignored rows.
 * out may equal logits exactly (each row is read before it is written). */
void GC_FN(gc_cross_entropy_backward)(const GC_T *logits, const int64_t *target, const GC_T *lse,
                                      const GC_T *grad_loss, GC_T *out, ptrdiff_t n, ptrdiff_t c,
                                      int64_t ignore_index)
{
    GC_FN(sm_job) J = {.x = logits, .target = target, .lse = lse, .gl = grad_loss, .out = out};
    J.c = c;
    J.ignore = ignore_index;
    gc_parallel_range(n, 1, (double)n * (double)c * GC_SM_NS, GC_FN(ce_backward_rows), &J);
}

#endif
