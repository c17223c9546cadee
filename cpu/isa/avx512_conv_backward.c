/* AVX-512 convolution-backward kernels (compiled with -mavx512f -mavx2 -mfma): the few-taps
 * weight gradient (isa/conv_wtaps.h) in 16-lane vectors, a tile of 4 output channels x up to 5
 * taps (20 accumulators, the channels' g vectors and bias lanes and a tap vector: 29 of the 32
 * ZMM registers; per 16 pixels 4 + 5 loads for 20 FMAs). */
#include <immintrin.h>

#include "isa.h"

/* the vector set, then the kernel's own: the masked tail load, the bias lanes, the tile */
#include "isa/vec_f32x16.h"

#define WT_LOADM(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), p)
/* lanes 0..7 then 8..15: gc_conv_rowsum's order over 16 consecutive pixels */
#define WT_GB(s, v)                                                                            \
    _mm256_add_ps(_mm256_add_ps(s, _mm512_castps512_ps256(v)),                                 \
                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
#define WT_OB 4
#define WT_TB 5
#define WT_NAME wtaps_avx512_f32
#include "isa/conv_wtaps.h"

void gc_conv_bwd_fill_avx512(gc_isa_kernels *k)
{
    k->wtaps_f32 = wtaps_avx512_f32;
    k->wtaps_vl = UKR_VL;
}
