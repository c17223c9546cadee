/* The quantized inference kernels around the int8 GEMM (qgemm.c): per-tensor uint8
 * quantize / dequantize, the uint8 im2col, the int8 convolution (im2col + qgemm + a transpose
 * back to NCHW) and uint8 max pooling.
 *
 * Quantize (PyTorch's rounding, gpucore/quantization/qtensor.py's quantize_array):
 *     q = clamp(rint(fl32(fl32(x * fl32(1 / scale)) + zp)), 0, 255), NaN -> 255
 * Dequantize: fl32(fl32(q - zp) * scale).  Each float operation is rounded on its own (the file
 * is compiled without contraction: -std=c11), so numpy's float32 formulas give the same bits.
 *
 * The convolution's im2col writes one row per output pixel (rows = n*oh*ow, each k = c*kh*kw
 * bytes, element (ci*kh + ki)*kw + kj as the weight [o, c, kh, kw] flattens): the row layout the
 * int8 GEMM reads as its activations.  Pixels outside the image read as the activation's zero
 * point (the quantized value of 0.0), never as 0: the image is first copied into planes with a
 * border of zero points (the work buffer's last part), from which the rows are read without
 * bounds tests (every window of the geometry lies inside the padded planes, conv_geometry's
 * check), so no read leaves x or the copy. */
#include <math.h>
#include <string.h>

#include "isa.h"
#include "isa/quant.h"
#include "kernels.h"

/* isa/quant.h's loop at the width of the ISA in use (the same C compiled with its flags, so the
 * same bits; the baseline's scalar loop ran ~6 ns per value). */
void gc_quantize_u8(const float *x, uint8_t *out, ptrdiff_t n, float scale, int32_t zp)
{
    if (gc_isa.q_torch_u8)
        gc_isa.q_torch_u8(x, out, n, scale, zp);
    else
        qq_torch_u8(x, out, n, scale, zp);
}

/* ONNX's formula, as ONNX Runtime computes it (MlasQuantizeLinear): the quotient clamped to
 * [-zp, 255 - zp] (NaN to the low end), rounded half to even, plus zp: isa/quant.h's loop, at the
 * width of the ISA in use (the same C compiled with its flags, so the same bits). */
void gc_quantize_linear_u8(const float *x, uint8_t *out, ptrdiff_t n, float scale, int32_t zp)
{
    if (gc_isa.q_linear_u8)
        gc_isa.q_linear_u8(x, out, n, scale, zp);
    else
        qq_linear_u8(x, out, n, scale, zp);
}

void gc_dequantize_u8(const uint8_t *q, float *out, ptrdiff_t n, float scale, int32_t zp)
{
    const float z = (float)zp;
    for (ptrdiff_t i = 0; i < n; i++) {
        const float d = (float)q[i] - z;
        out[i] = d * scale;
    }
}

#if defined(__GNUC__) && !defined(__clang__)
#define Q_NO_MEMCPY_IDIOM __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define Q_NO_MEMCPY_IDIOM
#endif

/* The im2col / transpose jobs, each split over threads by gc_parallel_range in ranges of
 * independent outputs (rows of pixels, planes, output channels): the same bytes whatever the
 * split. */
typedef struct {
    const uint8_t *src;
    uint8_t *dst;
    const gc_conv *p;
    ptrdiff_t hp, wp, total;
    uint8_t zp;
} q_im2col_job;

/* Rows [lo, hi) of the output pixels, from an image already padded (hp x wp planes, followed by
 * >= 8 readable bytes; rows followed by >= 8 writable bytes): no bounds tests in the loops.  A
 * kernel row of kw <= 8 contiguous bytes moves as one 4- or 8-byte word (its extra bytes are
 * overwritten by the next copy, or land in the slack after the last row): a few instructions
 * where a byte loop or a memcpy call cost several times more.  The last row of a range that
 * another range follows moves byte by byte: its words would spill into that range's first row,
 * which another thread may have written already. */
Q_NO_MEMCPY_IDIOM static void q_rows_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const q_im2col_job *J = (const q_im2col_job *)ctx;
    const gc_conv *p = J->p;
    const ptrdiff_t k = p->c * p->kh * p->kw, kw = p->kw, dw = p->dw, hp = J->hp, wp = J->wp;
    const int word_all = dw != 1 ? 0 : kw <= 4 ? 4 : kw <= 8 ? 8 : 0;
    const ptrdiff_t pix = p->oh * p->ow;
    /* 4-byte words (kw <= 4, the 3x3 kernels): one table of the c*kh kernel rows' offsets and a
     * flat loop over it, 4 instructions a kernel row where the nested loops' index arithmetic
     * took twice that (the digits CNN's 16 -> 32 layer: im2col as long as its int8 GEMM) */
    int32_t offs[256];
    const ptrdiff_t nkr = p->c * p->kh;
    const int flat = word_all == 4 && nkr <= 256 && (double)p->c * (double)hp * (double)wp < 2e9;
    if (flat)
        for (ptrdiff_t ci = 0, t = 0; ci < p->c; ci++)
            for (ptrdiff_t ki = 0; ki < p->kh; ki++, t++)
                offs[t] = (int32_t)((ci * hp + ki * p->dh) * wp);
    /* the pixel (img, oy, ox) of row r0 stepped along, not divided out per row (four divisions
     * a row were most of a 1-channel layer's im2col) */
    ptrdiff_t img = lo / pix, oy = lo % pix / p->ow, ox = lo % p->ow;
    for (ptrdiff_t r0 = lo; r0 < hi; r0++) {
        const int word = r0 == hi - 1 && hi < J->total ? 0 : word_all;
        uint8_t *r = J->dst + r0 * k;
        const uint8_t *base = J->src + img * p->c * hp * wp + oy * p->sh * wp + ox * p->sw;
        if (++ox == p->ow) {
            ox = 0;
            if (++oy == p->oh) {
                oy = 0;
                img++;
            }
        }
        if (flat && word == 4) {
            for (ptrdiff_t t = 0; t < nkr; t++, r += kw) {
                uint32_t v;
                memcpy(&v, base + offs[t], 4);
                memcpy(r, &v, 4);
            }
            continue;
        }
        for (ptrdiff_t ci = 0; ci < p->c; ci++)
            for (ptrdiff_t ki = 0; ki < p->kh; ki++, r += kw) {
                const uint8_t *s = base + (ci * hp + ki * p->dh) * wp;
                if (word == 4) {
                    uint32_t v;
                    memcpy(&v, s, 4);
                    memcpy(r, &v, 4);
                } else if (word == 8) {
                    uint64_t v;
                    memcpy(&v, s, 8);
                    memcpy(r, &v, 8);
                } else {
                    for (ptrdiff_t kj = 0; kj < kw; kj++)
                        r[kj] = s[kj * dw];
                }
            }
    }
}

/* Planes [lo, hi) of x copied into planes of hp x wp with a border of zp (ph rows / pw
 * columns). */
Q_NO_MEMCPY_IDIOM static void q_pad_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const q_im2col_job *J = (const q_im2col_job *)ctx;
    const gc_conv *p = J->p;
    const ptrdiff_t hp = J->hp, wp = J->wp;
    for (ptrdiff_t pl = lo; pl < hi; pl++) {
        uint8_t *d = J->dst + pl * hp * wp;
        const uint8_t *s = J->src + pl * p->h * p->w;
        memset(d, J->zp, (size_t)(p->ph * wp));
        for (ptrdiff_t y = 0; y < p->h; y++) {
            uint8_t *line = d + (p->ph + y) * wp;
            /* the borders byte by byte: 1-3 bytes, where a memset call cost more than the copy */
            for (ptrdiff_t j = 0; j < p->pw; j++)
                line[j] = line[p->pw + p->w + j] = J->zp;
            memcpy(line + p->pw, s + y * p->w, (size_t)p->w);
        }
        memset(d + (p->ph + p->h) * wp, J->zp, (size_t)(p->ph * wp));
    }
}

void gc_qim2col_u8(const uint8_t *x, uint8_t *rows, uint8_t *pad, const gc_conv *p, uint8_t zp)
{
    const ptrdiff_t hp = p->h + 2 * p->ph, wp = p->w + 2 * p->pw, planes = p->n * p->c;
    const ptrdiff_t m = p->n * p->oh * p->ow, k = p->c * p->kh * p->kw;
    /* padded also without padding: the words need the slack after it (8 bytes of zp) */
    q_im2col_job P = {.src = x, .dst = pad, .p = p, .hp = hp, .wp = wp, .total = planes, .zp = zp};
    gc_parallel_range(planes, 1, 0.1 * (double)(planes * hp * wp), q_pad_range, &P);
    memset(pad + planes * hp * wp, zp, 8);
    q_im2col_job R = {.src = pad, .dst = rows, .p = p, .hp = hp, .wp = wp, .total = m, .zp = zp};
    gc_parallel_range(m, 1, 0.5 * (double)(m * k), q_rows_range, &R);
}

typedef struct {
    const char *t;
    char *out;
    ptrdiff_t pix, o;
    int esz;
} q_nchw_job;

/* 8 x 8 bytes transposed in 64-bit words (little-endian: byte k of r[i] is element (i, k)): swap
 * the off-diagonal 4 x 4 blocks, then 2 x 2 blocks of 2-byte pairs, then single bytes; after
 * which r[k] holds column k. */
static inline void q_t8x8(uint64_t r[8])
{
    for (int i = 0; i < 4; i++) {
        const uint64_t a = r[i], b = r[i + 4];
        r[i] = (a & 0x00000000FFFFFFFFull) | (b << 32);
        r[i + 4] = (a >> 32) | (b & 0xFFFFFFFF00000000ull);
    }
    for (int g = 0; g < 8; g += 4)
        for (int i = g; i < g + 2; i++) {
            const uint64_t a = r[i], b = r[i + 2];
            r[i] = (a & 0x0000FFFF0000FFFFull) | ((b << 16) & 0xFFFF0000FFFF0000ull);
            r[i + 2] = ((a >> 16) & 0x0000FFFF0000FFFFull) | (b & 0xFFFF0000FFFF0000ull);
        }
    for (int i = 0; i < 8; i += 2) {
        const uint64_t a = r[i], b = r[i + 1];
        r[i] = (a & 0x00FF00FF00FF00FFull) | ((b << 8) & 0xFF00FF00FF00FF00ull);
        r[i + 1] = ((a >> 8) & 0x00FF00FF00FF00FFull) | (b & 0xFF00FF00FF00FF00ull);
    }
}

/* (image, block of 8 output channels) units [lo, hi): out[img, j, pix] = t[img, pix, j] for
 * items of esz bytes (1 or 4); bytes move as 8 x 8 blocks through q_t8x8 (a strided byte loop
 * was ~7% of the digits CNN's int8 16 -> 32 layer), the edges one by one. */
static void q_nchw_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const q_nchw_job *J = (const q_nchw_job *)ctx;
    const ptrdiff_t pix = J->pix, o = J->o, nb = (o + 7) / 8;
    for (ptrdiff_t u = lo; u < hi; u++) {
        const ptrdiff_t img = u / nb, j0 = u % nb * 8, jn = o - j0 < 8 ? o - j0 : 8;
        const char *ti = J->t + img * pix * o * J->esz;
        char *oi = J->out + img * o * pix * J->esz;
        ptrdiff_t q0 = 0;
        if (J->esz == 1 && jn == 8)
            for (; q0 + 8 <= pix; q0 += 8) {
                uint64_t r[8];
                for (int i = 0; i < 8; i++)
                    memcpy(&r[i], ti + (q0 + i) * o + j0, 8);
                q_t8x8(r);
                for (int k = 0; k < 8; k++)
                    memcpy(oi + (j0 + k) * pix + q0, &r[k], 8);
            }
        for (ptrdiff_t j = j0; j < j0 + jn; j++) {
            const char *src = ti + j * J->esz;
            char *dst = oi + j * pix * J->esz;
            if (J->esz == 1) {
                for (ptrdiff_t q = q0; q < pix; q++)
                    dst[q] = src[q * o];
            } else {
                for (ptrdiff_t q = q0; q < pix; q++)
                    memcpy(dst + q * 4, src + q * o * 4, 4);
            }
        }
    }
}

static void q_to_nchw(const char *t, char *out, ptrdiff_t n, ptrdiff_t pix, ptrdiff_t o, int esz)
{
    q_nchw_job J = {.t = t, .out = out, .pix = pix, .o = o, .esz = esz};
    gc_parallel_range(n * ((o + 7) / 8), 1, 0.3 * (double)(n * pix * o * esz), q_nchw_range, &J);
}

ptrdiff_t gc_qconv2d_work_bytes(const gc_conv *p, ptrdiff_t o, int esz)
{
    const ptrdiff_t m = p->n * p->oh * p->ow, k = p->c * p->kh * p->kw;
    const ptrdiff_t pad = p->n * p->c * (p->h + 2 * p->ph) * (p->w + 2 * p->pw);
    return (m * k + 8 + 63) / 64 * 64 + (m * o * esz + 63) / 64 * 64 + pad + 8;
}

int gc_qconv2d(const uint8_t *x, const gc_qpacked *B, void *out, uint8_t *work, const gc_conv *p,
               const gc_qargs *q)
{
    const ptrdiff_t m = p->n * p->oh * p->ow, k = p->c * p->kh * p->kw, o = B->n;
    const int esz = q->mode == GC_QOUT_I32 || q->mode == GC_QOUT_F32 ? 4 : 1;
    if (m == 0 || o == 0)
        return 0;
    uint8_t *rows = work;
    char *t = (char *)work + (m * k + 8 + 63) / 64 * 64;
    uint8_t *pad = (uint8_t *)t + (m * o * esz + 63) / 64 * 64;
    gc_qim2col_u8(x, rows, pad, p, (uint8_t)q->a_zp);
    if (gc_qgemm(rows, m, k, B, t, o, q) < 0)
        return -1;
    q_to_nchw(t, (char *)out, p->n, p->oh * p->ow, o, esz);
    return 0;
}

/* 2x2 windows, stride 2, no padding or dilation (the CNNs' pooling): two rows at a time, no
 * bounds tests (a loop the compiler vectorizes) */
static void q_pool2x2(const uint8_t *x, uint8_t *out, const gc_conv *p)
{
    const ptrdiff_t w = p->w, oh = p->oh, ow = p->ow;
    for (ptrdiff_t pl = 0; pl < p->n * p->c; pl++) {
        const uint8_t *plane = x + pl * p->h * w;
        uint8_t *o = out + pl * oh * ow;
        for (ptrdiff_t oy = 0; oy < oh; oy++) {
            const uint8_t *r0 = plane + 2 * oy * w, *r1 = r0 + w;
            uint8_t *orow = o + oy * ow;
            for (ptrdiff_t ox = 0; ox < ow; ox++) {
                const uint8_t a = r0[2 * ox] > r0[2 * ox + 1] ? r0[2 * ox] : r0[2 * ox + 1];
                const uint8_t b = r1[2 * ox] > r1[2 * ox + 1] ? r1[2 * ox] : r1[2 * ox + 1];
                orow[ox] = a > b ? a : b;
            }
        }
    }
}

void gc_max_pool2d_u8(const uint8_t *x, uint8_t *out, const gc_conv *p)
{
    if (p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 && p->pw == 0 &&
        p->dh == 1 && p->dw == 1) {
        q_pool2x2(x, out, p);
        return;
    }
    for (ptrdiff_t pl = 0; pl < p->n * p->c; pl++) {
        const uint8_t *plane = x + pl * p->h * p->w;
        uint8_t *o = out + pl * p->oh * p->ow;
        for (ptrdiff_t oy = 0; oy < p->oh; oy++)
            for (ptrdiff_t ox = 0; ox < p->ow; ox++) {
                int best = -1;
                for (ptrdiff_t ki = 0; ki < p->kh; ki++) {
                    const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
                    if (iy < 0 || iy >= p->h)
                        continue;
                    for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
                        const ptrdiff_t ix = ox * p->sw - p->pw + kj * p->dw;
                        if (ix >= 0 && ix < p->w && plane[iy * p->w + ix] > best)
                            best = plane[iy * p->w + ix];
                    }
                }
                /* a window entirely in the padding has no element (the geometry checks forbid
                 * it, as PyTorch's pad <= kernel / 2); 0 keeps the output defined */
                o[oy * p->ow + ox] = (uint8_t)(best < 0 ? 0 : best);
            }
    }
}
