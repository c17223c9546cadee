/* The kernel templates' vector macros (isa/ukr.h, isa/ukr_conv.h, isa/ukr_pw.h) for float32 in
 * 8-wide registers: included before an instantiation, replacing the set defined before it. */
#include "isa/vec_undef.h"
#define UKR_VT __m256
#define UKR_VL 8
#define V_ZERO() _mm256_setzero_ps()
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, x) _mm256_storeu_ps(p, x)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm256_add_ps(a, b)
