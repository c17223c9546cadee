/* Fused conv2d (groups = 1) forward and backward over NCHW, image by image.
 *
 * Why not im2col of the whole batch + one batched GEMM: the batch's columns (64 x 144 x 196
 * floats for a 16 -> 32 channel 3x3 layer on 14x14) are written to memory and read back, and
 * each per-image GEMM is too small to split over threads (so the batched call spreads images
 * anyway).  Here each participant of a parallel region claims an image, unfolds it into its own
 * L2-resident column buffer and runs the single-threaded GEMMs on it (a GEMM called inside a
 * region runs alone):
 *
 *   forward:  out[b] = W [O, CK] @ col(x[b]) [CK, L] + bias
 *   backward: gW += g[b] @ col(x[b])^T,  gb += rowsum(g[b]),  gx[b] = col2im(W^T @ g[b])
 *
 * The weight and bias gradients are summed per chunk of images (images of a chunk in order, each
 * chunk into its own partial) and the partials are added in chunk order.  The chunking depends
 * on the batch size alone (GC_CONV_CHUNK images, or more once that would make more than
 * GC_CONV_MAX_CHUNKS partials, which bounds their memory), so results are bitwise identical for
 * any thread count.
 *
 * float32 takes other paths where they apply: a 1x1 convolution with stride 1 and no padding
 * multiplies the image itself (its column matrix), and conv_direct.c's direct kernel (the image
 * read in place by the GEMM's register tile) runs the forward, and the backward's weight and / or
 * input gradient, when gc_conv2d_direct_use / gc_conv2d_direct_backward_use say so (the rules
 * are there; the GEMM path here takes the gradients it leaves), conv_wtaps.c the stride-1
 * weight gradient of few taps where gc_conv2d_wtaps_use says so; before
 * both, conv_winograd.c's Winograd F(4x4, 3x3) forward where gc_conv2d_winograd_use says so, or
 * whenever the weight was packed for it (swap 2); and a 1x1 forward without padding (any
 * stride) runs conv_pw.c's pointwise driver where gc_conv2d_pw_use says so (the same bits). */
#ifndef GC_T

#define _POSIX_C_SOURCE 200112L
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "conv_bwd.h"
#include "conv_claim.h"
#include "conv_fwd.h"
#include "isa.h"
#include "kernels.h"

#define GC_CONV_CHUNK 4
#define GC_CONV_MAX_CHUNKS 32

/* Per-thread buffers separate from gc_scratch (which the GEMM called on the same thread uses):
 * kept and grown, never shrunk, so steady-state training touches no fresh pages.  A thread that
 * exits (a Python or C-API caller's thread) frees its buffers through a pthread key's destructor,
 * which runs in that thread while its thread-locals still exist. */
static _Thread_local void *conv_buf[GC_CONV_SCRATCH_SLOTS];
static _Thread_local size_t conv_cap[GC_CONV_SCRATCH_SLOTS];
static pthread_key_t conv_key;
static pthread_once_t conv_once = PTHREAD_ONCE_INIT;

static void conv_release(void *unused)
{
    (void)unused;
    for (int i = 0; i < GC_CONV_SCRATCH_SLOTS; i++) {
        free(conv_buf[i]);
        conv_buf[i] = NULL;
        conv_cap[i] = 0;
    }
}

static void conv_key_init(void)
{
    pthread_key_create(&conv_key, conv_release);
}

void *gc_conv_scratch(int i, size_t bytes)
{
    if (bytes == 0)
        bytes = 64; /* zero input channels: empty columns, but NULL means a failed allocation */
    if (conv_cap[i] < bytes) {
        pthread_once(&conv_once, conv_key_init);
        if (!pthread_getspecific(conv_key))
            pthread_setspecific(conv_key, (void *)1); /* non-NULL: the destructor runs at exit */
        free(conv_buf[i]);
        conv_buf[i] = NULL;
        conv_cap[i] = 0;
        if (posix_memalign(&conv_buf[i], 64, bytes) != 0) {
            conv_buf[i] = NULL;
            return NULL;
        }
        conv_cap[i] = bytes;
    }
    return conv_buf[i];
}

typedef struct {
    void *job;
    gc_conv_unit_fn unit;
    long nunits;
    size_t bytes;
    int slot;
    gc_conv_claim claim;
} conv_claim;

static void conv_claim_body(void *ctx, int slot)
{
    (void)slot;
    conv_claim *C = (conv_claim *)ctx;
    void *t = C->slot >= 0 ? gc_conv_scratch(C->slot, C->bytes) : NULL;
    long prev = -1;
    for (long u; (u = gc_conv_next(&C->claim, C->nunits, C->slot >= 0 && !t)) >= 0;) {
        C->unit(C->job, t, u, prev);
        prev = u;
    }
}

int gc_conv_claim_units(void *job, long nunits, int nt, int slot, size_t bytes,
                        gc_conv_unit_fn unit)
{
    conv_claim C = {.job = job, .unit = unit, .nunits = nunits, .bytes = bytes, .slot = slot};
    return gc_conv_run(&C.claim, conv_claim_body, &C, nt, nunits);
}

int gc_conv_weight_panels(const gc_conv_fwd *f, const float *w, const gc_packed *pw, int swap,
                          gc_packed *P, const float **panels)
{
    if (gc_gemm_pack_init(P, 'f', 0, f->o, f->ck, 0, swap) < 0)
        return -1;
    if (pw) {
        if (!(pw->kind == 'f' && pw->side == 0 && pw->swap == P->swap && pw->trans == 0 &&
              pw->data && pw->isa == gc_isa.isa && pw->w == P->w && pw->kc == P->kc &&
              pw->f == P->f && pw->k == P->k))
            return 1;
        *panels = (const float *)pw->data;
        return 0;
    }
    P->data = gc_conv_scratch(4, sizeof(float) * (size_t)P->elems);
    if (!P->data)
        return -1;
    gc_gemm_pack_f32(w, P);
    *panels = (const float *)P->data;
    return 0;
}

/* Whether the GEMM path's weight gradient runs transposed, gw^T [CK, O] = col @ g^T, its rows
 * the taps and its columns the output channels: when that fills the GEMM's MR x NR register
 * tiles with fewer wasted cells than gw [O, CK] (AVX-512's 14 x 32, the train.py CNN's 16 -> 32
 * layer, ck = 144, o = 32: 154 x 32 cells against 42 x 160; one thread 20 against 30 us an
 * image).  A tie keeps gw, and so do fewer than 25 taps: gemm.c takes up to 16 / 24 rows by its
 * small-M path, other sums, while with more rows both orientations run the blocked kernel's FMA
 * chains, each element the same bits (the direct kernel's too).  The partials are then
 * transposed once, in the final sum. */
static int conv_gw_transposed(char kind, ptrdiff_t o, ptrdiff_t ck)
{
    const gc_blocking *b = kind == 'f' ? &gc_blk_f32 : &gc_blk_f64;
    const ptrdiff_t mr = b->mr, nr = b->nr;
#define GC_CELLS(m, n) ((double)(((m) + mr - 1) / mr * mr) * (double)(((n) + nr - 1) / nr * nr))
    const int t = ck > 24 && GC_CELLS(ck, o) < GC_CELLS(o, ck);
#undef GC_CELLS
    return t;
}

#define GC_T float
#define GC_SFX f32
#include "conv.c"
#undef GC_T
#undef GC_SFX

#define GC_T double
#define GC_SFX f64
#include "conv.c"
#undef GC_T
#undef GC_SFX

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *x, *w, *bias, *g;
    const GC_T *res; /* forward: the residual added before relu (gc_epi), or NULL */
    int relu;
    GC_T *out, *gx, *gw, *gb; /* gw, gb: per-chunk partials [nchunks, O*CK] / [nchunks, O] */
    gc_conv p1;               /* geometry of one image (n = 1) */
    const gc_packed *pw;      /* forward: the weight pre-packed (side A), or NULL */
    ptrdiff_t o, ck, l, nimg, nchunks, chunk;
    int one; /* forward: a 1x1 convolution with stride 1 and no padding (a plain GEMM) */
    int gwt; /* backward: the gw partials are gw^T [CK, O] (conv_gw_transposed) */
    gc_conv_claim claim;
} GC_FN(conv_job);

static void GC_FN(conv_fwd_body)(void *ctx, int slot)
{
    (void)slot;
    GC_FN(conv_job) *J = (GC_FN(conv_job) *)ctx;
    const ptrdiff_t xs = J->p1.c * J->p1.h * J->p1.w, os = J->o * J->l;
    /* A pre-packed weight: the columns go straight into the panels of the GEMM's other
     * operand (the layout gemm would pack col into), no col buffer. */
    gc_packed cp;
    gc_im2col_src src = {.p = &J->p1};
    GC_T *col = NULL;
    if (J->one) { /* 1x1, stride 1, no padding: the image [c, h*w] is the column matrix */
    } else if (J->pw) { /* a virtual operand: its panels made where the GEMM packs them (in L2) */
        gc_gemm_pack_init(&cp, sizeof(GC_T) == 4 ? 'f' : 'd', 1, J->ck, J->l, 0, J->pw->swap);
        cp.fill = GC_FN(gc_im2col_fill);
        cp.fill_ctx = &src;
        src.w = cp.w;
    } else {
        col = (GC_T *)gc_conv_scratch(0, sizeof(GC_T) * (size_t)(J->ck * J->l));
    }
    for (long b; (b = gc_conv_next(&J->claim, J->nimg, !J->one && !J->pw && !col)) >= 0;) {
        GC_T *o = J->out + b * os;
        /* bias (per output channel: a row of out[b]), residual and relu in the GEMM's tiles */
        const gc_epi e = {.rb = J->bias, .res = J->res ? J->res + b * os : NULL, .relu = J->relu};
        const gc_epi *ep = e.rb || e.res || e.relu ? &e : NULL;
        int rc;
        if (J->one) {
            const GC_T *xb = J->x + b * xs;
            rc = GC_FN(gc_gemm_pxe)(J->pw ? NULL : J->w, J->pw, xb, NULL, o, J->o, J->l, J->ck, 0,
                                    0, 0, ep);
        } else if (J->pw) {
            src.x = J->x + b * xs;
            rc = GC_FN(gc_gemm_pxe)(NULL, J->pw, NULL, &cp, o, J->o, J->l, J->ck, 0, 0, 0, ep);
        } else {
            GC_FN(gc_im2col)(J->x + b * xs, col, &J->p1);
            rc = GC_FN(gc_gemm_pxe)(J->w, NULL, col, NULL, o, J->o, J->l, J->ck, 0, 0, 0, ep);
        }
        if (rc < 0)
            atomic_store(&J->claim.failed, 1);
    }
}

/* sum of r[0..n) in GC_CONV_LANES interleaved partial sums added pairwise at the end: vector
 * adds instead of one dependent scalar add per element (the bias gradient of the train.py CNN's
 * 1 -> 16 layer, 64 x 16 x 784 values, was over half of its backward, AVX-512 one thread); the
 * order depends on n alone (no ISA, no thread count); conv_direct_backward.c sums with the
 * float32 one (conv_bwd.h), so float32 bias gradients have the same bits on both paths. */
#define GC_CONV_LANES 8
GC_T GC_FN(gc_conv_rowsum)(const GC_T *r, ptrdiff_t n)
{
    GC_T acc[GC_CONV_LANES] = {0};
    ptrdiff_t j = 0;
    for (; j + GC_CONV_LANES <= n; j += GC_CONV_LANES)
        for (int k = 0; k < GC_CONV_LANES; k++)
            acc[k] += r[j + k];
    for (int k = 0; j < n; j++, k++)
        acc[k] += r[j];
    for (int w = GC_CONV_LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            acc[k] += acc[k + w];
    return acc[0];
}

static void GC_FN(conv_bwd_body)(void *ctx, int slot)
{
    (void)slot;
    GC_FN(conv_job) *J = (GC_FN(conv_job) *)ctx;
    const ptrdiff_t xs = J->p1.c * J->p1.h * J->p1.w, gs = J->o * J->l;
    const size_t cbytes = sizeof(GC_T) * (size_t)(J->ck * J->l);
    GC_T *col = J->gw ? (GC_T *)gc_conv_scratch(0, cbytes) : NULL;
    GC_T *gcol = J->gx ? (GC_T *)gc_conv_scratch(1, cbytes) : NULL;
    const int bad = (J->gw && !col) || (J->gx && !gcol);
    for (long ch; (ch = gc_conv_next(&J->claim, J->nchunks, bad)) >= 0;) {
        ptrdiff_t b0, b1;
        GC_T *gb = (GC_T *)gc_conv_bwd_chunk(ch, J->chunk, J->nimg, J->gb, J->o, sizeof(GC_T),
                                             &b0, &b1);
        GC_T *gw = J->gw ? J->gw + ch * J->o * J->ck : NULL;
        for (ptrdiff_t b = b0; b < b1; b++) {
            const GC_T *g = J->g + b * gs;
            if (gw) {
                GC_FN(gc_im2col)(J->x + b * xs, col, &J->p1);
                /* gw (+)= g [O, L] @ col^T (col stored [CK, L]), or its transpose
                 * gw^T (+)= col @ g^T (gemm_pxe: the bits conv_direct_backward.c gives) */
                const GC_T beta = b == b0 ? (GC_T)0 : (GC_T)1;
                if ((J->gwt ? GC_FN(gc_gemm_pxe)(col, NULL, g, NULL, gw, J->ck, J->o, J->l, 0, 1,
                                                 beta, NULL)
                            : GC_FN(gc_gemm_pxe)(g, NULL, col, NULL, gw, J->o, J->ck, J->l, 0, 1,
                                                 beta, NULL)) < 0)
                    atomic_store(&J->claim.failed, 1);
            }
            if (gb)
                for (ptrdiff_t i = 0; i < J->o; i++)
                    gb[i] += GC_FN(gc_conv_rowsum)(g + i * J->l, J->l);
            if (gcol) {
                /* gcol [CK, L] = W^T (W stored [O, CK]) @ g [O, L] */
                if (GC_FN(gc_gemm_pxe)(J->w, NULL, g, NULL, gcol, J->ck, J->l, J->o, 1, 0, 0,
                                       NULL) < 0)
                    atomic_store(&J->claim.failed, 1);
                GC_FN(gc_col2im)(gcol, J->gx + b * xs, &J->p1);
            }
        }
    }
}

/* The fields forward and backward share: inputs, one image's geometry, the GEMM sizes. */
static void GC_FN(conv_job_init)(GC_FN(conv_job) *J, const GC_T *x, const GC_T *w,
                                 const gc_conv *p, ptrdiff_t o)
{
    memset(J, 0, sizeof *J);
    J->x = x;
    J->w = w;
    J->p1 = *p;
    J->p1.n = 1;
    J->o = o;
    J->ck = p->c * p->kh * p->kw;
    J->l = p->oh * p->ow;
    J->nimg = p->n;
}

/* Images per thread worth a region: below this much work a call stays on one thread. */
static int GC_FN(conv_threads)(const gc_conv *p, ptrdiff_t o, ptrdiff_t units)
{
    const double flops = 2.0 * (double)p->n * (double)o * (double)(p->c * p->kh * p->kw) *
                         (double)(p->oh * p->ow);
    int nt = gc_threads_for(flops, 0.25e6);
    return nt < units ? nt : (int)units;
}

int GC_FN(gc_conv2d_forward_ex)(const GC_T *x, const GC_T *w, const gc_packed *pw,
                                const GC_T *bias, const GC_T *res, int relu, GC_T *out,
                                const gc_conv *p, ptrdiff_t o)
{
    const gc_epi fe = {.res = res, .relu = relu}; /* the float32 paths' (bias apart) */
    const gc_epi *fep = res || relu ? &fe : NULL;
    if (sizeof(GC_T) == 4 && ((pw && pw->swap == 2) || gc_conv2d_winograd_use(p, o))) {
        if (gc_conv_input_finite((const float *)x, p->n * p->c * p->h * p->w))
            return gc_conv2d_winograd_f32((const float *)x, (const float *)w, pw,
                                          (const float *)bias, fep, (float *)out, p, o);
        /* an inf or NaN: the direct / im2col paths keep it in the outputs that read it */
        if (pw && pw->swap == 2) {
            if (!gc_conv2d_winograd_fits(p, o) || pw->rows != o || pw->cols != p->c * 9)
                return -1;
            w = (const GC_T *)gc_winograd_raw(pw);
            pw = NULL;
        }
    }
    if (sizeof(GC_T) == 4 && !pw && gc_conv2d_c1_use(p, o)) /* few input channels (conv_c1.c) */
        return gc_conv2d_c1_f32((const float *)x, (const float *)w, (const float *)bias, fep,
                                (float *)out, p, o);
    if (sizeof(GC_T) == 4 && gc_conv2d_pw_use(p, o)) { /* 1x1 without padding (conv_pw.c) */
        const int rc = gc_conv2d_pw_f32((const float *)x, (const float *)w, pw,
                                        (const float *)bias, fep, (float *)out, p, o);
        if (rc != 1)
            return rc;
    }
    if (sizeof(GC_T) == 4 && gc_conv2d_direct_use(p, o)) {
        if (gc_conv2d_dlanes_use(p, o)) { /* few input channels (conv_direct_lanes.c) */
            const int rc = gc_conv2d_dlanes_f32((const float *)x, (const float *)w, pw,
                                                (const float *)bias, fep, (float *)out, p, o);
            if (rc != 1)
                return rc;
        }
        return gc_conv2d_direct_f32((const float *)x, (const float *)w, pw, (const float *)bias,
                                    fep, (float *)out, p, o);
    }
    GC_FN(conv_job) J;
    GC_FN(conv_job_init)(&J, x, w, p, o);
    J.one = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 && p->pw == 0;
    J.pw = pw;
    J.bias = bias;
    J.res = res;
    J.relu = relu;
    J.out = out;
    if (J.nimg <= 0 || o <= 0)
        return 0;
    return gc_conv_run(&J.claim, GC_FN(conv_fwd_body), &J, GC_FN(conv_threads)(p, o, p->n),
                       (long)p->n);
}

int GC_FN(gc_conv2d_forward_px)(const GC_T *x, const GC_T *w, const gc_packed *pw,
                                const GC_T *bias, GC_T *out, const gc_conv *p, ptrdiff_t o)
{
    return GC_FN(gc_conv2d_forward_ex)(x, w, pw, bias, NULL, 0, out, p, o);
}

int GC_FN(gc_conv2d_forward)(const GC_T *x, const GC_T *w, const GC_T *bias, GC_T *out,
                             const gc_conv *p, ptrdiff_t o)
{
    return GC_FN(gc_conv2d_forward_px)(x, w, NULL, bias, out, p, o);
}

int GC_FN(gc_conv2d_backward)(const GC_T *x, const GC_T *w, const GC_T *g, GC_T *gx, GC_T *gw,
                              GC_T *gb, const gc_conv *p, ptrdiff_t o)
{
    GC_FN(conv_job) J;
    GC_FN(conv_job_init)(&J, x, w, p, o);
    J.g = g;
    J.gx = gx;
    J.chunk = GC_CONV_CHUNK;
    if (p->n > GC_CONV_CHUNK * GC_CONV_MAX_CHUNKS)
        J.chunk = (p->n + GC_CONV_MAX_CHUNKS - 1) / GC_CONV_MAX_CHUNKS;
    J.nchunks = (p->n + J.chunk - 1) / J.chunk;
    /* no images or no outputs: zero gradients. No input channels (ck == 0) runs on: the bias
     * gradient still sums g (the column buffers are empty, conv_scratch gives them room). */
    if (J.nimg <= 0 || o <= 0) {
        if (gw)
            memset(gw, 0, sizeof(GC_T) * (size_t)(o * J.ck));
        if (gb)
            memset(gb, 0, sizeof(GC_T) * (size_t)o);
        if (gx)
            memset(gx, 0, sizeof(GC_T) * (size_t)(p->n * p->c * p->h * p->w));
        return 0;
    }
    /* per-chunk partials on the calling thread's buffer (workers use buffers 0 and 1) */
    const ptrdiff_t pw = gw ? J.nchunks * o * J.ck : 0, pb = gb ? J.nchunks * o : 0;
    GC_T *part = NULL;
    if (pw + pb) {
        part = (GC_T *)gc_conv_scratch(2, sizeof(GC_T) * (size_t)(pw + pb));
        if (!part)
            return -1;
    }
    /* float32: the direct kernel takes the weight (and bias) gradient and / or the input
     * gradient, each by its own rule (conv_direct.c); the GEMM path the rest.  Both write the
     * same partials (gw's at part, gb's after them) and sum bias rows in the same order. */
    /* a stride-1 weight gradient of few taps (the CNN's 1 -> 16 layer; the rule is
     * conv_wtaps.c's): there, with the bias gradient in the same pass over g */
    const int tw = sizeof(GC_T) == 4 && gw && gc_conv2d_wtaps_use(p, o);
    if (tw && gc_conv2d_wtaps_f32((const float *)x, (const float *)g, (float *)gw, (float *)gb,
                                  p, o, J.chunk, J.nchunks, (float *)part) < 0)
        return -1;
    const int dw = sizeof(GC_T) == 4 && gw && !tw && gc_conv2d_direct_backward_use(p, o, 0);
    const int dx = sizeof(GC_T) == 4 && gx && gc_conv2d_direct_backward_use(p, o, 1);
    if ((dw || dx) &&
        gc_conv2d_direct_backward_f32((const float *)x, (const float *)w, (const float *)g,
                                      dx ? (float *)gx : NULL, dw ? (float *)gw : NULL,
                                      dw ? (float *)gb : NULL, p, o, J.chunk, J.nchunks,
                                      (float *)part) < 0)
        return -1;
    J.gx = dx ? NULL : gx;
    J.gw = gw && !dw && !tw ? part : NULL;
    J.gwt = J.gw && conv_gw_transposed(sizeof(GC_T) == 4 ? 'f' : 'd', o, J.ck);
    J.gb = gb && !dw && !tw ? part + pw : NULL;
    if ((J.gx || J.gw || J.gb) &&
        gc_conv_run(&J.claim, GC_FN(conv_bwd_body), &J, GC_FN(conv_threads)(p, o, J.nchunks),
                    (long)J.nchunks) < 0)
        return -1;
    J.gw = gw ? part : NULL;
    J.gb = gb ? part + pw : NULL;
    if (gw && J.gwt) { /* partials [CK, O]: summed in chunk order, stored transposed */
        const ptrdiff_t sz = o * J.ck;
        for (ptrdiff_t i = 0; i < J.ck; i++)
            for (ptrdiff_t j = 0; j < o; j++) {
                GC_T s = J.gw[i * o + j];
                for (ptrdiff_t ch = 1; ch < J.nchunks; ch++)
                    s += J.gw[ch * sz + i * o + j];
                gw[j * J.ck + i] = s;
            }
    } else if (gw) {
        const ptrdiff_t sz = o * J.ck;
        memcpy(gw, J.gw, sizeof(GC_T) * (size_t)sz);
        for (ptrdiff_t ch = 1; ch < J.nchunks; ch++) {
            const GC_T *s = J.gw + ch * sz;
            for (ptrdiff_t i = 0; i < sz; i++)
                gw[i] += s[i];
        }
    }
    if (gb) {
        memcpy(gb, J.gb, sizeof(GC_T) * (size_t)o);
        for (ptrdiff_t ch = 1; ch < J.nchunks; ch++)
            for (ptrdiff_t i = 0; i < o; i++)
                gb[i] += J.gb[ch * o + i];
    }
    return 0;
}

#endif
