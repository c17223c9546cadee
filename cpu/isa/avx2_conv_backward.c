/* AVX2 + FMA convolution-backward kernels (compiled with -mavx2 -mfma): the few-taps weight
 * gradient (isa/conv_wtaps.h) in 8-lane vectors, a tile of 2 output channels x up to 5 taps
 * (10 accumulators, two g vectors, two bias lanes and a tap vector of the 16 YMM registers). */
#include <immintrin.h>

#include "isa.h"

/* the vector set, then the kernel's own: the masked tail load, the bias lanes, the tile */
#include "isa/vec_f32x8.h"

/* the first n < 8 lanes' mask for _mm256_maskload_ps (nothing past them read) */
static inline __m256i wt_avx2_mask(int n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define WT_LOADM(p, n) _mm256_maskload_ps(p, wt_avx2_mask(n))
#define WT_GB(s, v) _mm256_add_ps(s, v)
#define WT_OB 2
#define WT_TB 5
#define WT_NAME wtaps_avx2_f32
#include "isa/conv_wtaps.h"

void gc_conv_bwd_fill_avx2(gc_isa_kernels *k)
{
    k->wtaps_f32 = wtaps_avx2_f32;
    k->wtaps_vl = UKR_VL;
}
