/* What the float32 forward drivers (conv_direct.c, conv_direct_lanes.c, conv_c1.c, conv_pw.c,
 * conv_winograd.c) take from their call alike: each driver's job holds one gc_conv_fwd, filled
 * by gc_conv_fwd_init, and reads the input, the epilogue, the output and the sizes there. */
#ifndef GC_CONV_FWD_H
#define GC_CONV_FWD_H

#include <stddef.h>

#include "isa.h"
#include "kernels.h"

typedef struct {
    const float *x;    /* the input [n, c, h, w], or the driver's copy of it (padded, gathered) */
    const float *bias; /* [o], or NULL */
    const float *res;  /* the epilogue's residual (out's layout), or NULL */
    int relu;          /* the epilogue's relu */
    float *out;        /* [n, o, oh, ow] */
    const gc_conv *p;
    /* output channels, taps per output channel (c * kh * kw: a 1x1's input channels), pixels
     * per image (oh * ow) */
    ptrdiff_t o, ck, l;
} gc_conv_fwd;

/* f := the call's fields; e (gc_epi, its row bias passed apart as bias) may be NULL: no
 * residual, no relu. */
static inline void gc_conv_fwd_init(gc_conv_fwd *f, const float *x, const float *bias,
                                    const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o)
{
    f->x = x;
    f->bias = bias;
    f->res = e ? (const float *)e->res : NULL;
    f->relu = e && e->relu;
    f->out = out;
    f->p = p;
    f->o = o;
    f->ck = p->c * p->kh * p->kw;
    f->l = p->oh * p->ow;
}

/* conv.c: the call's weight as the GEMM packs w [o, ck] (side A, trans 0, the driver's swap; P
 * gc_gemm_pack_init'ed so, its K block and panels the driver's): pw's panels when pw holds that
 * layout, or w packed on the calling thread's scratch slot 4 when pw is NULL.  0 and *panels
 * set; 1 when pw has another layout (the caller's other paths); -1 when the layout's size
 * overflows or the scratch allocation fails. */
int gc_conv_weight_panels(const gc_conv_fwd *f, const float *w, const gc_packed *pw, int swap,
                          gc_packed *P, const float **panels);

/* Where element (f, k) of the matrix packed side A in P (any swap but 2: gc_gemm_pack's panels
 * of P->w rows per K block) lies in P's data (conv_direct.c's repacking of another layout,
 * conv_winograd.c's unpacking). */
static inline ptrdiff_t gc_conv_packed_at(const gc_packed *P, ptrdiff_t f, ptrdiff_t k)
{
    const ptrdiff_t pc = k / P->kc * P->kc, kb = P->k - pc < P->kc ? P->k - pc : P->kc;
    return pc * P->npan * P->w + f / P->w * P->w * kb + (k - pc) * P->w + f % P->w;
}

/* The threads the call's work is worth: 2 * n * o * ck * l flops, at least 0.25 M a thread (as
 * conv.c's GEMM path). */
static inline int gc_conv_fwd_threads(const gc_conv_fwd *f)
{
    const double flops = 2.0 * (double)f->p->n * (double)f->o * (double)f->ck * (double)f->l;
    return gc_threads_for(flops, 0.25e6);
}

#endif
