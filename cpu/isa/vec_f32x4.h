/* The kernel templates' vector macros (isa/ukr.h, isa/ukr_conv.h, isa/ukr_pw.h) for float32 in
 * SSE2's 4-wide registers (no FMA: a multiply, then an add): included before an instantiation,
 * replacing the set defined before it. */
#include "isa/vec_undef.h"
#define UKR_VT __m128
#define UKR_VL 4
#define V_ZERO() _mm_setzero_ps()
#define V_LOADU(p) _mm_loadu_ps(p)
#define V_STOREU(p, x) _mm_storeu_ps(p, x)
#define V_SET1(x) _mm_set1_ps(x)
#define V_FMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define V_ADD(a, b) _mm_add_ps(a, b)
