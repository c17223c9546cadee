/* special_poly.c: the orthogonal polynomials of torch.special at x for degree n, in the
 * element's own type with PyTorch's algorithms (aten's Math.h): n truncated to an integer (0 for
 * negative n), the exact values at the end points, the three-term recurrences (Chebyshev T, U,
 * V, W and their shifted forms on [0, 1], Hermite H and He, Laguerre L, Legendre P), and for the
 * Chebyshev families inside (-1, 1) above degree 6 or 8 the closed forms cos(n acos x), ...  A
 * recurrence stops early once it is NaN (it stays NaN), so a huge degree at |x| > 1, where the
 * values overflow, costs a few hundred steps; inside [-1, 1] Legendre's and Laguerre's run all
 * n steps, as PyTorch's.  Each step rounds as PyTorch's build does (its a * b - c contracted into
 * one fused multiply-add): the float32 results are PyTorch's bit for bit. */
#include "kernels.h"
#include "special.h"

#include <tgmath.h>

/* a * b - c rounded once (libm's fmaf / fma use the FMA instruction where the CPU has one; a
 * float product exact in double followed by a double subtraction would round twice). */
#define PT float
#define PF(name) name##_f
#define PFMS(a, b, c) fmaf((a), (b), -(c))
#include "special_poly.h"
#undef PT
#undef PF
#undef PFMS

#define PT double
#define PF(name) name##_d
#define PFMS(a, b, c) fma((a), (b), -(c))
#include "special_poly.h"
#undef PT
#undef PF
#undef PFMS
