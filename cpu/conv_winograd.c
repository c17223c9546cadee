/* Winograd F(4x4, 3x3) float32 conv2d forward (groups 1, NCHW, 3x3 kernel, stride 1, dilation
 * 1, any zero padding): each 4x4 block of output pixels (a tile) of one output channel is
 *
 *   Y = A^T [ sum_c (G g_oc G^T) .* (B^T d_c B) ] A        (d_c: the tile's 6x6 input window)
 *
 * (Lavin & Gray 2016, interpolation points 0, +-1, +-2, inf).  The 36 element-wise products
 * summed over c are 36 independent GEMMs, one per position xi of the 6x6 transform:
 *
 *   M_xi [O, T] = U_xi [O, C] @ V_xi [C, T]    (T tiles, U = G g G^T, V = B^T d B)
 *
 * 36 * 16 multiply-adds per tile, input and output channel where the direct convolution takes
 * 16 * 9: 4x fewer, the GEMMs through the ISA's GEMM micro-kernel (gc_isa.ukr_f32), which is
 * the only hand-written ISA code; the tile transforms are plain C loops along blocks of tiles
 * (isa/winograd.h) that the compiler vectorizes to each ISA's width.  The four steps:
 *
 *   1. U: the weight transformed once (gemm_pack(w, 'a', o, c*9, 0, 2): the compiled executor's
 *      packing and the C API's load) or on every call (eager; the same code, the same bits), in
 *      float32 along blocks of input channels: for each xi, panels of MR output channels,
 *      element (o, c) at  U + xi * npan * MR * C + (o / MR) * MR * C + c * MR + o % MR  (zero
 *      past O);
 *   2. V, per input channel (a thread's unit): the pass's tiles in blocks of GC_WG_TB, each
 *      tile's 6x6 window gathered from the zero-padded plane, B^T d B by gc_isa.wg_in_f32
 *      (isa/winograd.h, compiled per ISA), V_xi row-major [C, ldt] (tiles along the row, zero
 *      past T), read in place as the micro-kernel's B operand (NR tiles);
 *   3. M_xi = U_xi @ V_xi (a thread's unit: one xi): K (input channels) in blocks of
 *      gc_gemm_kc, the first stored, the others added (beta 1), M_xi row-major
 *      [npan * MR, ldt];
 *   4. per output channel: A^T M A + bias by gc_isa.wg_out_f32 along blocks of tiles, each
 *      tile's valid pixels stored to out (partial tiles at the right and bottom edges).
 *
 * The tiles of a batch are numbered across images (image, tile row, tile column), cut into
 * passes of whole tile rows so that V and M stay within GC_WG_PASS_BYTES.  Every element of U,
 * V, M and out is computed by one thread by the same operations in the same order, whatever
 * the split, so results never depend on the thread count.
 *
 * Accuracy: the transforms' constants (up to 8 in A, 5 in B, 1/24 in G) cost a few bits against
 * the direct sum: on ResNet's layers the error is 5e-6 .. 1.2e-5 of the output's largest
 * magnitude for 64 .. 512 channels, 8-31x the direct sum's (tests/backends/cpu/
 * test_conv_winograd.py measures it against float64).  A NaN or inf in a
 * tile's 6x6 window would make the whole 4x4 output tile NaN (the transforms mix the window),
 * so an input holding any goes to the direct / im2col paths instead (conv.c), with the weight
 * itself, which a transformed weight keeps after U or, packed from a read-only array, by
 * reference (gc_winograd_raw).  A non-finite weight
 * makes its output channel NaN here where the direct sum may give +-inf.
 *
 * When it runs: gc_conv2d_winograd_use (the rule, measured: benchmarks/README.md, *Winograd*);
 * GPUCORE_CONV=winograd forces it where the geometry allows, im2col / direct / direct_t /
 * direct_gw force it off. */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv_fwd.h"
#include "isa.h"
#include "kernels.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* V and M of one pass at most this large (larger passes re-read U less; L3-sized) */
#define GC_WG_PASS_BYTES (8u << 20)

int gc_conv2d_winograd_fits(const gc_conv *p, ptrdiff_t o)
{
    return p->kh == 3 && p->kw == 3 && p->sh == 1 && p->sw == 1 && p->dh == 1 && p->dw == 1 &&
           p->n > 0 && p->c > 0 && o > 0 && p->oh > 0 && p->ow > 0;
}

int gc_conv2d_winograd_use(const gc_conv *p, ptrdiff_t o)
{
    if (!gc_conv2d_winograd_fits(p, o))
        return 0;
    const char *e = getenv("GPUCORE_CONV");
    if (e && gc_env_is(e, "winograd"))
        return 1;
    if (e && (gc_env_is(e, "im2col") || gc_env_is(e, "direct") || gc_env_is(e, "direct_t") ||
              gc_env_is(e, "direct_gw")))
        return 0;
    /* the rule (benchmarks/README.md, *Winograd convolution*): enough channels for the 36
     * GEMMs (K = input channels) to outweigh the transforms (per input and output channel):
     * ResNet's 64 .. 256 gain 1.6-2.1x, the training CNN's 16 -> 32 (batch 64, 14x14) loses
     * 1.6x; 32 is the midpoint, unmeasured.  And at least one NR-wide panel of tiles (16 on
     * AVX2) to pay for reading the 4x larger transformed weight: ResNet's 14x14 layers at
     * batch 1 (16 tiles) gain, its 7x7 ones (4 tiles) lose 1.7x.  A function of the geometry
     * alone, so that the eager call (the weight transformed per call) gives the compiled
     * executor's bits (transformed once). */
    const ptrdiff_t tiles = p->n * ((p->oh + 3) / 4) * ((p->ow + 3) / 4);
    return p->c >= 32 && o >= 32 && tiles >= 16;
}

/* ---- 1. the weight ---------------------------------------------------------------------- */

/* rows i of G (6 x 3) applied to the columns of a block of nb 3x3 kernels: out[i][j] =
 * G[i][0] g[j] + G[i][1] g[3 + j] + G[i][2] g[6 + j], along the block (g[k][b]: element k of
 * kernel b), and the same for the rows of its result (G g G^T) */
#define WG_G_ROWS(o, a0, a1, a2)                                                                  \
    do {                                                                                          \
        o[0] = 0.25f * (a0);                                                                      \
        o[1] = -(1.0f / 6.0f) * ((a0) + (a1) + (a2));                                             \
        o[2] = -(1.0f / 6.0f) * ((a0) - (a1) + (a2));                                             \
        o[3] = (1.0f / 24.0f) * (a0) + (1.0f / 12.0f) * (a1) + (1.0f / 6.0f) * (a2);              \
        o[4] = (1.0f / 24.0f) * (a0) - (1.0f / 12.0f) * (a1) + (1.0f / 6.0f) * (a2);              \
        o[5] = (a2);                                                                              \
    } while (0)

/* Lanes of one block of the weight transform: a panel's MR output channels times a run of input
 * channels (every ISA's MR is at most 16: at least 4 input channels per block). */
#define WG_WL 64

/* U (layout above) of w [o, c, 3, 3] for output channels [o0, o1) (whole panels), in float32.
 * A block is one panel's MR output channels times nb input channels, lane b*MR + r for input
 * channel c0 + b of output channel p*MR + r: exactly the run of U that position xi of the block
 * occupies, so each xi is stored as one contiguous copy (writing kernel by kernel instead, MR
 * floats apart, cost 3-4x the arithmetic: ResNet-18's weights took 30 of the 47 ms of packing at
 * load).  Each element is the same expression of the same kernel as before, so the bits do not
 * depend on the blocking; lanes past o are zeros. */
/* n floats from s (16-byte aligned) to d; stream: with non-temporal stores where d allows (a
 * packed weight, written once and read by later calls: no read of the lines it overwrites, no
 * eviction of the caller's data; 4x the weight at load), else plain ones (the per-call
 * transform, which the GEMMs read next from cache). */
static void wg_store(float *restrict d, const float *restrict s, ptrdiff_t n, int stream)
{
#if defined(__SSE2__)
    if (stream && ((uintptr_t)d & 15) == 0 && n % 4 == 0) {
        for (ptrdiff_t i = 0; i < n; i += 4)
            _mm_stream_ps(d + i, _mm_load_ps(s + i));
        return;
    }
#else
    (void)stream;
#endif
    memcpy(d, s, sizeof(float) * (size_t)n);
}

static void wg_weight_range(const float *w, float *U, ptrdiff_t o, ptrdiff_t c, ptrdiff_t o0,
                            ptrdiff_t o1, int mr, int stream)
{
    const ptrdiff_t npan = (o + mr - 1) / mr, xs = npan * mr * c;
    const ptrdiff_t per = WG_WL / mr > 0 ? WG_WL / mr : 1; /* input channels per block */
    for (ptrdiff_t pan = o0 / mr; pan < o1 / mr; pan++) {
        const ptrdiff_t live = o - pan * mr < mr ? o - pan * mr : mr; /* real output channels */
        float *d = U + pan * mr * c;
        for (ptrdiff_t c0 = 0; c0 < c; c0 += per) {
            const ptrdiff_t nb = c - c0 < per ? c - c0 : per, nl = nb * mr;
            _Alignas(64) float g[9][WG_WL], t[6][3][WG_WL], u[36][WG_WL];
            for (ptrdiff_t b = 0; b < nb; b++)
                for (ptrdiff_t r = 0; r < mr; r++) {
                    const float *src = w + ((pan * mr + r) * c + c0 + b) * 9;
                    for (int k = 0; k < 9; k++)
                        g[k][b * mr + r] = r < live ? src[k] : 0.0f;
                }
            for (int j = 0; j < 3; j++)
                for (ptrdiff_t l = 0; l < nl; l++) {
                    float q[6];
                    WG_G_ROWS(q, g[j][l], g[3 + j][l], g[6 + j][l]);
                    for (int i = 0; i < 6; i++)
                        t[i][j][l] = q[i];
                }
            for (int i = 0; i < 6; i++)
                for (ptrdiff_t l = 0; l < nl; l++) {
                    float q[6];
                    WG_G_ROWS(q, t[i][0][l], t[i][1][l], t[i][2][l]);
                    for (int j = 0; j < 6; j++)
                        u[i * 6 + j][l] = q[j];
                }
            if (live < mr) /* the padding rows: +0 (the transform of zeros has -0 terms) */
                for (int x = 0; x < 36; x++)
                    for (ptrdiff_t b = 0; b < nb; b++)
                        for (ptrdiff_t r = live; r < mr; r++)
                            u[x][b * mr + r] = 0.0f;
            for (int x = 0; x < 36; x++)
                wg_store(d + x * xs + c0 * mr, u[x], nl, stream);
        }
    }
#if defined(__SSE2__)
    if (stream)
        _mm_sfence(); /* the streamed stores are visible before the packing returns */
#endif
}

typedef struct {
    const float *w;
    float *U;
    ptrdiff_t o, c;
    int mr, stream;
} wg_wjob;

static void wg_weight_body(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const wg_wjob *J = (const wg_wjob *)ctx;
    wg_weight_range(J->w, J->U, J->o, J->c, lo * J->mr, hi * J->mr, J->mr, J->stream);
}

ptrdiff_t gc_winograd_weight_elems(ptrdiff_t o, ptrdiff_t c)
{
    const ptrdiff_t mr = gc_blk_f32.mr, npan = (o + mr - 1) / mr;
    if (o < 0 || c < 0 || mr > WG_WL || npan > PTRDIFF_MAX / 40 / mr / (c ? c : 1))
        return -1;
    return 36 * npan * mr * c + o * c * 9; /* U, then the weight itself (gc_winograd_raw) */
}

const float *gc_winograd_raw(const gc_packed *pw)
{
    const ptrdiff_t o = pw->rows, c = pw->cols / 9, mr = pw->w;
    if (pw->raw)
        return (const float *)pw->raw;
    return (const float *)pw->data + 36 * ((o + mr - 1) / mr) * mr * c;
}

int gc_conv_input_finite(const float *x, ptrdiff_t n)
{
    uint32_t bad = 0;
    for (ptrdiff_t i = 0; i < n; i++) { /* exponent all ones: inf or NaN (vectorizes) */
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        bad |= (b & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

void gc_winograd_weight(const float *w, float *U, ptrdiff_t o, ptrdiff_t c, int packing)
{
    wg_wjob J = {.w = w, .U = U, .o = o, .c = c, .mr = gc_blk_f32.mr, .stream = packing != 0};
    const ptrdiff_t npan = (o + J.mr - 1) / J.mr;
    gc_parallel_range(npan, 1, 15.0 * (double)(o * c), wg_weight_body, &J);
    if (packing == 1)
        memcpy(U + 36 * npan * J.mr * c, w, sizeof(float) * (size_t)(o * c * 9));
}

/* ---- the passes ---------------------------------------------------------------------------- */

typedef struct {
    gc_conv_fwd f; /* the call (conv_fwd.h) */
    const float *U;
    float *V, *M;
    ptrdiff_t th, tw, r0, nrows, ldt, npan, kc;
    int mr, nr;
} wg_job;

/* 2. V for channel ci: the pass's tiles in blocks of GC_WG_TB, each tile's 6x6 window gathered
 * from the zero-padded plane of its image (pad: 4*th + 2 rows of wp = 4*tw + 2, per thread,
 * refilled when the image changes), then gc_isa.wg_in. */
static void wg_input_channel(const wg_job *J, ptrdiff_t ci, float *pad)
{
    const gc_conv *p = J->f.p;
    const ptrdiff_t wp = 4 * J->tw + 2, hp = 4 * J->th + 2, t = J->nrows * J->tw;
    const ptrdiff_t xs = p->c * J->ldt; /* one xi of V */
    const ptrdiff_t xn = p->w < wp - p->pw ? p->w : wp - p->pw;
    ptrdiff_t padded = -1;
    _Alignas(64) float d[36 * GC_WG_TB];
    for (ptrdiff_t t0 = 0; t0 < t; t0 += GC_WG_TB) {
        const ptrdiff_t nt = t - t0 < GC_WG_TB ? t - t0 : GC_WG_TB;
        for (ptrdiff_t k = 0; k < nt; k++) {
            const ptrdiff_t r = J->r0 + (t0 + k) / J->tw, tx = (t0 + k) % J->tw;
            const ptrdiff_t b = r / J->th, ty = r % J->th;
            if (b != padded) {
                const float *img = J->f.x + (b * p->c + ci) * p->h * p->w;
                memset(pad, 0, sizeof(float) * (size_t)(hp * wp));
                for (ptrdiff_t y = 0; y < p->h && y + p->ph < hp; y++)
                    if (xn > 0)
                        memcpy(pad + (y + p->ph) * wp + p->pw, img + y * p->w,
                               sizeof(float) * (size_t)xn);
                padded = b;
            }
            const float *win = pad + 4 * ty * wp + 4 * tx;
            for (int i = 0; i < 6; i++)
                for (int jj = 0; jj < 6; jj++)
                    d[(i * 6 + jj) * GC_WG_TB + k] = win[i * wp + jj];
        }
        gc_isa.wg_in_f32(d, nt, J->V + ci * J->ldt + t0, xs);
    }
}

/* one input channel's tiles, a unit of gc_conv_claim_units; scratch: the thread's zero-padded
   plane (its slot 3) */
static void wg_input_unit(void *job, void *scratch, long ci, long prev)
{
    (void)prev;
    wg_input_channel((const wg_job *)job, ci, (float *)scratch);
}

/* 3. M_xi = U_xi @ V_xi for xi in [lo, hi). */
static void wg_gemm_body(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const wg_job *J = (const wg_job *)ctx;
    const ptrdiff_t c = J->f.p->c, ldt = J->ldt, mr = J->mr, nr = J->nr;
    const ptrdiff_t nj = ldt / nr;
    for (ptrdiff_t xi = lo; xi < hi; xi++) {
        const float *U = J->U + xi * J->npan * mr * c, *V = J->V + xi * c * ldt;
        float *M = J->M + xi * J->npan * mr * ldt;
        for (ptrdiff_t pc = 0; pc < c; pc += J->kc) {
            const ptrdiff_t kb = c - pc < J->kc ? c - pc : J->kc;
            for (ptrdiff_t q = 0; q < J->npan; q++) {
                const float *a = U + q * mr * c + pc * mr;
                for (ptrdiff_t j = 0; j < nj; j++)
                    gc_isa.ukr_f32(kb, a, V + pc * ldt + j * nr, ldt, M + q * mr * ldt + j * nr,
                                   ldt, pc ? 1.0f : 0.0f, NULL, 0);
            }
        }
    }
}

/* 4. out for output channel oc: the pass's tiles in blocks of GC_WG_TB through gc_isa.wg_out,
 * each tile's valid pixels stored. */
static void wg_output_channel(const wg_job *J, ptrdiff_t oc)
{
    const gc_conv *p = J->f.p;
    const ptrdiff_t xs = J->npan * J->mr * J->ldt, t = J->nrows * J->tw; /* xs: one xi of M */
    const float bv = J->f.bias ? J->f.bias[oc] : 0.0f;
    _Alignas(64) float y[16 * GC_WG_TB];
    for (ptrdiff_t t0 = 0; t0 < t; t0 += GC_WG_TB) {
        const ptrdiff_t nt = t - t0 < GC_WG_TB ? t - t0 : GC_WG_TB;
        gc_isa.wg_out_f32(J->M + oc * J->ldt + t0, xs, nt, bv, y);
        /* runs of tiles along one tile row */
        for (ptrdiff_t k = 0; k < nt;) {
            const ptrdiff_t r = J->r0 + (t0 + k) / J->tw, tx0 = (t0 + k) % J->tw;
            const ptrdiff_t run = J->tw - tx0 < nt - k ? J->tw - tx0 : nt - k;
            const ptrdiff_t b = r / J->th, ty = r % J->th;
            const ptrdiff_t yn = p->oh - 4 * ty < 4 ? p->oh - 4 * ty : 4;
            const ptrdiff_t xe = p->ow - 4 * tx0 < 4 * run ? p->ow - 4 * tx0 : 4 * run;
            const ptrdiff_t full = xe / 4;
            for (ptrdiff_t i = 0; i < yn; i++) {
                float *orow = J->f.out + ((b * J->f.o + oc) * p->oh + 4 * ty + i) * p->ow + 4 * tx0;
                const float *y0 = y + (i * 4) * GC_WG_TB + k, *y1 = y0 + GC_WG_TB;
                const float *y2 = y1 + GC_WG_TB, *y3 = y2 + GC_WG_TB;
                for (ptrdiff_t q = 0; q < full; q++) {
                    orow[4 * q] = y0[q];
                    orow[4 * q + 1] = y1[q];
                    orow[4 * q + 2] = y2[q];
                    orow[4 * q + 3] = y3[q];
                }
                for (ptrdiff_t xx = 4 * full; xx < xe; xx++)
                    orow[xx] = y[(i * 4 + (xx & 3)) * GC_WG_TB + k + (xx >> 2)];
                if (J->f.res) { /* the epilogue (gc_epi) on the row just stored */
                    const float *rr = J->f.res + (orow - J->f.out);
                    for (ptrdiff_t xx = 0; xx < xe; xx++)
                        orow[xx] += rr[xx];
                }
                if (J->f.relu)
                    for (ptrdiff_t xx = 0; xx < xe; xx++)
                        orow[xx] = orow[xx] <= 0.0f ? 0.0f : orow[xx];
            }
            k += run;
        }
    }
}

static void wg_output_body(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const wg_job *J = (const wg_job *)ctx;
    for (ptrdiff_t oc = lo; oc < hi; oc++)
        wg_output_channel(J, oc);
}

/* The weight [o, c, 3, 3] read back from a gemm_pack of it in another layout (side A, any
 * swap but 2), as dconv_repack reads it. */
static void wg_unpack(const gc_packed *pw, float *w)
{
    const float *s = (const float *)pw->data;
    for (ptrdiff_t f = 0; f < pw->f; f++)
        for (ptrdiff_t k = 0; k < pw->k; k++)
            w[f * pw->k + k] = s[gc_conv_packed_at(pw, f, k)];
}

int gc_conv2d_winograd_f32(const float *x, const float *w, const gc_packed *pw,
                           const float *bias, const gc_epi *e, float *out, const gc_conv *p,
                           ptrdiff_t o)
{
    if (!gc_conv2d_winograd_fits(p, o))
        return 0;
    wg_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, e, out, p, o);
    J.mr = gc_blk_f32.mr;
    J.nr = gc_blk_f32.nr;
    J.npan = (o + J.mr - 1) / J.mr;
    J.kc = gc_gemm_kc('f', p->c);
    J.th = (p->oh + 3) / 4;
    J.tw = (p->ow + 3) / 4;
    const ptrdiff_t c = p->c, ue = gc_winograd_weight_elems(o, c);
    if (ue < 0)
        return -1;
    if (pw && pw->swap == 2) {
        /* the transformed weight cannot be read back: it must be this ISA's (the bindings and
         * the C API's load check it) */
        if (pw->isa != gc_isa.isa || pw->w != J.mr || pw->elems != ue - (pw->raw ? o * c * 9 : 0) ||
            pw->rows != o ||
            pw->cols != c * 9)
            return -1;
        J.U = (const float *)pw->data;
    } else {
        float *U = (float *)gc_conv_scratch(6, sizeof(float) * (size_t)ue);
        if (!U)
            return -1;
        if (pw) {
            float *wu = (float *)gc_conv_scratch(7, sizeof(float) * (size_t)(o * c * 9));
            if (!wu)
                return -1;
            wg_unpack(pw, wu);
            w = wu;
        }
        gc_winograd_weight(w, U, o, c, 0); /* (the raw weight is w itself here) */
        J.U = U;
    }
    /* passes of whole tile rows: V [36, c, ldt] and M [36, npan*mr, ldt] within the budget */
    const ptrdiff_t rows = p->n * J.th;
    const double per_tile = 36.0 * 4.0 * (double)(c + J.npan * J.mr);
    ptrdiff_t prow = (ptrdiff_t)((double)GC_WG_PASS_BYTES / (per_tile * (double)J.tw));
    if (prow < 1)
        prow = 1;
    if (prow > rows)
        prow = rows;
    for (ptrdiff_t r0 = 0; r0 < rows; r0 += prow) {
        J.r0 = r0;
        J.nrows = rows - r0 < prow ? rows - r0 : prow;
        const ptrdiff_t t = J.nrows * J.tw;
        J.ldt = (t + J.nr - 1) / J.nr * J.nr;
        if (J.ldt % 256 == 0) /* rows 1 KiB apart share a few L1 sets: stagger them */
            J.ldt += J.nr;
        const size_t vb = sizeof(float) * (size_t)(36 * c * J.ldt);
        float *buf = (float *)gc_conv_scratch(8, vb + sizeof(float) * (size_t)(36 * J.npan *
                                                                               J.mr * J.ldt));
        if (!buf)
            return -1;
        J.V = buf;
        J.M = (float *)((char *)buf + vb);
        if (J.ldt > t) /* the padding tiles: zero columns of V (their M columns are unused) */
            for (ptrdiff_t rr = 0; rr < 36 * c; rr++)
                memset(J.V + rr * J.ldt + t, 0, sizeof(float) * (size_t)(J.ldt - t));
        const double tiles = (double)t;
        /* a channel a unit, each thread's zero-padded plane on slot 3 */
        const size_t plane = sizeof(float) * (size_t)((4 * J.th + 2) * (4 * J.tw + 2));
        const int nt = gc_threads_for(0.25 * 36.0 * 8.0 * tiles * (double)c, GC_GRAIN_NS);
        if (gc_conv_claim_units(&J, (long)c, nt, 3, plane, wg_input_unit) < 0)
            return -1;
        gc_parallel_range(36, 1, 0.02 * 36.0 * 2.0 * (double)J.ldt * (double)c * (double)o,
                          wg_gemm_body, &J);
        gc_parallel_range(o, 1, 0.25 * 16.0 * 10.0 * tiles * (double)o, wg_output_body, &J);
    }
    return 0;
}
