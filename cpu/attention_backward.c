/* The backward of fused scaled dot-product attention (the contract is gc_attention_backward's,
 * kernels.h): for out = softmax(S) v with S = scale * q k^T + mask (causal, masked -> -inf) and
 * the gradient g of out,
 *   P = exp(S - lse)            (lse: the forward's logsumexp per row, gc_attention_lse)
 *   dv = P^T g,  dP = g v^T,  dS = P * (dP - Di) with Di = sum_c g[i, c] out[i, c],
 *   dq = scale * dS k,  dk = scale * dS^T q.
 * FlashAttention-2's backward: P and dS are recomputed per tile of GC_ATB_QB query rows x
 * GC_ATB_KB keys from q, k and lse, so no Sq x Skv matrix exists, whatever the lengths.
 *
 * A work item is one (batch, key/value head): the hg query heads of its group (grouped-query
 * attention) add into the same dk and dv, so one thread computes them all, in a fixed order (key
 * block, query head, query block); dq of each of its query heads is its own.  Every output
 * element is therefore summed in the same order whatever thread runs the item: results do not
 * depend on the thread count.  Items are claimed over the pool (gc_parallel_range).
 *
 * Per key block, K^T and V^T are packed [D, ldk] and [Dv, ldk] (columns padded with zeros to a
 * multiple of 16, so the score products have no scalar tail); the products run through the ISA's
 * small-M GEMM (gemv_n, isa/stream.h): S = Q K^T and dP = G V^T over the packed blocks; dq += dS
 * K over K's rows in place; dv += P^T G and dk += dS^T Q over P^T and dS^T transposed into
 * scratch.  dq, dk and dv accumulate in place (zeroed first).
 *
 * A fully masked row has lse = +inf (P = 0: no gradient, as PyTorch's safe softmax); a NaN row
 * (lse NaN) makes its gradients NaN. */
#ifndef GC_T

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

#define GC_ATB_QB 32  /* query rows per tile */
#define GC_ATB_KB 64  /* keys per tile */
#define GC_ATB_PAD 16 /* packed K^T / V^T columns: a multiple of this */
/* single-thread cost per multiply-add and per score (mask, exp, dS), for the thread count */
#define GC_ATB_NS_FMA 0.03
#define GC_ATB_NS_SCORE 2.0

static ptrdiff_t gc_atb_round(ptrdiff_t v, ptrdiff_t r)
{
    return (v + r - 1) / r * r;
}

#define GC_T float
#define GC_SFX f32
#define GC_GEMV_N gc_isa.gemv_n_f32
#include "attention_backward.c"
#undef GC_T
#undef GC_SFX
#undef GC_GEMV_N

#define GC_T double
#define GC_SFX f64
#define GC_GEMV_N gc_isa.gemv_n_f64
#include "attention_backward.c"
#undef GC_T
#undef GC_SFX
#undef GC_GEMV_N

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *q, *k, *v, *out, *g, *lse;
    const void *mask;
    GC_T *dq, *dk, *dv;
    const gc_attn *p;
    ptrdiff_t hg, hk; /* query heads per kv head, kv heads */
    ptrdiff_t ldk;    /* packed K^T / V^T row stride */
    size_t off_kt, off_vt, off_s, off_dp, off_t, off_di, bytes;
    atomic_int fail;
} GC_FN(atb_job);

#include "attention_gemv.h"

/* P = exp(x - m) for x[0..n) (in place) */
static void GC_FN(atb_exp)(GC_T *x, ptrdiff_t n, GC_T m)
{
    if (sizeof(GC_T) == sizeof(float)) {
        gc_isa.vexp_shift_sum_f32((const float *)(void *)x, (float *)(void *)x, n, (float)m);
        return;
    }
    for (ptrdiff_t j = 0; j < n; j++)
        x[j] = (GC_T)exp((double)(x[j] - m));
}

/* The mask of query row i of head (b, h) over keys [j0, j0 + n) added into s (float) or
 * applied (bool: masked -> -inf), as the forward (attention.c's att_mask_row). */
static void GC_FN(atb_mask_row)(const gc_attn *p, const void *mask, ptrdiff_t b, ptrdiff_t h,
                                ptrdiff_t i, ptrdiff_t j0, GC_T *s, ptrdiff_t n)
{
    const ptrdiff_t off = b * p->ms[0] + h * p->ms[1] + i * p->ms[2] + j0 * p->ms[3];
    const ptrdiff_t st = p->ms[3];
    if (p->mask_kind == GC_ATTN_MASK_FLOAT) {
        const GC_T *m = (const GC_T *)mask + off;
        for (ptrdiff_t j = 0; j < n; j++)
            s[j] += m[j * st];
    } else if (p->mask_kind == GC_ATTN_MASK_BOOL) {
        const unsigned char *m = (const unsigned char *)mask + off;
        for (ptrdiff_t j = 0; j < n; j++)
            s[j] = m[j * st] ? s[j] : (GC_T)-INFINITY;
    }
}

/* Rows [j0, j0 + n) of x (row stride rs, unit column stride, c columns) transposed into t
 * [c, ldt], columns n .. round(n, GC_ATB_PAD) zero. */
static void GC_FN(atb_pack_t)(const GC_T *x, ptrdiff_t rs, ptrdiff_t j0, ptrdiff_t n, ptrdiff_t c,
                              GC_T *t, ptrdiff_t ldt)
{
    const ptrdiff_t w = gc_atb_round(n, GC_ATB_PAD);
    for (ptrdiff_t j = 0; j < n; j++) {
        const GC_T *src = x + (j0 + j) * rs;
        for (ptrdiff_t e = 0; e < c; e++)
            t[e * ldt + j] = src[e];
    }
    for (ptrdiff_t e = 0; e < c; e++)
        for (ptrdiff_t j = n; j < w; j++)
            t[e * ldt + j] = (GC_T)0;
}

/* a [rows, cols] (row stride lda) transposed into t [cols, ldt] */
static void GC_FN(atb_transpose)(const GC_T *a, ptrdiff_t lda, ptrdiff_t rows, ptrdiff_t cols,
                                 GC_T *t, ptrdiff_t ldt)
{
    for (ptrdiff_t r = 0; r < rows; r++)
        for (ptrdiff_t j = 0; j < cols; j++)
            t[j * ldt + r] = a[r * lda + j];
}

/* One work item: batch b, key / value head hk, with the thread's scratch ws. */
static void GC_FN(atb_item)(GC_FN(atb_job) * J, char *ws, ptrdiff_t b, ptrdiff_t hk)
{
    const gc_attn *p = J->p;
    const ptrdiff_t d = p->d, dv = p->dv, sq = p->sq, skv = p->skv, hg = J->hg;
    const ptrdiff_t ldk = J->ldk, lds = ldk;
    const GC_T scale = (GC_T)p->scale;
    const GC_T *kh = J->k + b * p->ks[0] + hk * p->ks[1];
    const GC_T *vh = J->v + b * p->vs[0] + hk * p->vs[1];
    GC_T *dkh = J->dk + (b * J->hk + hk) * skv * d;
    GC_T *dvh = J->dv + (b * J->hk + hk) * skv * dv;
    GC_T *kt = (GC_T *)(ws + J->off_kt), *vt = (GC_T *)(ws + J->off_vt);
    GC_T *s = (GC_T *)(ws + J->off_s), *dp = (GC_T *)(ws + J->off_dp);
    GC_T *t = (GC_T *)(ws + J->off_t), *di = (GC_T *)(ws + J->off_di);
    memset(dkh, 0, sizeof(GC_T) * (size_t)(skv * d));
    memset(dvh, 0, sizeof(GC_T) * (size_t)(skv * dv));
    /* per query head of the group: dq zeroed, Di = rowsum(g * out) */
    for (ptrdiff_t u = 0; u < hg; u++) {
        const ptrdiff_t h = hk * hg + u;
        memset(J->dq + (b * p->h + h) * sq * d, 0, sizeof(GC_T) * (size_t)(sq * d));
        const GC_T *oh = J->out + b * p->os[0] + h * p->os[1];
        const GC_T *gh = J->g + b * p->gs[0] + h * p->gs[1];
        for (ptrdiff_t i = 0; i < sq; i++) {
            const GC_T *orow = oh + i * p->os[2], *grow = gh + i * p->gs[2];
            double acc = 0.0;
            for (ptrdiff_t c = 0; c < dv; c++)
                acc += (double)orow[c] * (double)grow[c];
            di[u * sq + i] = (GC_T)acc;
        }
    }
    for (ptrdiff_t j0 = 0; j0 < skv; j0 += GC_ATB_KB) {
        const ptrdiff_t nk = skv - j0 < GC_ATB_KB ? skv - j0 : GC_ATB_KB;
        GC_FN(atb_pack_t)(kh, p->ks[2], j0, nk, d, kt, ldk);
        GC_FN(atb_pack_t)(vh, p->vs[2], j0, nk, dv, vt, ldk);
        /* causal: query rows before j0 see none of these keys */
        const ptrdiff_t i_first = p->causal ? (j0 < sq ? j0 : sq) / GC_ATB_QB * GC_ATB_QB : 0;
        for (ptrdiff_t u = 0; u < hg; u++) {
            const ptrdiff_t h = hk * hg + u;
            const GC_T *qh = J->q + b * p->qs[0] + h * p->qs[1];
            const GC_T *gh = J->g + b * p->gs[0] + h * p->gs[1];
            const GC_T *lh = J->lse + (b * p->h + h) * sq;
            GC_T *dqh = J->dq + (b * p->h + h) * sq * d;
            for (ptrdiff_t i0 = i_first; i0 < sq; i0 += GC_ATB_QB) {
                const ptrdiff_t rows = sq - i0 < GC_ATB_QB ? sq - i0 : GC_ATB_QB;
                const GC_T *qa = qh + i0 * p->qs[2], *ga = gh + i0 * p->gs[2];
                /* causal: the block's last row sees keys up to i0 + rows - 1, so the keys past
                 * it (on the diagonal block, up to half of it) are left out of every product;
                 * their P and dS are 0, so the sums over the keys kept are the same bits */
                ptrdiff_t nb = nk;
                if (p->causal && i0 + rows - j0 < nb)
                    nb = i0 + rows - j0;
                if (nb <= 0)
                    continue;
                const ptrdiff_t nbp = gc_atb_round(nb, GC_ATB_PAD);
                /* S = scale Q K^T, then P = exp(S + mask - lse) in place */
                GC_FN(att_gemv)(rows, nbp, d, qa, p->qs[2], kt, ldk, s, lds, scale, (GC_T)0);
                GC_FN(att_gemv)(rows, nbp, dv, ga, p->gs[2], vt, ldk, dp, lds, (GC_T)1, (GC_T)0);
                for (ptrdiff_t r = 0; r < rows; r++) {
                    const ptrdiff_t i = i0 + r;
                    GC_T *sr = s + r * lds, *dpr = dp + r * lds;
                    ptrdiff_t len = nb;
                    if (p->causal && i + 1 - j0 < len)
                        len = i + 1 - j0 > 0 ? i + 1 - j0 : 0;
                    if (len > 0) {
                        GC_FN(atb_mask_row)(p, J->mask, b, h, i, j0, sr, len);
                        GC_FN(atb_exp)(sr, len, lh[i]);
                    }
                    const GC_T dii = di[u * sq + i];
                    for (ptrdiff_t j = 0; j < len; j++)
                        dpr[j] = sr[j] * (dpr[j] - dii); /* dS (unscaled) */
                    for (ptrdiff_t j = len; j < nbp; j++)
                        sr[j] = dpr[j] = (GC_T)0;
                }
                /* dv += P^T G */
                GC_FN(atb_transpose)(s, lds, rows, nb, t, GC_ATB_QB);
                GC_FN(att_gemv)(nb, dv, rows, t, GC_ATB_QB, ga, p->gs[2], dvh + j0 * dv, dv, (GC_T)1,
                          (GC_T)1);
                /* dq += scale dS K (K's rows where they lie) */
                GC_FN(att_gemv)(rows, d, nb, dp, lds, kh + j0 * p->ks[2], p->ks[2], dqh + i0 * d, d,
                          scale, (GC_T)1);
                /* dk += scale dS^T Q */
                GC_FN(atb_transpose)(dp, lds, rows, nb, t, GC_ATB_QB);
                GC_FN(att_gemv)(nb, d, rows, t, GC_ATB_QB, qa, p->qs[2], dkh + j0 * d, d, scale,
                          (GC_T)1);
            }
        }
    }
}

static void GC_FN(atb_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(atb_job) *J = (GC_FN(atb_job) *)ctx;
    char *ws = (char *)gc_scratch(J->bytes);
    if (!ws) {
        atomic_store(&J->fail, 1);
        return;
    }
    for (ptrdiff_t u = lo; u < hi; u++)
        GC_FN(atb_item)(J, ws, u / J->hk, u % J->hk);
}

int GC_FN(gc_attention_backward)(const GC_T *q, const GC_T *k, const GC_T *v, const void *mask,
                                 const GC_T *out, const GC_T *g, const GC_T *lse, GC_T *dq,
                                 GC_T *dk, GC_T *dv, const gc_attn *p)
{
    if (p->b <= 0 || p->h <= 0)
        return 0;
    GC_FN(atb_job) J;
    memset(&J, 0, sizeof J);
    J.q = q;
    J.k = k;
    J.v = v;
    J.out = out;
    J.g = g;
    J.lse = lse;
    J.mask = p->mask_kind ? mask : NULL;
    J.dq = dq;
    J.dk = dk;
    J.dv = dv;
    J.p = p;
    J.hg = p->hg > 1 ? p->hg : 1;
    J.hk = p->h / J.hg;
    J.ldk = gc_atb_round(GC_ATB_KB, GC_ATB_PAD);
    /* scratch: K^T [D, ldk] | V^T [Dv, ldk] | S, P [QB, ldk] | dP, dS [QB, ldk] |
     * P^T, dS^T [KB, QB] | Di [hg, Sq] */
    size_t off = 0;
#define GC_ATB_TAKE(field, nbytes)                                                                \
    do {                                                                                          \
        J.field = off;                                                                            \
        off += ((size_t)(nbytes) + 63) & ~(size_t)63;                                             \
    } while (0)
    GC_ATB_TAKE(off_kt, sizeof(GC_T) * (size_t)(p->d > 0 ? p->d : 1) * (size_t)J.ldk);
    GC_ATB_TAKE(off_vt, sizeof(GC_T) * (size_t)(p->dv > 0 ? p->dv : 1) * (size_t)J.ldk);
    GC_ATB_TAKE(off_s, sizeof(GC_T) * (size_t)GC_ATB_QB * (size_t)J.ldk);
    GC_ATB_TAKE(off_dp, sizeof(GC_T) * (size_t)GC_ATB_QB * (size_t)J.ldk);
    GC_ATB_TAKE(off_t, sizeof(GC_T) * (size_t)GC_ATB_KB * (size_t)GC_ATB_QB);
    GC_ATB_TAKE(off_di, sizeof(GC_T) * (size_t)J.hg * (size_t)(p->sq > 0 ? p->sq : 1));
#undef GC_ATB_TAKE
    J.bytes = off;
    atomic_init(&J.fail, 0);
    const double keys = p->causal ? 0.5 * (double)(p->skv < p->sq ? p->skv : p->sq) + 1
                                  : (double)p->skv;
    const double scores = (double)p->b * (double)p->h * (double)p->sq * keys;
    const double cost = scores * ((double)(3 * p->d + 2 * p->dv) * GC_ATB_NS_FMA + GC_ATB_NS_SCORE);
    gc_parallel_range(p->b * J.hk, 1, cost, GC_FN(atb_range), &J);
    return atomic_load(&J.fail) ? -1 : 0;
}

#endif
