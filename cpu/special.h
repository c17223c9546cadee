/* special.h: the scalar functions behind gc_special / gc_special2 (special.c's drivers), one
 * file per family: special.c (I0/I1, erfcx, ndtri, entr), special_bessel.c (J, Y, K, j0, Ai),
 * special_gamma.c (zeta, igamma), special_poly.c (the orthogonal polynomials). */
#ifndef GC_SPECIAL_H
#define GC_SPECIAL_H

#include <stdint.h>

#define GC_PI 3.14159265358979323846
#define GC_EULER 0.57721566490153286061

/* special_bessel.c, in double: I_n / K_n (n 0 or 1; scaled: exp(-|x|) I_n(x), exp(x) K_n(x)),
 * J_n / Y_n, sin(x)/x, Ai. */
double gc_sp_bessel_i(int n, int scaled, double x);
double gc_sp_bessel_j(int n, double x);
double gc_sp_bessel_y(int n, double x);
double gc_sp_bessel_k(int n, int scaled, double x);
double gc_sp_spherical_j0(double x);
double gc_sp_airy_ai(double x);

/* special_gamma.c, in double: Hurwitz zeta, P(a, x) (upper = 0) or Q(a, x) (upper = 1). */
double gc_sp_zeta(double x, double q);
double gc_sp_igamma(double a, double x, int upper);

/* special_poly.c: p_n(x) for the GC_SPECIAL2 polynomial op, in the element's own type (as
 * PyTorch: the recurrence in float for float32); n is the degree as given (a float, cast to
 * int64 the way x86 does: NaN, infinities and |n| >= 2^63 become INT64_MIN). */
float gc_sp_poly_f(int op, float x, float n);
double gc_sp_poly_d(int op, double x, double n);

#endif
