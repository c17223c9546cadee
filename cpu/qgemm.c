/* Int8 GEMM (u8s8 -> int32 -> int32 / float32 / requantized 8-bit), in the BLIS structure of
 * gemm.c: the weights are packed once (gc_qgemm_pack) into the micro-kernel's panels with their
 * column sums, the activations are read in place, and only the micro-kernel is per ISA (isa.h's
 * gc_qukr, cpu/isa/<isa>.c); the epilogue (isa/qgemm.h) is the same C in every ISA file.
 *
 *   for each unit (MC rows x NC columns of C), claimed by the pool's threads:
 *     for pc in K by kc:                    the packed K block (kc x nr panels, from L2)
 *       for jr over the unit's nr panels:
 *         for ir over its mr-row panels:      A rows read where they lie (the block in L2)
 *           micro-kernel: mr x nr int32 sums into the unit's accumulator block
 *     epilogue per row: zero point (colsum), scales, bias, relu, requantization
 *
 * The sums are exact integers, so any split over threads or K blocks gives the same bits; the
 * epilogue's float operations depend on the column only. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

/* rows (at most) and columns of a unit: the accumulator block (MC x NC int32, <= 96 KB) stays in
 * L2 */
#define Q_MC_ROWS 96
#define Q_NC_COLS 256
/* K block: an nr x kc panel of twice L1 (1024 with 32 KB and 64 columns), streamed from L2 while
 * the rows reuse it: measured ~4% faster than panels of half of L1 (fewer passes over the
 * accumulator block), the same from 2x to 4x */
static ptrdiff_t q_kc(int nr)
{
    ptrdiff_t kc = (ptrdiff_t)(gc_cache_info.l1d * 2 / nr) & ~(ptrdiff_t)7;
    return kc < 64 ? 64 : (kc > 2048 ? 2048 : kc);
}

int gc_qgemm_pack_init(gc_qpacked *p, ptrdiff_t k, ptrdiff_t n, int trans)
{
    memset(p, 0, sizeof *p);
    p->k = k;
    p->n = n;
    p->trans = trans;
    p->isa = gc_isa.isa;
    p->nr = gc_isa.q_nr;
    p->ku = gc_isa.q_ku;
    p->kp = (k + 7) / 8 * 8;
    p->kc = q_kc(p->nr);
    p->npan = (n + p->nr - 1) / p->nr;
    if (k > GC_QGEMM_MAX_K || p->npan > PTRDIFF_MAX / 4 / p->nr / (p->kp + 64))
        return -1;
    p->panel_bytes = (p->kp * p->npan * p->nr + 63) / 64 * 64;
    p->bytes = p->panel_bytes + 4 * p->npan * p->nr;
    return 0;
}

typedef struct {
    const int8_t *w;
    gc_qpacked *P;
} q_pack_job;

/* Panels [lo, hi): every K block of each, and its columns' sums. */
static void q_pack_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const q_pack_job *J = (const q_pack_job *)ctx;
    const gc_qpacked *P = J->P;
    const ptrdiff_t k = P->k, n = P->n, nr = P->nr, ku = P->ku;
    /* element (p, j) of B at w[p * sp + j * sj] */
    const ptrdiff_t sp = P->trans ? 1 : n, sj = P->trans ? k : 1;
    for (ptrdiff_t q = lo; q < hi; q++) {
        const ptrdiff_t j0 = q * nr, nv = n - j0 < nr ? n - j0 : nr;
        int32_t *cs = P->colsum + j0;
        for (ptrdiff_t j = 0; j < nr; j++)
            cs[j] = 0;
        for (ptrdiff_t pc = 0; pc < P->kp; pc += P->kc) {
            const ptrdiff_t kb = P->kp - pc < P->kc ? P->kp - pc : P->kc;
            int8_t *d = P->data + pc * P->npan * nr + q * nr * kb;
            memset(d, 0, (size_t)(nr * kb));
            const ptrdiff_t kv = k - pc < kb ? k - pc : kb;
            for (ptrdiff_t j = 0; j < nv; j++) {
                const int8_t *s = J->w + (j0 + j) * sj + pc * sp;
                int32_t sum = 0;
                for (ptrdiff_t p = 0; p < kv; p++) {
                    const int8_t x = s[p * sp];
                    d[(p / ku) * nr * ku + j * ku + p % ku] = x;
                    sum += x;
                }
                cs[j] += sum;
            }
        }
    }
}

void gc_qgemm_pack(const int8_t *w, gc_qpacked *p)
{
    p->colsum = (int32_t *)(p->data + p->panel_bytes);
    q_pack_job J = {.w = w, .P = p};
    gc_parallel_range(p->npan, 1, 2.0 * (double)(p->kp * p->npan * p->nr), q_pack_range, &J);
    p->full = p->k * p->n > 0 && memchr(w, 0x80, (size_t)(p->k * p->n)) != NULL;
}

typedef struct {
    const uint8_t *a;
    ptrdiff_t m, lda;
    const gc_qpacked *B;
    char *out;
    ptrdiff_t ldo, esz, mc, nc, njc, units;
    int a_signed;
    gc_qukr ukr;
    gc_qepi e;
    atomic_int failed;
    _Alignas(64) atomic_long next;
} q_job;

/* Unit (ic, jc): the sums of its rows x columns over every K block, then its output rows. */
static void q_unit(const q_job *J, ptrdiff_t ic, ptrdiff_t jc, int32_t *acc, uint8_t *tail)
{
    const gc_qpacked *B = J->B;
    const ptrdiff_t k = B->k, nr = B->nr, mr = gc_isa.q_mr, lda = J->lda;
    const ptrdiff_t mc = J->m - ic < J->mc ? J->m - ic : J->mc;
    const ptrdiff_t nc = B->n - jc < J->nc ? B->n - jc : J->nc;
    const ptrdiff_t ldc = J->nc, end = (J->m - 1) * lda + k; /* bytes of A readable */
    if (B->kp == 0)
        for (ptrdiff_t i = 0; i < mc; i++)
            memset(acc + i * ldc, 0, sizeof(int32_t) * (size_t)nc);
    for (ptrdiff_t pc = 0; pc < B->kp; pc += B->kc) {
        const ptrdiff_t kb = B->kp - pc < B->kc ? B->kp - pc : B->kc;
        /* the last K block reads up to 7 bytes past k: the panels from tail_ir on would pass the
         * end of A, so their rows are copied, zero-padded (the padding meets zero weights) */
        ptrdiff_t tail_ir = mc;
        if (pc + kb > k) {
            for (ptrdiff_t ir = 0; ir < mc; ir += mr) {
                const ptrdiff_t r1 = ic + (mc - ir < mr ? mc : ir + mr) - 1;
                if (r1 * lda + pc + kb > end) {
                    tail_ir = ir;
                    break;
                }
            }
            for (ptrdiff_t i = tail_ir; i < mc; i++) {
                uint8_t *d = tail + (i - tail_ir) * kb;
                memcpy(d, J->a + (ic + i) * lda + pc, (size_t)(k - pc));
                memset(d + (k - pc), 0, (size_t)(kb - (k - pc)));
            }
        }
        const int8_t *blk = B->data + pc * B->npan * nr;
        for (ptrdiff_t jr = 0; jr < nc; jr += nr) {
            const int8_t *bp = blk + ((jc + jr) / nr) * nr * kb;
            for (ptrdiff_t ir = 0; ir < mc; ir += mr) {
                const int rows = (int)(mc - ir < mr ? mc - ir : mr);
                const int t = ir >= tail_ir;
                const uint8_t *ap = t ? tail + (ir - tail_ir) * kb : J->a + (ic + ir) * lda + pc;
                J->ukr(rows, kb, ap, t ? kb : lda, bp, acc + ir * ldc + jr, ldc, pc > 0,
                       J->a_signed);
            }
        }
    }
    for (ptrdiff_t i = 0; i < mc; i++)
        gc_isa.q_epi(acc + i * ldc, nc, &J->e, jc, J->out + ((ic + i) * J->ldo + jc) * J->esz);
}

static void q_body(void *ctx, int slot)
{
    q_job *J = (q_job *)ctx;
    (void)slot;
    const size_t acc_bytes = sizeof(int32_t) * (size_t)(J->mc * J->nc);
    char *s = NULL;
    for (long u; (u = atomic_fetch_add_explicit(&J->next, 1, memory_order_relaxed)) < J->units;) {
        if (!s && !(s = (char *)gc_scratch(acc_bytes + (size_t)((gc_isa.q_mr + 8) * J->B->kc)))) {
            atomic_store_explicit(&J->failed, 1, memory_order_relaxed);
            return;
        }
        q_unit(J, (u / J->njc) * J->mc, (u % J->njc) * J->nc, (int32_t *)s,
               (uint8_t *)s + acc_bytes);
    }
}

int gc_qgemm(const uint8_t *a, ptrdiff_t m, ptrdiff_t lda, const gc_qpacked *B, void *out,
             ptrdiff_t ldo, const gc_qargs *q)
{
    const ptrdiff_t n = B->n;
    if (m <= 0 || n <= 0)
        return 0;
    float *sb = NULL;
    gc_qepi e = {.mode = q->mode, .relu = q->relu, .colsum = B->colsum};
    /* the kernel's sums are of (a_u8 - shift) with a_u8 = a ^ 0x80 for int8 activations */
    const int32_t zp_u8 = q->a_signed ? q->a_zp + 128 : q->a_zp;
    e.zp = zp_u8 - gc_isa.q_shift[q->a_signed];
    if (q->mode != GC_QOUT_I32) {
        if (!(sb = (float *)malloc(sizeof(float) * 2 * (size_t)n)))
            return -1;
        const int requant = q->mode != GC_QOUT_F32;
        for (ptrdiff_t j = 0; j < n; j++) {
            const float s = q->a_scale * q->w_scale[j];
            sb[j] = requant ? s / q->out_scale : s;
            if (q->bias)
                sb[n + j] = requant ? q->bias[j] / q->out_scale : q->bias[j];
        }
        e.scale = sb;
        e.bias = q->bias ? sb + n : NULL;
        e.out_zp = (float)q->out_zp;
        e.lo = q->mode == GC_QOUT_U8 ? 0.0f : -128.0f;
        e.hi = q->mode == GC_QOUT_U8 ? 255.0f : 127.0f;
        if (q->relu && e.lo < e.out_zp)
            e.lo = e.out_zp;
    }
    /* an int32 bias joins the zero point's correction: colsum'[j] = zp * colsum[j] - ibias[j]
     * with zp 1, so the epilogue's acc - zp * colsum' is c + ibias (uint32 arithmetic: wraps) */
    int32_t *cz = NULL;
    if (q->ibias) {
        if (!(cz = (int32_t *)malloc(sizeof(int32_t) * (size_t)n))) {
            free(sb);
            return -1;
        }
        for (ptrdiff_t j = 0; j < n; j++)
            cz[j] = (int32_t)((uint32_t)e.zp * (uint32_t)B->colsum[j] - (uint32_t)q->ibias[j]);
        e.colsum = cz;
        e.zp = 1;
    }
    q_job J = {.a = a, .m = m, .lda = lda, .B = B, .out = (char *)out, .ldo = ldo,
               .esz = q->mode == GC_QOUT_I32 || q->mode == GC_QOUT_F32 ? 4 : 1,
               .a_signed = q->a_signed, .e = e};
    J.ukr = B->full && gc_isa.q_ukr_full ? gc_isa.q_ukr_full : gc_isa.q_ukr;
    J.nc = (Q_NC_COLS + B->nr - 1) / B->nr * B->nr;
    J.njc = (n + J.nc - 1) / J.nc;
    /* ~100 multiply-adds per ns and thread on the vector ISAs */
    int nt = gc_threads_for((double)m * (double)n * (double)(B->kp + 16) / 100.0, GC_GRAIN_NS);
    /* near-equal row blocks of at most Q_MC_ROWS, and at least two units per thread where the
     * rows allow it: 256 x 256 on two threads runs as 4 blocks of 64 rows, not 96 + 96 + 64 */
    const ptrdiff_t mr = gc_isa.q_mr;
    ptrdiff_t nib = (m + Q_MC_ROWS - 1) / Q_MC_ROWS;
    if (nt > 1 && nib * J.njc < 2 * nt) {
        const ptrdiff_t want = (2 * nt + J.njc - 1) / J.njc, most = (m + mr - 1) / mr;
        nib = want < most ? want : most;
    }
    J.mc = ((m + nib - 1) / nib + mr - 1) / mr * mr;
    J.units = (m + J.mc - 1) / J.mc * J.njc;
    atomic_init(&J.next, 0);
    atomic_init(&J.failed, 0);
    if (nt > J.units)
        nt = (int)J.units;
    gc_region(q_body, &J, nt);
    free(sb);
    free(cz);
    return atomic_load(&J.failed) ? -1 : 0;
}
