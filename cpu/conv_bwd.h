/* What the conv2d backward drivers share (conv.c's GEMM path, conv_direct_backward.c,
 * conv_wtaps.c): the images of a claimed chunk with its bias-gradient partial zeroed; and the
 * bias gradient's row sum, which conv.c and conv_direct_backward.c call and conv_wtaps.c's lanes
 * reproduce, so that their float32 bias gradients have the same bits.  Each
 * driver sums its weight and bias gradients per chunk of images (chunks as conv.c's
 * GC_CONV_CHUNK, claimed through conv_claim.h) into partials that conv.c adds in chunk order. */
#ifndef GC_CONV_BWD_H
#define GC_CONV_BWD_H

#include <stddef.h>
#include <string.h>

/* Chunk ch of a backward (chunk images each, n images in all): its images [*b0, *b1), and its
 * bias-gradient partial (gb: the call's partials, o per chunk of esize bytes each, or NULL)
 * zeroed and returned (NULL without gb). */
static inline void *gc_conv_bwd_chunk(long ch, ptrdiff_t chunk, ptrdiff_t n, void *gb,
                                      ptrdiff_t o, size_t esize, ptrdiff_t *b0, ptrdiff_t *b1)
{
    *b0 = ch * chunk;
    *b1 = *b0 + chunk < n ? *b0 + chunk : n;
    if (!gb)
        return NULL;
    char *part = (char *)gb + (size_t)(ch * o) * esize;
    memset(part, 0, (size_t)o * esize); /* (+0.0's bits) */
    return part;
}

/* conv.c: the sum of r[0..n), one image's bias gradient of one output channel, in
 * GC_CONV_LANES interleaved partial sums added pairwise at the end (the same order on every ISA
 * and thread count). */
float gc_conv_rowsum_f32(const float *r, ptrdiff_t n);
double gc_conv_rowsum_f64(const double *r, ptrdiff_t n);

#endif
