/* Triangular solves (TRSM) and the LU factorization's pivots (getrf's info), float32 / float64.
 *
 * trsm: op(A_i) X_i = B_i in place (X_i holds B_i on entry) for a batch of m x m triangular A_i
 * (the `upper` or lower triangle of each stored matrix is read; op(A) = A or A^T; a unit diagonal
 * is not read) and row-major m x n right-hand sides.  Blocked, left-looking, BLIS style: for
 * each block of GC_TRSM_NB rows of X, taken in the order op(A)'s triangle dictates (top down when
 * op(A) is lower, bottom up when upper),
 *
 *     X[J, :] -= op(A)[J, done] @ X[done, :]     one GEMM (gemm.c) over the rows already solved
 *     X[J, :]  = op(A)[J, J]^-1 X[J, :]          the same in blocks of GC_TRSM_NB_IN rows (the
 *                                                GEMM's small-M path), then substitution row by
 *                                                row in their diagonal blocks (axpy along n)
 *
 * X's rows are contiguous, so X[done, :] and X[J, :] are GEMM operands as they lie; the block row
 * op(A)[J, done] (strided, or transposed) is copied into a contiguous panel first (m x NB
 * elements of scratch: an O(m^2) copy against the O(m^2 n) product).  The diagonal blocks divide
 * (as LAPACK's reference dtrsm), so a zero on the diagonal gives inf / NaN, PyTorch's result.
 *
 * Items of a batch run on the pool (each on one thread, whose GEMM calls then run single
 * threaded); a lone item's GEMMs use the pool themselves.  The GEMM's bits never depend on the
 * thread count and nothing else is split, so neither do the solves'.
 *
 * getrf: the LU factorization P A = L U of a batch of n x n matrices in place, the row
 * permutation (perm[i]: the row of A that is row i of P A) and LAPACK getrf's info (0, or the
 * 1-based column of the first exactly zero pivot): right-looking partial pivoting in the
 * element's own type
 * (getf2's choices: the first largest |a| of the column as the pivot, the rows below times its
 * reciprocal (divided when it is tiny), a zero pivot recorded and passed over).  Blocked as dgetrf: a
 * panel of GC_LU_NB columns by getf2, its row swaps across the matrix, U12 by unit-lower
 * substitution and A22 -= L21 U12 as one GEMM on contiguous copies. */
#ifndef GC_T

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

#define GC_TRSM_NB 64   /* rows of X per block: the blocked GEMM's */
#define GC_TRSM_NB_IN 8 /* rows per block inside one: the small-M GEMM's, then substitution */
#define GC_LU_NB 48   /* columns per LU panel */

#define GC_BODY "trsm.c"
#include "each_float.h"

#else /* type-generic body, T = GC_T */

/* element (i, j) of op(A) for row-major A with row stride m */
#define GC_OPA(a, i, j) ((trans) ? (a)[(j) * m + (i)] : (a)[(i) * m + (j)])

/* Solves rows [r0, r1) of one item (op(A)[R, R] X[R, :] = X[R, :], the rows of R's other
 * blocks already applied by the caller) in blocks of nb rows: a (m x m), x (m x n) in place;
 * panel: GC_TRSM_NB * m elements.  A block of more than GC_TRSM_NB_IN rows is solved the same
 * way in blocks of GC_TRSM_NB_IN (the small-M GEMM path), so that the plain-C substitution
 * only meets GC_TRSM_NB_IN x GC_TRSM_NB_IN diagonal blocks. */
static int GC_FN(trsm_rows)(const GC_T *a, GC_T *x, ptrdiff_t m, ptrdiff_t n, int upper,
                            int trans, int unit, GC_T *panel, ptrdiff_t r0, ptrdiff_t r1,
                            ptrdiff_t nb)
{
    const int lower = upper == trans; /* op(A)'s triangle */
    const ptrdiff_t nblk = (r1 - r0 + nb - 1) / nb;
    for (ptrdiff_t s = 0; s < nblk; s++) {
        /* block J = [j0, j1): top down for a lower op(A), bottom up for an upper one */
        const ptrdiff_t b = lower ? s : nblk - 1 - s;
        const ptrdiff_t j0 = r0 + b * nb, j1 = j0 + nb < r1 ? j0 + nb : r1, jb = j1 - j0;
        const ptrdiff_t d0 = lower ? r0 : j1, kd = lower ? j0 - r0 : r1 - j1; /* solved rows */
        if (kd > 0) {
            for (ptrdiff_t i = 0; i < jb; i++)
                for (ptrdiff_t k = 0; k < kd; k++)
                    panel[i * kd + k] = GC_OPA(a, j0 + i, d0 + k);
            if (GC_FN(gc_gemm)(panel, x + d0 * n, x + j0 * n, 1, jb, n, kd, 0, 0, (GC_T)-1,
                               (GC_T)1, 0, 0, 0) < 0)
                return -1;
        }
        if (jb > GC_TRSM_NB_IN) {
            if (GC_FN(trsm_rows)(a, x, m, n, upper, trans, unit, panel, j0, j1, GC_TRSM_NB_IN) < 0)
                return -1;
            continue;
        }
        /* the diagonal block: rows in the triangle's order, each less its solved neighbours */
        for (ptrdiff_t t = 0; t < jb; t++) {
            const ptrdiff_t i = lower ? j0 + t : j1 - 1 - t;
            GC_T *restrict xi = x + i * n;
            const ptrdiff_t k0 = lower ? j0 : i + 1, k1 = lower ? i : j1;
            for (ptrdiff_t k = k0; k < k1; k++) {
                const GC_T f = GC_OPA(a, i, k);
                const GC_T *restrict xk = x + k * n;
                for (ptrdiff_t j = 0; j < n; j++)
                    xi[j] -= f * xk[j];
            }
            if (!unit) {
                const GC_T d = GC_OPA(a, i, i);
                for (ptrdiff_t j = 0; j < n; j++)
                    xi[j] /= d;
            }
        }
    }
    return 0;
}

static int GC_FN(trsm_one)(const GC_T *a, GC_T *x, ptrdiff_t m, ptrdiff_t n, int upper,
                           int trans, int unit, GC_T *panel)
{
    return GC_FN(trsm_rows)(a, x, m, n, upper, trans, unit, panel, 0, m, GC_TRSM_NB);
}

typedef struct {
    const GC_T *a;
    GC_T *x;
    ptrdiff_t m, n, sa;
    int upper, trans, unit;
    atomic_int fail;
} GC_FN(trsm_job);

static void GC_FN(trsm_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(trsm_job) *J = ctx;
    GC_T *panel = malloc(sizeof(GC_T) * (size_t)(GC_TRSM_NB * (J->m > 0 ? J->m : 1)));
    if (!panel) {
        atomic_store(&J->fail, 1);
        return;
    }
    for (ptrdiff_t i = lo; i < hi; i++)
        if (GC_FN(trsm_one)(J->a + i * J->sa, J->x + i * J->m * J->n, J->m, J->n, J->upper,
                            J->trans, J->unit, panel) < 0)
            atomic_store(&J->fail, 1);
    free(panel);
}

int GC_FN(gc_trsm)(const GC_T *a, GC_T *x, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n,
                   ptrdiff_t sa, int upper, int trans, int unit)
{
    GC_FN(trsm_job) J = {.a = a, .x = x, .m = m, .n = n, .sa = sa, .upper = upper,
                         .trans = trans, .unit = unit};
    atomic_init(&J.fail, 0);
    if (batch <= 0 || m <= 0 || n <= 0)
        return 0;
    if (batch == 1) /* the GEMMs spread over the pool themselves */
        GC_FN(trsm_range)(&J, 0, 1);
    else /* ~0.5 ns per multiply-add of the m^2 n / 2, one item per thread at a time */
        gc_parallel_range(batch, 1, 0.5 * (double)batch * (double)m * (double)m * (double)n,
                          GC_FN(trsm_range), &J);
    return atomic_load(&J.fail) ? -1 : 0;
}

#undef GC_OPA

/* getf2 on the panel of columns [c0, c1) of rows [c0, n) of a (row stride n): pivots found in
 * the panel, their rows swapped across the whole matrix (and in perm, when not NULL); the first
 * zero pivot's 1-based column into *info (when still 0). */
static void GC_FN(lu_panel)(GC_T *a, ptrdiff_t n, ptrdiff_t c0, ptrdiff_t c1, int32_t *perm,
                            int32_t *info)
{
    for (ptrdiff_t j = c0; j < c1; j++) {
        ptrdiff_t p = j;
        GC_T best = a[j * n + j] < 0 ? -a[j * n + j] : a[j * n + j];
        for (ptrdiff_t i = j + 1; i < n; i++) {
            const GC_T v = a[i * n + j] < 0 ? -a[i * n + j] : a[i * n + j];
            if (v > best) { /* the first largest, as i?amax */
                best = v;
                p = i;
            }
        }
        if (a[p * n + j] != 0) {
            if (p != j) {
                GC_T *restrict rp = a + p * n, *restrict rj = a + j * n;
                for (ptrdiff_t k = 0; k < n; k++) {
                    const GC_T t = rp[k];
                    rp[k] = rj[k];
                    rj[k] = t;
                }
                if (perm) {
                    const int32_t t = perm[p];
                    perm[p] = perm[j];
                    perm[j] = t;
                }
            }
            const GC_T d = a[j * n + j], ad = d < 0 ? -d : d;
            if (ad >= (sizeof(GC_T) == 4 ? (GC_T)1.17549435e-38f : (GC_T)2.2250738585072014e-308)) {
                const GC_T rd = (GC_T)1 / d; /* dgetrf2: times the reciprocal (unless tiny) */
                for (ptrdiff_t i = j + 1; i < n; i++)
                    a[i * n + j] *= rd;
            } else {
                for (ptrdiff_t i = j + 1; i < n; i++)
                    a[i * n + j] /= d;
            }
        } else if (*info == 0) {
            *info = (int32_t)(j + 1);
        }
        const GC_T *restrict uj = a + j * n;
        for (ptrdiff_t i = j + 1; i < n; i++) { /* the panel's rank-1 update */
            GC_T *restrict ri = a + i * n;
            const GC_T l = ri[j];
            for (ptrdiff_t k = j + 1; k < c1; k++)
                ri[k] -= l * uj[k];
        }
    }
}

/* One matrix a (n x n, overwritten by its LU factors; perm NULL or n rows); scratch: 2 n
 * GC_LU_NB + n^2 elements. */
static int GC_FN(lu_one)(GC_T *a, ptrdiff_t n, int32_t *perm, int32_t *info, GC_T *scratch)
{
    *info = 0;
    if (perm)
        for (ptrdiff_t i = 0; i < n; i++)
            perm[i] = (int32_t)i;
    for (ptrdiff_t c0 = 0; c0 < n; c0 += GC_LU_NB) {
        const ptrdiff_t c1 = c0 + GC_LU_NB < n ? c0 + GC_LU_NB : n, jb = c1 - c0, r = n - c1;
        GC_FN(lu_panel)(a, n, c0, c1, perm, info);
        if (r == 0)
            break;
        /* U12 = L11^-1 A12 (unit lower, rows c0 .. c1) */
        for (ptrdiff_t i = c0 + 1; i < c1; i++) {
            GC_T *restrict ri = a + i * n + c1;
            for (ptrdiff_t k = c0; k < i; k++) {
                const GC_T l = a[i * n + k];
                const GC_T *restrict rk = a + k * n + c1;
                for (ptrdiff_t j = 0; j < r; j++)
                    ri[j] -= l * rk[j];
            }
        }
        /* A22 -= L21 U12 on contiguous copies */
        GC_T *l21 = scratch, *u12 = scratch + r * jb, *a22 = scratch + 2 * r * jb;
        for (ptrdiff_t i = 0; i < r; i++) {
            memcpy(l21 + i * jb, a + (c1 + i) * n + c0, sizeof(GC_T) * (size_t)jb);
            memcpy(a22 + i * r, a + (c1 + i) * n + c1, sizeof(GC_T) * (size_t)r);
        }
        for (ptrdiff_t i = 0; i < jb; i++)
            memcpy(u12 + i * r, a + (c0 + i) * n + c1, sizeof(GC_T) * (size_t)r);
        if (GC_FN(gc_gemm)(l21, u12, a22, 1, r, r, jb, 0, 0, (GC_T)-1, (GC_T)1, 0, 0, 0) < 0)
            return -1;
        for (ptrdiff_t i = 0; i < r; i++)
            memcpy(a + (c1 + i) * n + c1, a22 + i * r, sizeof(GC_T) * (size_t)r);
    }
    return 0;
}

typedef struct {
    GC_T *a;
    int32_t *perm, *info;
    ptrdiff_t n;
    atomic_int fail;
} GC_FN(lu_job);

static void GC_FN(lu_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_FN(lu_job) *J = ctx;
    const ptrdiff_t n = J->n;
    GC_T *s = malloc(sizeof(GC_T) * (size_t)(2 * n * GC_LU_NB + n * n + 1));
    if (!s) {
        atomic_store(&J->fail, 1);
        return;
    }
    for (ptrdiff_t i = lo; i < hi; i++)
        if (GC_FN(lu_one)(J->a + i * n * n, n, J->perm ? J->perm + i * n : NULL, J->info + i,
                          s) < 0)
            atomic_store(&J->fail, 1);
    free(s);
}

int GC_FN(gc_getrf)(GC_T *a, int32_t *perm, int32_t *info, ptrdiff_t batch, ptrdiff_t n)
{
    GC_FN(lu_job) J = {.a = a, .perm = perm, .info = info, .n = n};
    atomic_init(&J.fail, 0);
    if (batch <= 0)
        return 0;
    if (n <= 0) {
        memset(info, 0, sizeof(int32_t) * (size_t)batch);
        return 0;
    }
    if (batch == 1)
        GC_FN(lu_range)(&J, 0, 1);
    else /* ~0.5 ns per multiply-add of the n^3 / 3 */
        gc_parallel_range(batch, 1, 0.5 * (double)batch * (double)n * (double)n * (double)n / 3,
                          GC_FN(lu_range), &J);
    return atomic_load(&J.fail) ? -1 : 0;
}

#endif
