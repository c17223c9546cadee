/* The bfloat16 GEMM (contract in gemm_bf16.h): bf16 operands, float32 sums by the AVX-512 BF16
 * dot product, float32 or bf16 output.  gemm.c's BLIS structure with pairs of k as the unit:
 *
 *   for each group of items (all of them when B is broadcast, sb == 0; else as many as keep
 *   the packed B under BF_GROUP_BYTES, at least one):
 *   pack the group's B items once (shared by the threads): NR-column panels, pair words
 *   for each unit (<= 112 rows x 512 columns of one item), claimed by the pool's threads:
 *     for pc in K by 256 pairs:            A block packed per unit (MR-row panels, pair words)
 *       for ir over the unit's MR panels:    the A micro-panel (14 KB) stays in L1
 *         for jr over its NR panels:           micro-kernel: MR x NR float32 sums (from L2)
 *     epilogue per row: + bias, stored as float32 or rounded once to bf16
 *
 * The micro-kernel continues each element's chain across K blocks (it loads the sums back), so
 * an element's value depends on k alone: any unit split, K blocking or thread count gives the
 * same bits.  Products with at most 8 rows of A and a Linear weight as B (stored n x k) read B in
 * place instead (the ISA's dot form: packing B would cost as much as the product), one element
 * per 16 lanes of pairs, also the same for any split.  Only the micro-kernels are ISA-specific
 * (isa/bf16.h, AVX-512 BF16); on any other CPU gc_bf16_kernel() is NULL and the caller keeps the
 * float32 path. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "isa.h"

#define BF_MR GC_BF16_MR
#define BF_NR GC_BF16_NR
/* K block in pairs: the A micro-panel (MR x 256 words, 14 KB) in half of a 32 KB L1 */
#define BF_KCP 256
/* unit columns: the B block (256 pairs x 512 columns, 512 KB) and the unit's float32 sums
 * (112 x 512, 224 KB) share a 1 MB L2 with the packed A block (112 KB); A is packed once per
 * unit and K block, so wider units pack it fewer times (256 columns had cost ~5% more) */
#define BF_NC 512
#define BF_MC_MAX 112

static gc_bf16_kernels bf_k;
static pthread_once_t bf_once = PTHREAD_ONCE_INIT;

static void bf_select(void)
{
    memset(&bf_k, 0, sizeof bf_k);
#if defined(GC_X86_ISA) && (defined(__x86_64__) || defined(_M_X64))
    if (gc_isa.isa == GC_ISA_AVX512)
        gc_bf16_fill_avx512(&bf_k);
#endif
}

gc_bf16_ukr gc_bf16_kernel(const char **name)
{
    pthread_once(&bf_once, bf_select);
    if (name)
        *name = bf_k.ukr ? bf_k.name : NULL;
    return bf_k.ukr;
}

/* float32 -> bf16 bits, round to nearest even; NaN keeps its top bits with the quiet bit set
 * (gpucore.dtypes.f32_to_bf16's rule; denormals rounded exactly, no flushing) */
static inline uint16_t bf_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* The packed B of the last call is kept for the next one (one block, under a lock; a
 * concurrent call allocates its own): fresh pages fault in at ~2 us per 4 KiB, ~3% of a 2048^3
 * product's time.  Only blocks up to BF_KEEP_MAX are kept (a 2048 x 2048 B is 8 MiB): a larger
 * one is freed at once, so one big product does not hold its memory for the process's life. */
#define BF_KEEP_MAX ((size_t)8 << 20)
/* A batched B (sb != 0) is packed a group of items at a time, the group's packed B at most this
 * (or one item): n = 1 items pad to a 32-column panel each, 32x their size, so packing a whole
 * batch at once could take far more memory than the operands. */
#define BF_GROUP_BYTES ((size_t)4 << 20)
static pthread_mutex_t bf_keep_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *bf_keep;
static size_t bf_keep_bytes;

static uint32_t *bf_take(size_t bytes, size_t *got)
{
    pthread_mutex_lock(&bf_keep_lock);
    uint32_t *p = bf_keep;
    size_t have = bf_keep_bytes;
    bf_keep = NULL;
    bf_keep_bytes = 0;
    pthread_mutex_unlock(&bf_keep_lock);
    if (p && have >= bytes) {
        *got = have;
        return p;
    }
    free(p);
    *got = (bytes + 63) / 64 * 64;
    return (uint32_t *)aligned_alloc(64, *got);
}

static void bf_give(uint32_t *p, size_t bytes)
{
    if (bytes > BF_KEEP_MAX) {
        free(p);
        return;
    }
    pthread_mutex_lock(&bf_keep_lock);
    if (bf_keep_bytes > bytes) { /* keep the larger block */
        pthread_mutex_unlock(&bf_keep_lock);
        free(p);
        return;
    }
    uint32_t *old = bf_keep;
    bf_keep = p;
    bf_keep_bytes = bytes;
    pthread_mutex_unlock(&bf_keep_lock);
    free(old);
}

typedef struct {
    const uint16_t *a, *b;
    char *c;
    ptrdiff_t m, n, k, kp, sa, sb, sc;
    int trans_a, trans_b, out_bf16, bias_rows;
    const float *bias;
    gc_bf16_ukr ukr;
    uint32_t *bp;             /* packed B: items x npan panels x kp pairs x NR words */
    ptrdiff_t npan, nbitems;  /* panels per item, packed items (1 when sb == 0) */
    ptrdiff_t mc, nib, njc, units;
    atomic_int failed;
    _Alignas(64) atomic_long next;
} bf_job;

/* Panels [lo, hi) of the packed B (across items). */
static void bf_pack_b(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const bf_job *J = (const bf_job *)ctx;
    const ptrdiff_t k = J->k, n = J->n, kp = J->kp;
    for (ptrdiff_t u = lo; u < hi; u++) {
        const ptrdiff_t item = u / J->npan, jp = u % J->npan;
        const uint16_t *b = J->b + item * J->sb;
        uint32_t *restrict d = J->bp + u * kp * BF_NR;
        const ptrdiff_t j0 = jp * BF_NR, nv = n - j0 < BF_NR ? n - j0 : BF_NR;
        if (nv < BF_NR)
            memset(d, 0, sizeof(uint32_t) * (size_t)(kp * BF_NR));
        if (J->trans_b) { /* B stored n x k: a column of op(B) is a row, its pairs adjacent */
            /* 16 pairs (one cache line) of each of the panel's rows into a small block, then
             * out as 16 full rows of the panel: one pass over B, every store contiguous (a
             * row at a time through the panel had cost ~4x more) */
            const ptrdiff_t kfull = k / 2;
            uint32_t t[BF_NR][16];
            ptrdiff_t q0 = 0;
            if (nv == BF_NR && bf_k.pack_bt && kfull >= 16) {
                bf_k.pack_bt(b + j0 * k, k, kfull / 16, d);
                q0 = kfull / 16 * 16;
            }
            for (; q0 + 16 <= kfull; q0 += 16) {
                for (ptrdiff_t j = 0; j < nv; j++)
                    memcpy(t[j], b + (j0 + j) * k + 2 * q0, sizeof t[j]); /* (2q, 2q+1) LE */
                for (ptrdiff_t q = 0; q < 16; q++) {
                    uint32_t *restrict o = d + (q0 + q) * BF_NR;
                    for (ptrdiff_t j = 0; j < nv; j++)
                        o[j] = t[j][q];
                }
            }
            for (ptrdiff_t j = 0; j < nv; j++) {
                const uint16_t *restrict r = b + (j0 + j) * k;
                for (ptrdiff_t q = q0; q < kfull; q++) {
                    uint32_t w;
                    memcpy(&w, r + 2 * q, 4);
                    d[q * BF_NR + j] = w;
                }
                if (kfull < kp)
                    d[kfull * BF_NR + j] = r[2 * kfull]; /* odd k: the last pair (k - 1, 0) */
            }
        } else { /* B stored k x n: two rows interleaved */
            for (ptrdiff_t q = 0; q < kp; q++) {
                const uint16_t *restrict r0 = b + 2 * q * n + j0;
                uint32_t *restrict o = d + q * BF_NR;
                if (2 * q + 1 < k) {
                    const uint16_t *restrict r1 = r0 + n;
                    for (ptrdiff_t j = 0; j < nv; j++)
                        o[j] = (uint32_t)r0[j] | (uint32_t)r1[j] << 16;
                } else {
                    for (ptrdiff_t j = 0; j < nv; j++)
                        o[j] = r0[j];
                }
            }
        }
    }
}

/* Rows [i0, i0 + mc) and pairs [pc, pc + kb) of A_item into MR-row panels (zero past m, k). */
static void bf_pack_a(const bf_job *J, const uint16_t *a, ptrdiff_t i0, ptrdiff_t mc,
                      ptrdiff_t pc, ptrdiff_t kb, uint32_t *restrict d)
{
    const ptrdiff_t k = J->k, m = J->m;
    const ptrdiff_t mcp = (mc + BF_MR - 1) / BF_MR * BF_MR;
    if (mcp > mc || 2 * (pc + kb) > k)
        memset(d, 0, sizeof(uint32_t) * (size_t)(mcp * kb));
    if (!J->trans_a) { /* row-major m x k: a row's pairs adjacent */
        for (ptrdiff_t i = 0; i < mc; i++) {
            const uint16_t *restrict r = a + (i0 + i) * k;
            uint32_t *restrict o = d + (i / BF_MR) * kb * BF_MR + i % BF_MR;
            const ptrdiff_t qf = (k / 2 - pc) < kb ? k / 2 - pc : kb; /* full pairs */
            for (ptrdiff_t q = 0; q < qf; q++) {
                uint32_t w;
                memcpy(&w, r + 2 * (pc + q), 4); /* little-endian: (2q, 2q + 1) */
                o[q * BF_MR] = w;
            }
            if (qf < kb)
                o[qf * BF_MR] = r[2 * (pc + qf)]; /* odd k: the last pair (k - 1, 0) */
        }
    } else { /* stored k x m: two rows of the storage interleaved per pair */
        for (ptrdiff_t q = 0; q < kb; q++) {
            const ptrdiff_t p = 2 * (pc + q);
            if (p >= k)
                break;
            const uint16_t *restrict r0 = a + p * m + i0;
            const uint16_t *restrict r1 = p + 1 < k ? r0 + m : NULL;
            for (ptrdiff_t i = 0; i < mc; i++)
                d[(i / BF_MR) * kb * BF_MR + q * BF_MR + i % BF_MR] =
                    (uint32_t)r0[i] | (r1 ? (uint32_t)r1[i] << 16 : 0u);
        }
    }
}

/* Row i, columns [j0, j0 + nc) of C_item from its float32 sums s: + bias, then stored as
 * float32 or rounded once to bf16. */
static void bf_epi_row(const bf_job *J, float *restrict s, ptrdiff_t nc, ptrdiff_t item,
                       ptrdiff_t i, ptrdiff_t j0)
{
    if (J->bias && !J->bias_rows) {
        const float *restrict bias = J->bias + j0;
        for (ptrdiff_t j = 0; j < nc; j++)
            s[j] = s[j] + bias[j];
    } else if (J->bias) {
        const float bi = J->bias[i];
        for (ptrdiff_t j = 0; j < nc; j++)
            s[j] = s[j] + bi;
    }
    const ptrdiff_t off = item * J->sc + i * J->n + j0;
    if (J->out_bf16) {
        uint16_t *restrict o = (uint16_t *)J->c + off;
        for (ptrdiff_t j = 0; j < nc; j++)
            o[j] = bf_round(s[j]);
    } else {
        memcpy((float *)J->c + off, s, sizeof(float) * (size_t)nc);
    }
}

static void bf_unit(const bf_job *J, long u, uint32_t *ablk, float *acc)
{
    const ptrdiff_t per_item = J->nib * J->njc;
    const ptrdiff_t item = u / per_item, r = u % per_item;
    const ptrdiff_t i0 = (r / J->njc) * J->mc, j0 = (r % J->njc) * BF_NC;
    const ptrdiff_t mc = J->m - i0 < J->mc ? J->m - i0 : J->mc;
    const ptrdiff_t nc = J->n - j0 < BF_NC ? J->n - j0 : BF_NC;
    const ptrdiff_t kp = J->kp;
    const uint16_t *a = J->a + item * J->sa;
    const uint32_t *bp = J->bp + (J->nbitems > 1 ? item : 0) * J->npan * kp * BF_NR;
    if (kp == 0)
        for (ptrdiff_t i = 0; i < mc; i++)
            memset(acc + i * BF_NC, 0, sizeof(float) * (size_t)nc);
    for (ptrdiff_t pc = 0; pc < kp; pc += BF_KCP) {
        const ptrdiff_t kb = kp - pc < BF_KCP ? kp - pc : BF_KCP;
        bf_pack_a(J, a, i0, mc, pc, kb, ablk);
        for (ptrdiff_t ir = 0; ir < mc; ir += BF_MR) {
            const uint32_t *ap = ablk + (ir / BF_MR) * kb * BF_MR;
            for (ptrdiff_t jr = 0; jr < nc; jr += BF_NR)
                J->ukr(kb, ap, bp + ((j0 + jr) / BF_NR) * kp * BF_NR + pc * BF_NR,
                       acc + ir * BF_NC + jr, BF_NC, pc > 0);
        }
    }
    for (ptrdiff_t i = 0; i < mc; i++)
        bf_epi_row(J, acc + i * BF_NC, nc, item, i0 + i, j0);
}

static void bf_body(void *ctx, int slot)
{
    bf_job *J = (bf_job *)ctx;
    (void)slot;
    const size_t mcp = (size_t)((J->mc + BF_MR - 1) / BF_MR * BF_MR);
    const size_t a_bytes = sizeof(uint32_t) * mcp * BF_KCP;
    char *s = NULL;
    for (long u; (u = atomic_fetch_add_explicit(&J->next, 1, memory_order_relaxed)) < J->units;) {
        if (!s && !(s = (char *)gc_scratch(a_bytes + sizeof(float) * mcp * BF_NC))) {
            atomic_store_explicit(&J->failed, 1, memory_order_relaxed);
            return;
        }
        bf_unit(J, u, (uint32_t *)s, (float *)(s + a_bytes));
    }
}

/* The small-m form: chunks of 64 columns of every item, B (n x k) read in place. */
#define BF_DOT_NC 64
static void bf_dot_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const bf_job *J = (const bf_job *)ctx;
    const ptrdiff_t nch = (J->n + BF_DOT_NC - 1) / BF_DOT_NC;
    float buf[GC_BF16_DOT_M * BF_DOT_NC];
    for (ptrdiff_t u = lo; u < hi; u++) {
        const ptrdiff_t item = u / nch, j0 = (u % nch) * BF_DOT_NC;
        const ptrdiff_t nc = J->n - j0 < BF_DOT_NC ? J->n - j0 : BF_DOT_NC;
        bf_k.dot(J->m, nc, J->k, J->a + item * J->sa, J->k, J->b + item * J->sb + j0 * J->k,
                 J->k, buf, BF_DOT_NC);
        for (ptrdiff_t i = 0; i < J->m; i++)
            bf_epi_row(J, buf + i * BF_DOT_NC, nc, item, i, j0);
    }
}

/* Items [0, batch) of J (its a, b, c already at the group's first item): pack their B (when
 * repack; a broadcast B is packed once) and run their units. */
static int bf_run(bf_job *J, ptrdiff_t batch, ptrdiff_t nbitems, int repack)
{
    const ptrdiff_t m = J->m, n = J->n, k = J->k;
    J->nbitems = nbitems;
    const size_t bwords = (size_t)(nbitems * J->npan * J->kp * BF_NR);
    if (repack && bwords > 0)
        gc_parallel_range(nbitems * J->npan, 1, (double)bwords * 0.5, bf_pack_b, J);
    /* ~100 multiply-adds per ns and thread (one 512-bit vdpbf16ps per cycle is 32) */
    const double macs = (double)batch * (double)m * (double)n * (double)(k + 16);
    int nt = gc_threads_for(macs / 100.0, GC_GRAIN_NS);
    /* near-equal row blocks of at most BF_MC_MAX rows, at least two units per thread where the
     * rows allow it */
    J->njc = (n + BF_NC - 1) / BF_NC;
    ptrdiff_t nib = (m + BF_MC_MAX - 1) / BF_MC_MAX;
    if (nt > 1 && batch * nib * J->njc < 2 * nt) {
        const ptrdiff_t want = (2 * nt + batch * J->njc - 1) / (batch * J->njc);
        const ptrdiff_t most = (m + BF_MR - 1) / BF_MR;
        nib = want < most ? want : most;
    }
    J->mc = ((m + nib - 1) / nib + BF_MR - 1) / BF_MR * BF_MR;
    J->nib = (m + J->mc - 1) / J->mc;
    J->units = batch * J->nib * J->njc;
    atomic_store(&J->next, 0);
    atomic_store(&J->failed, 0);
    if (nt > J->units)
        nt = (int)J->units;
    gc_region(bf_body, J, nt);
    return atomic_load(&J->failed) ? -1 : 0;
}

int gc_gemm_bf16(const uint16_t *a, const uint16_t *b, void *c, int out_bf16, ptrdiff_t batch,
                 ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, ptrdiff_t sa,
                 ptrdiff_t sb, ptrdiff_t sc, const float *bias, int bias_rows)
{
    gc_bf16_ukr ukr = gc_bf16_kernel(NULL);
    if (!ukr)
        return -1;
    if (batch <= 0 || m <= 0 || n <= 0)
        return 0;
    bf_job J = {.a = a, .b = b, .c = (char *)c, .m = m, .n = n, .k = k, .kp = (k + 1) / 2,
                .sa = sa, .sb = sb, .sc = sc, .trans_a = trans_a, .trans_b = trans_b,
                .out_bf16 = out_bf16, .bias = bias, .bias_rows = bias_rows, .ukr = ukr};
    if (bf_k.dot && !trans_a && trans_b && m <= GC_BF16_DOT_M) {
        /* bound by reading B once: ~30 multiply-adds per ns and thread */
        const ptrdiff_t units = batch * ((n + BF_DOT_NC - 1) / BF_DOT_NC);
        gc_parallel_range(units, 1, (double)batch * (double)m * (double)n * (double)k / 30.0,
                          bf_dot_range, &J);
        return 0;
    }
    J.npan = (n + BF_NR - 1) / BF_NR;
    const size_t item_bytes = sizeof(uint32_t) * (size_t)(J.npan * J.kp * BF_NR);
    ptrdiff_t group = batch;
    if (sb != 0 && item_bytes > 0) {
        const size_t g = BF_GROUP_BYTES / item_bytes;
        group = g < 1 ? 1 : ((size_t)batch < g ? batch : (ptrdiff_t)g);
    }
    size_t bp_bytes = 0;
    if (item_bytes > 0) {
        J.bp = bf_take(item_bytes * (size_t)(sb == 0 ? 1 : group), &bp_bytes);
        if (!J.bp)
            return -1;
    }
    int failed = 0;
    for (ptrdiff_t g0 = 0; g0 < batch && !failed; g0 += group) {
        const ptrdiff_t gb = batch - g0 < group ? batch - g0 : group;
        J.a = a + g0 * sa;
        J.b = b + g0 * sb;
        J.c = (char *)c + (size_t)(g0 * sc) * (out_bf16 ? sizeof(uint16_t) : sizeof(float));
        failed = bf_run(&J, gb, sb == 0 ? 1 : gb, g0 == 0 || sb != 0);
    }
    if (J.bp)
        bf_give(J.bp, bp_bytes);
    return failed ? -1 : 0;
}


/* ------------------------------------------------------------------ conv2d forward (bf16) */
/* The column matrix of one chunk: at most this many bytes (and at least one row), so a large
 * batch does not build its whole column matrix at once. */
#define BF_COL_BYTES ((size_t)4 << 20)

typedef struct {
    const uint16_t *x, *xt; /* x (NCHW) and its NHWC copy */
    uint16_t *col, *tmp, *y, *xtw;
    ptrdiff_t c, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, o;
    ptrdiff_t r0, rows; /* the chunk: its first pixel row (over all images), its row count */
} bf_conv;

/* Input rows [lo, hi) (image * h + y) to NHWC: a pixel's channels adjacent, so a tap of the
 * column matrix is one copy of c values. */
static void bf_to_nhwc(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const bf_conv *P = (const bf_conv *)ctx;
    const ptrdiff_t c = P->c, h = P->h, wd = P->wd;
    for (ptrdiff_t r = lo; r < hi; r++) {
        const uint16_t *s = P->x + (r / h) * c * h * wd + (r % h) * wd;
        uint16_t *restrict d = P->xtw + r * wd * c;
        for (ptrdiff_t ci = 0; ci < c; ci++)
            for (ptrdiff_t xx = 0; xx < wd; xx++)
                d[xx * c + ci] = s[ci * h * wd + xx];
    }
}

/* Rows [lo, hi) of the chunk's column matrix (pixel rows r0 + lo ..), a row's taps in (ky, kx,
 * c) order (the weight is permuted to match): from the NHWC copy, c values per tap, a whole
 * kernel row of taps at once where they are adjacent (dw 1, inside the image). */
static void bf_im2col(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const bf_conv *P = (const bf_conv *)ctx;
    const ptrdiff_t hw = P->oh * P->ow, c = P->c, kw = P->kw, ck = c * P->kh * kw;
    const size_t tap = sizeof(uint16_t) * (size_t)c;
    for (ptrdiff_t r = lo; r < hi; r++) {
        const ptrdiff_t g = P->r0 + r, img = g / hw, p = g % hw;
        const ptrdiff_t y0 = (p / P->ow) * P->sh - P->ph, x0 = (p % P->ow) * P->sw - P->pw;
        const ptrdiff_t x1 = x0 + (kw - 1) * P->dw;
        uint16_t *restrict d = P->col + r * ck;
        for (ptrdiff_t ky = 0; ky < P->kh; ky++, d += kw * c) {
            const ptrdiff_t iy = y0 + ky * P->dh;
            if (iy < 0 || iy >= P->h) {
                memset(d, 0, tap * (size_t)kw); /* bf16 +0 */
                continue;
            }
            const uint16_t *row = P->xt + (img * P->h + iy) * P->wd * c;
            if (P->dw == 1 && x0 >= 0 && x1 < P->wd) {
                memcpy(d, row + x0 * c, tap * (size_t)kw);
                continue;
            }
            for (ptrdiff_t kx = 0; kx < kw; kx++) {
                const ptrdiff_t ix = x0 + kx * P->dw;
                if (ix >= 0 && ix < P->wd)
                    memcpy(d + kx * c, row + ix * c, tap);
                else
                    memset(d + kx * c, 0, tap);
            }
        }
    }
}

/* Blocks of 64 chunk rows [lo, hi): the chunk's [rows, o] result to y [n, o, oh*ow]. */
static void bf_to_nchw(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const bf_conv *P = (const bf_conv *)ctx;
    const ptrdiff_t hw = P->oh * P->ow, o = P->o;
    ptrdiff_t base[64];
    for (ptrdiff_t blk = lo; blk < hi; blk++) {
        const ptrdiff_t q0 = blk * 64, nr = P->rows - q0 < 64 ? P->rows - q0 : 64;
        for (ptrdiff_t q = 0; q < nr; q++) {
            const ptrdiff_t g = P->r0 + q0 + q;
            base[q] = (g / hw) * o * hw + g % hw; /* y[img, 0, pixel] */
        }
        const uint16_t *t = P->tmp + q0 * o;
        for (ptrdiff_t j = 0; j < o; j++)
            for (ptrdiff_t q = 0; q < nr; q++)
                P->y[base[q] + j * hw] = t[q * o + j];
    }
}

int gc_conv2d_bf16(const uint16_t *x, const uint16_t *w, const float *bias, uint16_t *y,
                   ptrdiff_t n, ptrdiff_t c, ptrdiff_t h, ptrdiff_t wd, ptrdiff_t kh, ptrdiff_t kw,
                   ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t ph, ptrdiff_t pw, ptrdiff_t dh,
                   ptrdiff_t dw, ptrdiff_t o)
{
    if (!gc_bf16_kernel(NULL))
        return -1;
    const ptrdiff_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1;
    const ptrdiff_t ow = (wd + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    if (n <= 0 || o <= 0 || oh <= 0 || ow <= 0)
        return 0;
    const ptrdiff_t ck = c * kh * kw, total = n * oh * ow;
    ptrdiff_t rows = (ptrdiff_t)(BF_COL_BYTES / sizeof(uint16_t)) / (ck > 0 ? ck : 1);
    rows = rows < 1 ? 1 : (rows > total ? total : rows);
    /* equal chunks: no short last one (m <= GC_BF16_DOT_M would take the dot form, whose sums
     * group differently), so every pixel gets the blocked form's bits where total > 8 */
    const ptrdiff_t nchunk = (total + rows - 1) / rows;
    rows = (total + nchunk - 1) / nchunk;
    const ptrdiff_t khw = kh * kw;
    uint16_t *col = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(rows * (ck > 0 ? ck : 1)));
    uint16_t *tmp = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(rows * o));
    uint16_t *xt = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(n * h * wd * (c > 0 ? c : 1)));
    uint16_t *wt = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(o * (ck > 0 ? ck : 1)));
    int rc = col && tmp && xt && wt ? 0 : -1;
    bf_conv P = {.x = x, .xt = xt, .xtw = xt, .col = col, .tmp = tmp, .y = y, .c = c, .h = h,
                 .wd = wd, .kh = kh, .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw, .dh = dh,
                 .dw = dw, .oh = oh, .ow = ow, .o = o};
    if (rc == 0 && ck > 0) {
        gc_parallel_range(n * h, 1, (double)(n * h * wd * c) * 0.5, bf_to_nhwc, &P);
        for (ptrdiff_t oi = 0; oi < o; oi++) /* w [o, c, kh, kw] -> [o, kh, kw, c] */
            for (ptrdiff_t ci = 0; ci < c; ci++)
                for (ptrdiff_t t = 0; t < khw; t++)
                    wt[oi * ck + t * c + ci] = w[oi * ck + ci * khw + t];
    }
    for (ptrdiff_t r0 = 0; r0 < total && rc == 0; r0 += rows) {
        P.r0 = r0;
        P.rows = total - r0 < rows ? total - r0 : rows;
        if (ck > 0)
            gc_parallel_range(P.rows, 1, (double)P.rows * (double)ck * 0.5, bf_im2col, &P);
        /* the chunk's pixels x o: column matrix [rows, ck] @ w^T (w stored o x ck), + bias[j]
         * per column j (output channel) */
        rc = gc_gemm_bf16(col, wt, tmp, 1, 1, P.rows, o, ck, 0, 1, 0, 0, 0, bias, 0);
        if (rc == 0)
            gc_parallel_range((P.rows + 63) / 64, 1, (double)P.rows * (double)o * 1.0,
                              bf_to_nchw, &P);
    }
    free(col);
    free(tmp);
    free(xt);
    free(wt);
    return rc;
}
