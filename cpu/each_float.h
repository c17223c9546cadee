/* The float32 and float64 instances of a type-generic kernel file.  A file written once over the
 * element type (its body under `#ifndef GC_T ... #else`) defines GC_BODY as its own name, quoted,
 * and includes this header, which includes GC_BODY twice: with GC_T float, GC_SFX f32 (GC_FN's
 * suffix) and GC_M(fn) fn##f (the libm function of that type: GC_M(exp) is expf), then with double,
 * f64 and fn.  No include guard: each kernel file includes it once, for its own body. */

#define GC_T float
#define GC_SFX f32
#define GC_M(fn) fn##f
#include GC_BODY
#undef GC_T
#undef GC_SFX
#undef GC_M

#define GC_T double
#define GC_SFX f64
#define GC_M(fn) fn
#include GC_BODY
#undef GC_T
#undef GC_SFX
#undef GC_M

#undef GC_BODY
