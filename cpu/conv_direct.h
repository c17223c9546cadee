/* What the direct convolution's forward (conv_direct.c) and backward (conv_direct_backward.c)
 * share: the path rule, the padded image and the plain tile store. */
#ifndef GC_CONV_DIRECT_H
#define GC_CONV_DIRECT_H

#include <stddef.h>

#include "kernels.h"

/* the backward's direct path from this many output pixels per image (gc_conv2d_direct_backward_use) */
#define GC_DCONV_MIN_PIXELS 64
/* ... and from more than this many kernel taps per output channel (c * kh * kw) for the weight
 * gradient */
#define GC_DCONV_MIN_TAPS 16

/* a test / benchmark switch set to anything but "0" */
int dconv_env_on(const char *name);
/* GPUCORE_CONV forcing a path: 0 the rule, 1 im2col, 2 direct */
int dconv_forced(void);
/* The rule for the forward (fwd) or the backward (the caller's further conditions apply). */
int dconv_use(const gc_conv *p, ptrdiff_t o, int fwd);
/* The image x [c, h, w] into pad [c, hp, wp], zero borders. */
void dconv_pad(const float *restrict x, float *restrict pad, const gc_conv *p, ptrdiff_t hp,
               ptrdiff_t wp);

/* One tile of T (mv <= mr pixels x nv <= nr channels, row-major, nr wide) to c, element (pixel
 * ii, channel j) at c[j*l + ii], plus bias[j] (NULL: none); inline so that the full tiles of
 * the ISA's shape compile with constant bounds. */
static inline void dconv_tile_out(float *restrict c, ptrdiff_t l, const float *restrict t,
                                  int nr, ptrdiff_t mv, ptrdiff_t nv, const float *bias)
{
    for (ptrdiff_t j = 0; j < nv; j++) {
        const float bv = bias ? bias[j] : 0.0f;
        float *cj = c + j * l;
        if (bias)
            for (ptrdiff_t ii = 0; ii < mv; ii++)
                cj[ii] = t[ii * nr + j] + bv;
        else
            for (ptrdiff_t ii = 0; ii < mv; ii++)
                cj[ii] = t[ii * nr + j];
    }
}

#endif
