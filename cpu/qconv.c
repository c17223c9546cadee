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
 * point (the quantized value of 0.0), never as 0.  Every index is bounds-checked against the
 * image, so no read leaves x. */
#include <math.h>
#include <string.h>

#include "kernels.h"

void gc_quantize_u8(const float *x, uint8_t *out, ptrdiff_t n, float scale, int32_t zp)
{
    const float inv = 1.0f / scale, z = (float)zp;
    for (ptrdiff_t i = 0; i < n; i++) {
        float y = x[i] * inv;
        y = y + z;
        float r = rintf(y);
        r = r < 0.0f ? 0.0f : r;
        r = r > 255.0f ? 255.0f : r;
        out[i] = isnan(r) ? 255 : (uint8_t)(int)r;
    }
}

void gc_dequantize_u8(const uint8_t *q, float *out, ptrdiff_t n, float scale, int32_t zp)
{
    const float z = (float)zp;
    for (ptrdiff_t i = 0; i < n; i++) {
        const float d = (float)q[i] - z;
        out[i] = d * scale;
    }
}

void gc_qim2col_u8(const uint8_t *x, uint8_t *rows, const gc_conv *p, uint8_t zp)
{
    const ptrdiff_t k = p->c * p->kh * p->kw;
    for (ptrdiff_t img = 0; img < p->n; img++)
        for (ptrdiff_t oy = 0; oy < p->oh; oy++)
            for (ptrdiff_t ox = 0; ox < p->ow; ox++) {
                uint8_t *r = rows + ((img * p->oh + oy) * p->ow + ox) * k;
                for (ptrdiff_t ci = 0; ci < p->c; ci++) {
                    const uint8_t *plane = x + (img * p->c + ci) * p->h * p->w;
                    for (ptrdiff_t ki = 0; ki < p->kh; ki++, r += p->kw) {
                        const ptrdiff_t iy = oy * p->sh - p->ph + ki * p->dh;
                        if (iy < 0 || iy >= p->h) {
                            memset(r, zp, (size_t)p->kw);
                            continue;
                        }
                        const uint8_t *line = plane + iy * p->w;
                        for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
                            const ptrdiff_t ix = ox * p->sw - p->pw + kj * p->dw;
                            r[kj] = ix >= 0 && ix < p->w ? line[ix] : zp;
                        }
                    }
                }
            }
}

/* out[img, j, pix] = t[img, pix, j] for items of esz bytes (1 or 4). */
static void q_to_nchw(const char *t, char *out, ptrdiff_t n, ptrdiff_t pix, ptrdiff_t o, int esz)
{
    for (ptrdiff_t img = 0; img < n; img++) {
        const char *src = t + img * pix * o * esz;
        char *dst = out + img * pix * o * esz;
        if (esz == 1) {
            for (ptrdiff_t q = 0; q < pix; q++)
                for (ptrdiff_t j = 0; j < o; j++)
                    dst[j * pix + q] = src[q * o + j];
        } else {
            for (ptrdiff_t q = 0; q < pix; q++)
                for (ptrdiff_t j = 0; j < o; j++)
                    memcpy(dst + (j * pix + q) * 4, src + (q * o + j) * 4, 4);
        }
    }
}

ptrdiff_t gc_qconv2d_work_bytes(const gc_conv *p, ptrdiff_t o, int esz)
{
    const ptrdiff_t m = p->n * p->oh * p->ow, k = p->c * p->kh * p->kw;
    return (m * k + 63) / 64 * 64 + m * o * esz;
}

int gc_qconv2d(const uint8_t *x, const gc_qpacked *B, void *out, uint8_t *work, const gc_conv *p,
               const gc_qargs *q)
{
    const ptrdiff_t m = p->n * p->oh * p->ow, k = p->c * p->kh * p->kw, o = B->n;
    const int esz = q->mode == GC_QOUT_I32 || q->mode == GC_QOUT_F32 ? 4 : 1;
    if (m == 0 || o == 0)
        return 0;
    uint8_t *rows = work;
    char *t = (char *)work + (m * k + 63) / 64 * 64;
    gc_qim2col_u8(x, rows, p, (uint8_t)q->a_zp);
    if (gc_qgemm(rows, m, k, B, t, o, q) < 0)
        return -1;
    q_to_nchw(t, (char *)out, p->n, p->oh * p->ow, o, esz);
    return 0;
}

void gc_max_pool2d_u8(const uint8_t *x, uint8_t *out, const gc_conv *p)
{
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
