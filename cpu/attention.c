/* Fused scaled dot-product attention (the contract is gc_attn's, kernels.h):
 *   out[b, h, i] = sum_j softmax_j(scale * q[b, h, i] . k[b, h, j] + mask(b, h, i, j)) v[b, h, j]
 * over 4-d views of any element strides, in one call that allocates no tensor.
 *
 * Work items are (batch, head, block of up to GC_ATT_QB query rows), claimed by the threads of
 * the pool (gc_parallel_range).  Two algorithms share everything but the softmax:
 *
 *   standard: the block's score rows against every key it may attend (all Skv, or up to the
 *     block's last row with causal) in per-thread scratch (gc_scratch), softmax over each row,
 *     then P @ V.  K^T and V are packed once per head and thread (a tag in the scratch says which
 *     head it holds) and reused by the following blocks of that head.
 *   tiled: flash-style online softmax over blocks of GC_ATT_KB keys: per block the scores, a
 *     running row max m and sum l (in double), O rescaled by exp(m_old - m_new) before O += P V;
 *     never more than QB x KB scores, whatever Skv.  K^T is packed per key block.
 *
 * The products run through the ISA's small-M GEMM kernels (isa.h, isa/stream.h): scores as
 * gemv_n over K^T packed [D, keys] (a tile of query rows x key vectors in registers; the
 * columns padded to a multiple of 16 so that no scalar tail is left), or, for blocks of fewer
 * than GC_ATT_KT_ROWS rows with K contiguous along D (decoding: one query against a long cache),
 * gemv_t over the rows of K where they lie (packing K would cost as much as the product);
 * P @ V as gemv_n over the rows of V (packed when V is not contiguous along Dv).  Q is read in
 * place when contiguous along D (else copied per block); scale is the scores' alpha.
 *
 * Masked scores are -inf; a row whose scores are all -inf (every key masked) gives 0, as
 * PyTorch's SDPA (its safe softmax) does; a NaN or +inf score makes the row NaN.  Results do not
 * depend on the thread count (each item is computed alone, the same way).
 *
 * gc_attention_lse also writes each row's logsumexp (m + log l), from which the backward
 * (attention_backward.c) recomputes the probabilities; +inf for a fully masked row, so that
 * exp(s - lse) is 0 there.  Grouped-query attention (hg > 1): query head h reads key / value
 * head h / hg; the per-thread packed K^T / V are tagged by that head, so the hg query heads of
 * a group (adjacent work items) pack them once. */
#ifndef GC_T

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

#define GC_ATT_QB 32      /* query rows per work item, at most */
#define GC_ATT_KB 256     /* keys per block of the tiled algorithm */
#define GC_ATT_PAD 16     /* score rows / packed K^T columns padded to a multiple of this */
#define GC_ATT_KT_ROWS 4  /* blocks of at least this many query rows pack K^T */
#define GC_ATT_SHORT 64   /* standard: score rows up to this long share one exp call */
/* auto: the standard algorithm while a block's score rows take at most this many bytes (they
 * stay in L2 next to K^T and V), else the tiled one; see gc_attention_pick */
#define GC_ATT_STD_BYTES (128.0 * 1024)
/* K^T (and V when it needs packing) of a whole head are packed once per thread and head while
 * they take at most this many bytes (the standard algorithm always does) */
#define GC_ATT_CACHE_BYTES (4.0 * 1024 * 1024)
/* single-thread cost per multiply-add, and per score (mask, exp, the rest), for the thread
 * count (gc_parallel_range) */
#define GC_ATT_NS_FMA 0.03
#define GC_ATT_NS_SCORE 1.0

/* Call ids: the tag of the per-thread packed K^T / V must not match a previous call's. */
static atomic_ulong gc_attn_calls = 1;

/* Row states: GC_ATT_ROW_OK, or a row whose output is 0 (every score -inf) / NaN. */
enum { GC_ATT_ROW_OK = 0, GC_ATT_ROW_ZERO = 1, GC_ATT_ROW_NAN = 2 };

/* The scratch header: which head's K^T and V the thread's scratch holds (standard). */
typedef struct {
    unsigned long call;
    ptrdiff_t bh;
} gc_attn_tag;

static ptrdiff_t gc_att_round(ptrdiff_t v, ptrdiff_t r)
{
    return (v + r - 1) / r * r;
}

#define GC_T float
#define GC_SFX f32
#define GC_GEMV_N gc_isa.gemv_n_f32
#define GC_GEMV_T gc_isa.gemv_t_f32
#include "attention.c"
#undef GC_T
#undef GC_SFX
#undef GC_GEMV_N
#undef GC_GEMV_T

#define GC_T double
#define GC_SFX f64
#define GC_GEMV_N gc_isa.gemv_n_f64
#define GC_GEMV_T gc_isa.gemv_t_f64
#include "attention.c"
#undef GC_T
#undef GC_SFX
#undef GC_GEMV_N
#undef GC_GEMV_T

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *q, *k, *v;
    const void *mask;
    GC_T *out, *lse;
    const gc_attn *p;
    ptrdiff_t hg;               /* query heads per key / value head (>= 1) */
    ptrdiff_t qb, nqb;          /* rows per item, items per head */
    ptrdiff_t kcols, lds;       /* keys per pass (Skv, or GC_ATT_KB tiled), score row stride */
    ptrdiff_t ldk;              /* packed K^T row stride */
    int tiled, pack_q, pack_v;  /* which buffers exist */
    int cache;                  /* K^T and V are packed for the whole head, kept per thread */
    unsigned long call;
    /* scratch layout (byte offsets) */
    size_t off_kt, off_vp, off_qp, off_s, off_o, off_st, bytes;
    atomic_int fail;
} GC_FN(attn_job);

#include "attention_gemv.h"

/* the max of x[0..n) ignoring NaN (-inf when none) */
static GC_T GC_FN(att_max)(const GC_T *x, ptrdiff_t n)
{
    if (sizeof(GC_T) == sizeof(float) && gc_isa.vmax_f32)
        return (GC_T)gc_isa.vmax_f32((const float *)(const void *)x, n);
    GC_T m0 = (GC_T)-INFINITY, m1 = (GC_T)-INFINITY, m2 = (GC_T)-INFINITY, m3 = (GC_T)-INFINITY;
    ptrdiff_t j = 0;
    for (; j + 4 <= n; j += 4) {
        m0 = x[j] > m0 ? x[j] : m0;
        m1 = x[j + 1] > m1 ? x[j + 1] : m1;
        m2 = x[j + 2] > m2 ? x[j + 2] : m2;
        m3 = x[j + 3] > m3 ? x[j + 3] : m3;
    }
    for (; j < n; j++)
        m0 = x[j] > m0 ? x[j] : m0;
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    return m2 > m0 ? m2 : m0;
}

/* x[j] = exp(x[j] - m) for j < n, returning their sum in double */
static double GC_FN(att_exp)(GC_T *x, ptrdiff_t n, GC_T m)
{
    if (sizeof(GC_T) == sizeof(float))
        return gc_isa.vexp_shift_sum_f32((const float *)(void *)x, (float *)(void *)x, n,
                                         (float)m);
    double s = 0.0;
    for (ptrdiff_t j = 0; j < n; j++) {
        x[j] = (GC_T)exp((double)(x[j] - m));
        s += (double)x[j];
    }
    return s;
}

static int GC_FN(att_has_nan)(const GC_T *x, ptrdiff_t n)
{
    for (ptrdiff_t j = 0; j < n; j++)
        if (x[j] != x[j])
            return 1;
    return 0;
}

/* The mask of query row i over keys [j0, j0 + n) added into s (float) or applied (bool). */
static void GC_FN(att_mask_row)(const GC_FN(attn_job) * J, ptrdiff_t b, ptrdiff_t h, ptrdiff_t i,
                                ptrdiff_t j0, GC_T *s, ptrdiff_t n)
{
    const gc_attn *p = J->p;
    const ptrdiff_t off = b * p->ms[0] + h * p->ms[1] + i * p->ms[2] + j0 * p->ms[3];
    const ptrdiff_t st = p->ms[3];
    if (p->mask_kind == GC_ATTN_MASK_FLOAT) {
        const GC_T *m = (const GC_T *)J->mask + off;
        if (st == 1)
            for (ptrdiff_t j = 0; j < n; j++)
                s[j] += m[j];
        else
            for (ptrdiff_t j = 0; j < n; j++)
                s[j] += m[j * st];
    } else if (p->mask_kind == GC_ATTN_MASK_BOOL) {
        const unsigned char *m = (const unsigned char *)J->mask + off;
        for (ptrdiff_t j = 0; j < n; j++)
            s[j] = m[j * st] ? s[j] : (GC_T)-INFINITY;
    }
}

/* K^T of keys [j0, j0 + n) of head kh into kt [D, ldk] (columns n .. ldk zero). */
static void GC_FN(att_pack_kt)(const GC_FN(attn_job) * J, const GC_T *kh, ptrdiff_t j0,
                               ptrdiff_t n, GC_T *kt)
{
    const gc_attn *p = J->p;
    const ptrdiff_t d = p->d, ldk = J->ldk, s2 = p->ks[2], s3 = p->ks[3];
    const ptrdiff_t w = gc_att_round(n, GC_ATT_PAD);
    /* blocks of 8 keys x all of D: reads along D (contiguous in the usual layouts) */
    for (ptrdiff_t j = 0; j < n; j += 8) {
        const ptrdiff_t nj = n - j < 8 ? n - j : 8;
        for (ptrdiff_t jj = 0; jj < nj; jj++) {
            const GC_T *src = kh + (j0 + j + jj) * s2;
            GC_T *dst = kt + j + jj;
            if (s3 == 1)
                for (ptrdiff_t c = 0; c < d; c++)
                    dst[c * ldk] = src[c];
            else
                for (ptrdiff_t c = 0; c < d; c++)
                    dst[c * ldk] = src[c * s3];
        }
    }
    for (ptrdiff_t c = 0; c < d; c++)
        for (ptrdiff_t j = n; j < w; j++)
            kt[c * ldk + j] = (GC_T)0;
}

/* V rows [j0, j0 + n) of head vh into vp [n, Dv] (contiguous). */
static void GC_FN(att_pack_v)(const GC_FN(attn_job) * J, const GC_T *vh, ptrdiff_t j0,
                              ptrdiff_t n, GC_T *vp)
{
    const gc_attn *p = J->p;
    const ptrdiff_t dv = p->dv, s2 = p->vs[2], s3 = p->vs[3];
    for (ptrdiff_t j = 0; j < n; j++)
        for (ptrdiff_t c = 0; c < dv; c++)
            vp[j * dv + c] = vh[(j0 + j) * s2 + c * s3];
}

/* Scores S[r, j] = scale * q_r . k_{j0 + j} for r < rows, j < n (rounded up to GC_ATT_PAD when
 * kt is given: K^T packed from key j0 at column kt_col). */
static void GC_FN(att_scores)(const GC_FN(attn_job) * J, const GC_T *qa, ptrdiff_t lda,
                              ptrdiff_t rows, const GC_T *kh, const GC_T *kt, ptrdiff_t kt_col,
                              ptrdiff_t j0, ptrdiff_t n, GC_T *s, ptrdiff_t lds)
{
    const gc_attn *p = J->p;
    const GC_T scale = (GC_T)p->scale;
    if (kt)
        GC_FN(att_gemv)(rows, gc_att_round(n, GC_ATT_PAD), p->d, qa, lda, kt + kt_col, J->ldk, s, lds,
                  scale, (GC_T)0);
    else
        GC_GEMV_T(rows, n, p->d, qa, lda, kh + j0 * p->ks[2], p->ks[2], s, lds, scale, (GC_T)0);
}

/* Writes out row i from o (scaled by inv) or the special value of its state, and the row's
 * logsumexp m + log(l) (inv = 1 / l) when lse is kept: lh is the head's lse row. */
static void GC_FN(att_store)(const GC_FN(attn_job) * J, GC_T *oh, GC_T *lh, ptrdiff_t i,
                             const GC_T *o, double inv, GC_T m, int state)
{
    const gc_attn *p = J->p;
    if (lh)
        lh[i] = state == GC_ATT_ROW_NAN    ? (GC_T)NAN
                : state == GC_ATT_ROW_ZERO ? (GC_T)INFINITY
                                           : (GC_T)((double)m - log(inv));
    GC_T *dst = oh + i * p->os[2];
    const ptrdiff_t s3 = p->os[3];
    const GC_T val = state == GC_ATT_ROW_NAN ? (GC_T)NAN : (GC_T)0;
    const GC_T f = (GC_T)inv;
    for (ptrdiff_t c = 0; c < p->dv; c++)
        dst[c * s3] = state ? val : o[c] * f;
}

/* One work item (head bh, query block blk) with the thread's scratch ws. */
static void GC_FN(att_item)(GC_FN(attn_job) * J, char *ws, ptrdiff_t bh, ptrdiff_t blk)
{
    const gc_attn *p = J->p;
    const ptrdiff_t b = bh / p->h, h = bh % p->h;
    const ptrdiff_t i0 = blk * J->qb, rows = (p->sq - i0 < J->qb) ? p->sq - i0 : J->qb;
    const GC_T *qh = J->q + b * p->qs[0] + h * p->qs[1];
    const ptrdiff_t hk = h / J->hg; /* the key / value head */
    const GC_T *kh = J->k + b * p->ks[0] + hk * p->ks[1];
    const GC_T *vh = J->v + b * p->vs[0] + hk * p->vs[1];
    GC_T *oh = J->out + b * p->os[0] + h * p->os[1];
    GC_T *lh = J->lse ? J->lse + bh * p->sq : NULL;
    const ptrdiff_t kvtag = b * p->h + hk; /* names the packed K^T / V of this kv head */
    const ptrdiff_t dv = p->dv, lds = J->lds;
    /* keys the block may attend: [0, kv_end) */
    ptrdiff_t kv_end = p->skv;
    if (p->causal && i0 + rows < kv_end)
        kv_end = i0 + rows;
    GC_T *kt = J->off_kt ? (GC_T *)(ws + J->off_kt) : NULL;
    GC_T *vp = J->pack_v ? (GC_T *)(ws + J->off_vp) : NULL;
    GC_T *s = (GC_T *)(ws + J->off_s), *o = (GC_T *)(ws + J->off_o);
    double *lsum = (double *)(ws + J->off_st);
    GC_T *mrow = (GC_T *)(lsum + J->qb);
    int *state = (int *)(mrow + J->qb);
    if (kv_end <= 0) { /* no key at all: every row is fully masked */
        for (ptrdiff_t r = 0; r < rows; r++)
            GC_FN(att_store)(J, oh, lh, i0 + r, o, 0.0, (GC_T)0, GC_ATT_ROW_ZERO);
        return;
    }
    /* the block's query rows, contiguous along D */
    const GC_T *qa = qh + i0 * p->qs[2];
    ptrdiff_t lda = p->qs[2];
    if (J->pack_q) {
        GC_T *qp = (GC_T *)(ws + J->off_qp);
        for (ptrdiff_t r = 0; r < rows; r++)
            for (ptrdiff_t c = 0; c < p->d; c++)
                qp[r * p->d + c] = qh[(i0 + r) * p->qs[2] + c * p->qs[3]];
        qa = qp;
        lda = p->d;
    }
    const GC_T *va = vh; /* V rows of key 0, contiguous along Dv, row stride ldv */
    ptrdiff_t ldv = p->vs[2];
    if (J->cache && (kt || vp)) { /* the whole head's K^T / V, unless this thread has them */
        gc_attn_tag *tag = (gc_attn_tag *)ws;
        if (!(tag->call == J->call && tag->bh == kvtag)) {
            if (kt)
                GC_FN(att_pack_kt)(J, kh, 0, p->skv, kt);
            if (vp)
                GC_FN(att_pack_v)(J, vh, 0, p->skv, vp);
            tag->call = J->call;
            tag->bh = kvtag;
        }
        if (vp) {
            va = vp;
            ldv = dv;
        }
    }

    if (!J->tiled) {
        GC_FN(att_scores)(J, qa, lda, rows, kh, kt, 0, 0, kv_end, s, lds);
        /* short rows: shifted by their max here, then one exp over the whole block (a call per
         * row of 16 would wait on the exp's latency: B4 H4 S16 D16 took ~1/3 longer) */
        const int short_rows = kv_end <= GC_ATT_SHORT;
        for (ptrdiff_t r = 0; r < rows; r++) {
            const ptrdiff_t i = i0 + r;
            GC_T *sr = s + r * lds;
            const ptrdiff_t len = (p->causal && i + 1 < kv_end) ? i + 1 : kv_end;
            GC_FN(att_mask_row)(J, b, h, i, 0, sr, len);
            const GC_T mx = GC_FN(att_max)(sr, len);
            mrow[r] = mx;
            state[r] = GC_ATT_ROW_OK;
            if (mx == (GC_T)-INFINITY)
                state[r] = GC_FN(att_has_nan)(sr, len) ? GC_ATT_ROW_NAN : GC_ATT_ROW_ZERO;
            else if (mx == (GC_T)INFINITY)
                state[r] = GC_ATT_ROW_NAN;
            if (state[r]) {
                for (ptrdiff_t j = 0; j < lds; j++)
                    sr[j] = short_rows ? (GC_T)-INFINITY : (GC_T)0;
                lsum[r] = 1.0;
                continue;
            }
            if (short_rows) {
                for (ptrdiff_t j = 0; j < len; j++)
                    sr[j] -= mx;
                for (ptrdiff_t j = len; j < lds; j++)
                    sr[j] = (GC_T)-INFINITY;
                continue;
            }
            lsum[r] = GC_FN(att_exp)(sr, len, mx);
            for (ptrdiff_t j = len; j < kv_end; j++)
                sr[j] = (GC_T)0;
        }
        if (short_rows) {
            GC_FN(att_exp)(s, rows * lds, (GC_T)0);
            for (ptrdiff_t r = 0; r < rows; r++) {
                const GC_T *sr = s + r * lds;
                double sum = 0.0;
                for (ptrdiff_t j = 0; j < kv_end; j++)
                    sum += (double)sr[j];
                if (!state[r])
                    lsum[r] = sum;
            }
        }
        GC_FN(att_gemv)(rows, dv, kv_end, s, lds, va, ldv, o, dv, (GC_T)1, (GC_T)0);
        for (ptrdiff_t r = 0; r < rows; r++)
            GC_FN(att_store)(J, oh, lh, i0 + r, o + r * dv, 1.0 / lsum[r], mrow[r], state[r]);
        return;
    }

    /* tiled: online softmax over blocks of kcols keys */
    for (ptrdiff_t r = 0; r < rows; r++) {
        mrow[r] = (GC_T)-INFINITY;
        lsum[r] = 0.0;
        state[r] = GC_ATT_ROW_OK;
    }
    memset(o, 0, sizeof(GC_T) * (size_t)(rows * dv));
    for (ptrdiff_t j0 = 0; j0 < kv_end; j0 += J->kcols) {
        const ptrdiff_t nk = (kv_end - j0 < J->kcols) ? kv_end - j0 : J->kcols;
        const GC_T *vb = va + j0 * ldv; /* this block's V rows */
        if (!J->cache) {
            if (kt)
                GC_FN(att_pack_kt)(J, kh, j0, nk, kt);
            if (vp) {
                GC_FN(att_pack_v)(J, vh, j0, nk, vp);
                vb = vp;
                ldv = dv;
            }
        }
        GC_FN(att_scores)(J, qa, lda, rows, kh, kt, J->cache ? j0 : 0, j0, nk, s, lds);
        for (ptrdiff_t r = 0; r < rows; r++) {
            const ptrdiff_t i = i0 + r;
            GC_T *sr = s + r * lds;
            ptrdiff_t len = nk;
            if (p->causal && i + 1 - j0 < len)
                len = i + 1 - j0 > 0 ? i + 1 - j0 : 0;
            if (state[r] == GC_ATT_ROW_OK && len > 0) {
                GC_FN(att_mask_row)(J, b, h, i, j0, sr, len);
                const GC_T bm = GC_FN(att_max)(sr, len);
                if (bm == (GC_T)INFINITY || (bm == (GC_T)-INFINITY && GC_FN(att_has_nan)(sr, len)))
                    state[r] = GC_ATT_ROW_NAN;
                else if (bm > mrow[r]) { /* a new max: rescale what was summed so far */
                    const double corr = exp((double)mrow[r] - (double)bm);
                    if (lsum[r] != 0.0) {
                        lsum[r] *= corr;
                        GC_T *orow = o + r * dv;
                        for (ptrdiff_t c = 0; c < dv; c++)
                            orow[c] *= (GC_T)corr;
                    }
                    mrow[r] = bm;
                }
                if (state[r] == GC_ATT_ROW_OK && mrow[r] != (GC_T)-INFINITY)
                    lsum[r] += GC_FN(att_exp)(sr, len, mrow[r]);
                else
                    len = 0;
            } else {
                len = 0;
            }
            for (ptrdiff_t j = len; j < nk; j++)
                sr[j] = (GC_T)0;
        }
        GC_FN(att_gemv)(rows, dv, nk, s, lds, vb, ldv, o, dv, (GC_T)1, (GC_T)1);
    }
    for (ptrdiff_t r = 0; r < rows; r++) {
        int st = state[r];
        if (st == GC_ATT_ROW_OK && lsum[r] == 0.0)
            st = GC_ATT_ROW_ZERO;
        GC_FN(att_store)(J, oh, lh, i0 + r, o + r * dv, st ? 0.0 : 1.0 / lsum[r], mrow[r], st);
    }
}

static void GC_FN(att_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(attn_job) *J = (GC_FN(attn_job) *)ctx;
    char *ws = (char *)gc_scratch(J->bytes);
    if (!ws) {
        atomic_store(&J->fail, 1);
        return;
    }
    for (ptrdiff_t u = lo; u < hi; u++)
        GC_FN(att_item)(J, ws, u / J->nqb, u % J->nqb);
}

int GC_FN(gc_attention)(const GC_T *q, const GC_T *k, const GC_T *v, const void *mask, GC_T *out,
                        const gc_attn *p)
{
    return GC_FN(gc_attention_lse)(q, k, v, mask, out, NULL, p);
}

int GC_FN(gc_attention_lse)(const GC_T *q, const GC_T *k, const GC_T *v, const void *mask,
                            GC_T *out, GC_T *lse, const gc_attn *p)
{
    if (p->b <= 0 || p->h <= 0 || p->sq <= 0 || (p->dv <= 0 && !lse))
        return 0;
    GC_FN(attn_job) J;
    memset(&J, 0, sizeof J);
    J.q = q;
    J.k = k;
    J.v = v;
    J.mask = p->mask_kind ? mask : NULL;
    J.out = out;
    J.lse = lse;
    J.p = p;
    J.hg = p->hg > 1 ? p->hg : 1;
    J.call = atomic_fetch_add(&gc_attn_calls, 1);
    const ptrdiff_t heads = p->b * p->h;
    /* query rows per item: GC_ATT_QB, fewer while that leaves under ~4 items per thread */
    J.qb = p->sq < GC_ATT_QB ? p->sq : GC_ATT_QB;
    const int pool = gc_pool_size();
    while (J.qb > 8 && heads * ((p->sq + J.qb - 1) / J.qb) < 4 * (ptrdiff_t)pool)
        J.qb = (J.qb + 1) / 2;
    J.nqb = (p->sq + J.qb - 1) / J.qb;
    /* keys the score rows hold */
    const double std_bytes = (double)J.qb * (double)gc_att_round(p->skv, GC_ATT_PAD) * sizeof(GC_T);
    J.tiled = p->algo == GC_ATTN_TILED || (p->algo == GC_ATTN_AUTO && std_bytes > GC_ATT_STD_BYTES);
    J.kcols = J.tiled ? (p->skv < GC_ATT_KB ? p->skv : GC_ATT_KB) : p->skv;
    if (J.kcols < 1)
        J.kcols = 1;
    J.lds = gc_att_round(J.kcols, GC_ATT_PAD);
    const int use_kt = J.qb >= GC_ATT_KT_ROWS || p->ks[3] != 1 || p->d == 0;
    J.pack_q = p->qs[3] != 1 && p->d > 1;
    J.pack_v = p->vs[3] != 1 && p->dv > 1;
    /* K^T (and V when packed) for the whole head, kept and reused by the thread's next blocks
     * of that head, unless that is more than GC_ATT_CACHE_BYTES (tiled: then per key block) */
    const double head_bytes = (double)sizeof(GC_T) * (double)gc_att_round(p->skv, GC_ATT_PAD) *
                              (double)((use_kt ? p->d : 0) + (J.pack_v ? p->dv : 0));
    J.cache = !J.tiled || head_bytes <= GC_ATT_CACHE_BYTES;
    const ptrdiff_t kkeys = J.cache ? p->skv : J.kcols; /* keys packed at once */
    J.ldk = gc_att_round(kkeys > 0 ? kkeys : 1, GC_ATT_PAD);
    /* scratch: tag | K^T [D, ldk] | V [kkeys, Dv] | Q [qb, D] | S [qb, lds] | O [qb, Dv] |
     * per row: l (double), m (T), state (int) */
    size_t off = 64;
#define GC_ATT_TAKE(field, nbytes, cond)                                                          \
    do {                                                                                          \
        J.field = 0;                                                                              \
        if (cond) {                                                                               \
            J.field = off;                                                                        \
            off += ((size_t)(nbytes) + 63) & ~(size_t)63;                                         \
        }                                                                                         \
    } while (0)
    GC_ATT_TAKE(off_kt, sizeof(GC_T) * (size_t)(p->d > 0 ? p->d : 1) * (size_t)J.ldk, use_kt);
    GC_ATT_TAKE(off_vp, sizeof(GC_T) * (size_t)kkeys * (size_t)p->dv, J.pack_v);
    GC_ATT_TAKE(off_qp, sizeof(GC_T) * (size_t)J.qb * (size_t)p->d, J.pack_q);
    GC_ATT_TAKE(off_s, sizeof(GC_T) * (size_t)J.qb * (size_t)J.lds, 1);
    GC_ATT_TAKE(off_o, sizeof(GC_T) * (size_t)J.qb * (size_t)p->dv, 1);
    GC_ATT_TAKE(off_st, (sizeof(double) + sizeof(GC_T) + sizeof(int)) * (size_t)J.qb, 1);
#undef GC_ATT_TAKE
    J.bytes = off;
    atomic_init(&J.fail, 0);
    const double keys = p->causal ? 0.5 * (double)(p->skv < p->sq ? p->skv : p->sq) + 1
                                  : (double)p->skv;
    const double scores = (double)heads * (double)p->sq * keys;
    const double cost = scores * ((double)(p->d + p->dv) * GC_ATT_NS_FMA + GC_ATT_NS_SCORE);
    gc_parallel_range(heads * J.nqb, 1, cost, GC_FN(att_range), &J);
    return atomic_load(&J.fail) ? -1 : 0;
}

#endif
