/* Checks one instruction set's kernels of gpucore._cpu against the portable scalar ones, without
 * Python: built from the C sources that do not include Python.h and run by tools/check_neon.sh,
 * for arm64 under qemu-aarch64 (and natively for an x86 ISA, to compare the vector math bits).
 *
 *   neon_check [isa]        isa: neon (default), avx2, avx512, ...
 *
 * - GEMM through the shared driver (gemm.c: packing, blocking, edge tiles, A / B read in place,
 *   the swapped C^T mode, batches, threads), with the ISA's micro-kernels against the scalar
 *   ones: relative error in the Frobenius norm <= 1e-4 (float32) / 1e-12 (float64); the scalar
 *   results against a float64 triple loop as well, so a fault in the shared code shows too.
 * - The float32 vector math (exp, log, tanh, sigmoid, gelu, gelu_tanh) against double libm on a
 *   dense sweep of the float range plus special values, with cpu/README.md's bounds; every tail
 *   length, in place; prints a digest of the outputs (NaNs canonical) so that two ISAs can be
 *   compared bit for bit (NEON_CHECK_DUMP=file also writes the inputs and outputs there).
 * - The optimizer loops (isa/optim.h) bitwise equal to the scalar build's, for every option.
 * - Dispatch: the ISA is selectable, and on arm64 it is the default and x86 names are refused.
 *
 * Exits 1 on any mismatch (the first few are printed), after a short summary. */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isa.h"
#include "kernels.h"

static int failures;

#define FAIL(...)                                                                                 \
    do {                                                                                          \
        if (++failures <= 25) {                                                                   \
            fprintf(stderr, "MISMATCH: ");                                                        \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
        }                                                                                         \
    } while (0)

static const char *isa_name = "neon";

/* Fills gc_isa with the named ISA's kernels (the import-time selection, forced). */
static void use_isa(const char *name)
{
    char err[512];
    if (gc_cpu_init(name, err, sizeof err) != 0) {
        fprintf(stderr, "neon_check: cannot select %s: %s\n", name, err);
        exit(2);
    }
}

/* splitmix64: a reproducible stream whatever the platform's rand() */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static double rng_unif(void)
{
    return (double)(rng_next() >> 11) * 0x1p-52 - 1.0;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "neon_check: out of memory\n");
        exit(2);
    }
    return p;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- GEMM ----------------------------------------------------------------------------------- */

typedef struct {
    ptrdiff_t m, n, k;
    int ta, tb;
    double alpha, beta;
    ptrdiff_t batch, sa, sb, sc;
    int bias, act; /* act: -1 or GC_UNARY_* */
} gemm_case;

typedef struct {
    int cases;
    double max_isa, max_ref; /* ISA vs scalar; scalar vs the float64 loop */
} gemm_stats;

static gemm_stats st_f32, st_f64;

/* Work (multiply-adds) up to which the float64 triple loop also runs: it is slow under qemu. */
#define REF_WORK 2.0e6

static double act64(int act, double v)
{
    switch (act) {
    case GC_UNARY_RELU: return v <= 0.0 ? 0.0 : v;
    case GC_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case GC_UNARY_TANH: return tanh(v);
    case GC_UNARY_GELU: return 0.5 * v * erfc(-v * 0.70710678118654752440);
    case GC_UNARY_GELU_TANH:
        return 0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
    default: return v;
    }
}

static const char *act_name(int act)
{
    switch (act) {
    case GC_UNARY_RELU: return "relu";
    case GC_UNARY_SIGMOID: return "sigmoid";
    case GC_UNARY_TANH: return "tanh";
    case GC_UNARY_GELU: return "gelu";
    case GC_UNARY_GELU_TANH: return "gelu_tanh";
    default: return "none";
    }
}

/* One case in one float type: the ISA and the scalar kernels on the same inputs.  With beta == 0
 * C starts as NaN (it must not be read); gaps between batch items must stay untouched. */
#define DEFINE_GEMM_CHECK(T, S, TOL_ISA, TOL_REF)                                                 \
    static void gemm_check_##S(const gemm_case *g)                                                \
    {                                                                                             \
        const ptrdiff_t m = g->m, n = g->n, k = g->k, bt = g->batch;                              \
        const ptrdiff_t na = (bt - 1) * g->sa + m * k, nb = (bt - 1) * g->sb + k * n;             \
        const ptrdiff_t nc = (bt - 1) * g->sc + m * n;                                            \
        T *a = xmalloc(sizeof(T) * (size_t)na), *b = xmalloc(sizeof(T) * (size_t)nb);             \
        T *c0 = xmalloc(sizeof(T) * (size_t)nc), *cr = xmalloc(sizeof(T) * (size_t)nc);           \
        T *ci = xmalloc(sizeof(T) * (size_t)nc), *bias = xmalloc(sizeof(T) * (size_t)n);          \
        for (ptrdiff_t i = 0; i < na; i++)                                                        \
            a[i] = (T)rng_unif();                                                                 \
        for (ptrdiff_t i = 0; i < nb; i++)                                                        \
            b[i] = (T)rng_unif();                                                                 \
        for (ptrdiff_t i = 0; i < nc; i++)                                                        \
            c0[i] = g->beta == 0.0 ? (T)NAN : (T)rng_unif();                                      \
        for (ptrdiff_t j = 0; j < n; j++)                                                         \
            bias[j] = (T)rng_unif();                                                              \
        const T *bp = g->bias ? bias : NULL;                                                      \
        memcpy(cr, c0, sizeof(T) * (size_t)nc);                                                   \
        memcpy(ci, c0, sizeof(T) * (size_t)nc);                                                   \
        use_isa("scalar");                                                                        \
        int rc = gc_gemm_ex_##S(a, b, cr, bt, m, n, k, g->ta, g->tb, (T)g->alpha, (T)g->beta,     \
                                g->sa, g->sb, g->sc, bp, g->act);                                 \
        use_isa(isa_name);                                                                        \
        rc |= gc_gemm_ex_##S(a, b, ci, bt, m, n, k, g->ta, g->tb, (T)g->alpha, (T)g->beta,        \
                             g->sa, g->sb, g->sc, bp, g->act);                                    \
        char what[160];                                                                           \
        snprintf(what, sizeof what,                                                               \
                 #S " m=%td n=%td k=%td ta=%d tb=%d alpha=%g beta=%g batch=%td sa=%td sb=%td "    \
                    "sc=%td bias=%d act=%s",                                                      \
                 m, n, k, g->ta, g->tb, g->alpha, g->beta, bt, g->sa, g->sb, g->sc, g->bias,      \
                 act_name(g->act));                                                               \
        if (rc != 0)                                                                              \
            FAIL("%s: gemm returned %d", what, rc);                                               \
        /* elements no item writes (gaps, sc > m*n) must keep their bits */                       \
        unsigned char *written = calloc((size_t)nc, 1);                                           \
        if (!written)                                                                             \
            exit(2);                                                                              \
        for (ptrdiff_t q = 0; q < bt; q++)                                                        \
            memset(written + q * g->sc, 1, (size_t)(m * n));                                      \
        double dd = 0.0, rr = 0.0;                                                                \
        int nan_out = 0, gap_bad = 0;                                                             \
        for (ptrdiff_t i = 0; i < nc; i++) {                                                      \
            if (!written[i]) {                                                                    \
                gap_bad |= memcmp(&ci[i], &c0[i], sizeof(T)) | memcmp(&cr[i], &c0[i], sizeof(T)); \
                continue;                                                                         \
            }                                                                                     \
            nan_out |= isnan(ci[i]) || isnan(cr[i]);                                              \
            const double d = (double)ci[i] - (double)cr[i];                                       \
            dd += d * d;                                                                          \
            rr += (double)cr[i] * (double)cr[i];                                                  \
        }                                                                                         \
        const double rel = rr > 0.0 ? sqrt(dd / rr) : sqrt(dd);                                    \
        if (nan_out)                                                                              \
            FAIL("%s: NaN in C (finite inputs; beta == 0 must not read C)", what);                \
        if (gap_bad)                                                                              \
            FAIL("%s: an element between batch items was written", what);                         \
        if (!(rel <= (TOL_ISA)))                                                                  \
            FAIL("%s: %s vs scalar relative error %.3g > %g", what, isa_name, rel, (TOL_ISA));    \
        st_##S.cases++;                                                                           \
        if (rel > st_##S.max_isa)                                                                 \
            st_##S.max_isa = rel;                                                                 \
        /* the scalar result against a float64 triple loop (items in order: sc == 0 adds up) */  \
        if ((double)bt * (double)m * (double)n * (double)k <= REF_WORK) {                         \
            double *cd = xmalloc(sizeof(double) * (size_t)nc);                                    \
            for (ptrdiff_t i = 0; i < nc; i++)                                                    \
                cd[i] = (double)c0[i];                                                            \
            for (ptrdiff_t q = 0; q < bt; q++) {                                                  \
                const T *A = a + q * g->sa, *B = b + q * g->sb;                                   \
                double *Cq = cd + q * g->sc;                                                      \
                for (ptrdiff_t i = 0; i < m; i++)                                                 \
                    for (ptrdiff_t j = 0; j < n; j++) {                                           \
                        double s = 0.0;                                                           \
                        for (ptrdiff_t p = 0; p < k; p++)                                         \
                            s += (double)(g->ta ? A[p * m + i] : A[i * k + p]) *                  \
                                 (double)(g->tb ? B[j * k + p] : B[p * n + j]);                   \
                        double v = g->alpha * s;                                                  \
                        if (g->beta != 0.0)                                                       \
                            v += g->beta * Cq[i * n + j];                                         \
                        if (bp)                                                                   \
                            v += (double)bp[j];                                                   \
                        Cq[i * n + j] = act64(g->act, v);                                         \
                    }                                                                             \
            }                                                                                     \
            double d2 = 0.0, r2 = 0.0;                                                            \
            for (ptrdiff_t i = 0; i < nc; i++) {                                                  \
                if (!written[i])                                                                  \
                    continue;                                                                     \
                const double d = (double)cr[i] - cd[i];                                           \
                d2 += d * d;                                                                      \
                r2 += cd[i] * cd[i];                                                              \
            }                                                                                     \
            const double rel2 = r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);                               \
            if (!(rel2 <= (TOL_REF)))                                                             \
                FAIL("%s: scalar vs float64 loop relative error %.3g > %g", what, rel2,           \
                     (TOL_REF));                                                                  \
            if (rel2 > st_##S.max_ref)                                                            \
                st_##S.max_ref = rel2;                                                            \
            free(cd);                                                                             \
        }                                                                                         \
        free(written);                                                                            \
        free(a);                                                                                  \
        free(b);                                                                                  \
        free(c0);                                                                                 \
        free(cr);                                                                                 \
        free(ci);                                                                                 \
        free(bias);                                                                               \
    }

DEFINE_GEMM_CHECK(float, f32, 1e-4, 1e-5)
DEFINE_GEMM_CHECK(double, f64, 1e-12, 1e-12)

static void gemm_both(const gemm_case *g)
{
    gemm_check_f32(g);
    gemm_check_f64(g);
}

static const double ALPHA_BETA[][2] = {{1.0, 0.0}, {0.5, 2.0}, {-1.5, 1.0}, {2.0, -0.25}};

static void check_gemm(void)
{
    /* the sizes of the brief: around the tiles of every ISA (4, 6, 8, 12, 14, 16, 32) and the
     * blocks, plus a few around 1000 (several K blocks, several threads) */
    static const ptrdiff_t sizes[] = {1, 2, 5, 6, 7, 31, 33, 64, 65, 255, 257};
    static const ptrdiff_t big[] = {999, 1000, 1031};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]), nbig = (int)(sizeof big / sizeof big[0]);
    int ci = 0;
    /* each size in each of m, n, k, the other two drawn at random (work capped so that qemu
     * stays quick), each triple with all four transpose combinations */
    for (int pos = 0; pos < 3; pos++) {
        for (int s = 0; s < ns + nbig; s++) {
            const ptrdiff_t v = s < ns ? sizes[s] : big[s - ns];
            const double cap = s < ns ? 1.2e6 : 3.0e6;
            ptrdiff_t mnk[3];
            do {
                for (int d = 0; d < 3; d++)
                    mnk[d] = sizes[rng_next() % (uint64_t)ns];
                mnk[pos] = v;
            } while ((double)mnk[0] * (double)mnk[1] * (double)mnk[2] > cap);
            for (int t = 0; t < 4; t++, ci++) {
                const gemm_case g = {mnk[0], mnk[1], mnk[2], t & 1, t >> 1,
                                     ALPHA_BETA[ci % 4][0], ALPHA_BETA[ci % 4][1], 1, 0, 0, 0,
                                     0, -1};
                gemm_both(&g);
            }
        }
    }
    /* every small shape around the NEON (8 x 12 / 8 x 6) and scalar (4 x 4) tiles: edge tiles,
     * A and B read in place or packed, the swapped mode */
    static const ptrdiff_t small[] = {1, 3, 4, 7, 8, 9, 12, 13, 17};
    const int nsm = (int)(sizeof small / sizeof small[0]);
    for (int i = 0; i < nsm; i++)
        for (int j = 0; j < nsm; j++)
            for (int l = 0; l < nsm; l++, ci++) {
                const gemm_case g = {small[i], small[j], small[l], ci & 1, (ci >> 1) & 1,
                                     ALPHA_BETA[ci % 4][0], ALPHA_BETA[ci % 4][1], 1, 0, 0, 0,
                                     0, -1};
                gemm_both(&g);
            }
    /* batches: strided A, B broadcast (stride 0), gaps between the C items; and C stride 0
     * (the items accumulate in order) */
    static const ptrdiff_t bshape[][3] = {{7, 33, 65}, {65, 31, 7}, {31, 64, 257}, {9, 13, 8}};
    for (int s = 0; s < 4; s++) {
        const ptrdiff_t m = bshape[s][0], n = bshape[s][1], k = bshape[s][2];
        for (int t = 0; t < 4; t++) {
            const gemm_case g1 = {m, n, k, t & 1, t >> 1, 0.75, 0.5, 5, m * k, 0, m * n + 3, 0, -1};
            const gemm_case g2 = {m, n, k, t & 1, t >> 1, 1.0, 1.0, 5, m * k, n * k, 0, 0, -1};
            const gemm_case g3 = {m, n, k, t & 1, t >> 1, -2.0, 0.0, 3, m * k, n * k, m * n, 0, -1};
            gemm_both(&g1);
            gemm_both(&g2);
            gemm_both(&g3);
        }
    }
    /* fused epilogue: bias and relu in the micro-kernel, the other activations after it (the
     * vector math); shapes that run swapped (small n) included */
    static const int acts[] = {-1, GC_UNARY_RELU, GC_UNARY_SIGMOID, GC_UNARY_TANH, GC_UNARY_GELU,
                               GC_UNARY_GELU_TANH};
    static const ptrdiff_t eshape[][3] = {{64, 33, 65}, {257, 5, 31}, {6, 65, 1000}, {1, 1, 7},
                                          {13, 12, 9}};
    for (int s = 0; s < 5; s++)
        for (int ai = 0; ai < 6; ai++) {
            const gemm_case g = {eshape[s][0], eshape[s][1], eshape[s][2], ai & 1, (ai >> 1) & 1,
                                 1.25, ai % 3 ? 0.5 : 0.0, 1, 0, 0, 0, ai % 2 == 0, acts[ai]};
            gemm_both(&g);
        }
    printf("gemm float32: %d cases, %s vs scalar max rel err %.2e (limit 1e-4); scalar vs "
           "float64 loop %.2e (limit 1e-5)\n",
           st_f32.cases, isa_name, st_f32.max_isa, st_f32.max_ref);
    printf("gemm float64: %d cases, %s vs scalar max rel err %.2e (limit 1e-12); scalar vs "
           "float64 loop %.2e (limit 1e-12)\n",
           st_f64.cases, isa_name, st_f64.max_isa, st_f64.max_ref);
}

/* ---- float32 vector math -------------------------------------------------------------------- */

#define DENORM 0x1p-149

static const int VM_OPS[6] = {GC_UNARY_EXP,     GC_UNARY_LOG,  GC_UNARY_TANH,
                              GC_UNARY_SIGMOID, GC_UNARY_GELU, GC_UNARY_GELU_TANH};
static const char *const VM_NAMES[6] = {"exp", "log", "tanh", "sigmoid", "gelu", "gelu_tanh"};
/* cpu/README.md: 2e-7 relative for exp, tanh, sigmoid; 1e-6 for log and both gelus */
static const double VM_TOL[6] = {2e-7, 1e-6, 2e-7, 2e-7, 1e-6, 1e-6};
/* results that are denormal: within a few units of the smallest denormal */
#define VM_DENORM_UNITS 4.0

static double ref64(int op, double x)
{
    switch (op) {
    case GC_UNARY_EXP: return exp(x);
    case GC_UNARY_LOG: return log(x);
    case GC_UNARY_TANH: return tanh(x);
    case GC_UNARY_SIGMOID: {
        const double e = exp(-fabs(x));
        return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    }
    case GC_UNARY_GELU:
        if (isinf(x))
            return x > 0.0 ? x : -0.0;
        return 0.5 * x * erfc(-x / sqrt(2.0));
    default: { /* gelu, tanh form: x sigmoid(2u) */
        if (isinf(x))
            return x > 0.0 ? x : -0.0;
        const double v = 2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
        const double e = exp(-fabs(v));
        return x * (v >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e));
    }
    }
}

static const float SPECIAL[] = {0.0f,     -0.0f,     INFINITY,  -INFINITY, NAN,
                                0x1p-149f, -0x1p-149f, 1e-40f,  -1e-40f,   FLT_MIN,
                                -FLT_MIN,  FLT_MAX,   -FLT_MAX,  1e30f,     -1e30f,
                                88.72f,    88.73f,    89.0f,     -87.33f,   -87.34f,
                                -103.9f,   -104.0f,   -110.0f,   0.625f,    -0.625f,
                                9.0f,      -9.0f,     20.0f,     -13.2f,    -13.1f,
                                -10.1f,    -10.0f};
#define NSPECIAL ((ptrdiff_t)(sizeof SPECIAL / sizeof SPECIAL[0]))

/* The inputs: the special values, linear and geometric sweeps, and every 8191st bit pattern. */
static float *vm_inputs(ptrdiff_t *count)
{
    const ptrdiff_t nsweep = (ptrdiff_t)(4294967296.0 / 8191.0) + 1;
    const ptrdiff_t n = NSPECIAL + 80001 + 20001 + 20001 + 2 * 20001 + nsweep;
    float *x = xmalloc(sizeof(float) * (size_t)n);
    ptrdiff_t i = 0;
    for (ptrdiff_t j = 0; j < NSPECIAL; j++)
        x[i++] = SPECIAL[j];
    static const double lin[][3] = {{-20, 20, 80001}, {-110, 100, 20001}, {-14, -9, 20001}};
    for (int s = 0; s < 3; s++)
        for (ptrdiff_t j = 0; j < (ptrdiff_t)lin[s][2]; j++)
            x[i++] = (float)(lin[s][0] + (lin[s][1] - lin[s][0]) * (double)j / (lin[s][2] - 1));
    for (int sign = 1; sign >= -1; sign -= 2)
        for (ptrdiff_t j = 0; j < 20001; j++)
            x[i++] = (float)(sign * exp(log(1e-38) + (log(1e38) - log(1e-38)) * (double)j / 20000));
    for (uint64_t bits = 0; bits < 4294967296ull; bits += 8191) {
        const uint32_t w = (uint32_t)bits;
        memcpy(&x[i++], &w, sizeof w);
    }
    *count = i;
    return x;
}

static uint64_t fnv1a(uint64_t h, const float *y, ptrdiff_t n)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        uint32_t w;
        const float v = isnan(y[i]) ? NAN : y[i]; /* NaN payloads may differ between ISAs */
        memcpy(&w, &v, sizeof w);
        for (int b = 0; b < 4; b++) {
            h ^= (w >> (8 * b)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

static int same_value(float got, double want)
{
    if (isnan(want))
        return isnan(got);
    const double g = (double)got;
    if (want == 0.0)
        return g == 0.0 && signbit(g) == signbit(want);
    if (isinf(want))
        return g == want;
    return fabs(g - want) <= 1e-6 * fabs(want);
}

static void check_vmath(void)
{
    use_isa(isa_name);
    for (int f = 0; f < 6; f++)
        if (!gc_isa.vunary_f32[VM_OPS[f]])
            FAIL("%s: no vectorized float32 %s (the libm loop would run)", isa_name, VM_NAMES[f]);
    ptrdiff_t n;
    float *x = vm_inputs(&n);
    float *y = xmalloc(sizeof(float) * (size_t)n);
    uint64_t digest = 0xcbf29ce484222325ull;
    /* NEON_CHECK_DUMP=file: the inputs, then each function's outputs (n floats each, native
     * byte order), for comparing with another build elementwise */
    const char *dump_path = getenv("NEON_CHECK_DUMP");
    FILE *dump = dump_path && *dump_path ? fopen(dump_path, "wb") : NULL;
    if (dump_path && *dump_path && !dump)
        FAIL("cannot write %s", dump_path);
    if (dump)
        fwrite(x, sizeof(float), (size_t)n, dump);
    for (int f = 0; f < 6; f++) {
        const int op = VM_OPS[f];
        gc_unary_f32(op, x, y, n); /* through unary.c, as the extension calls it */
        digest = fnv1a(digest, y, n);
        if (dump)
            fwrite(y, sizeof(float), (size_t)n, dump);
        double maxrel = 0.0, maxden = 0.0;
        int bad = 0;
        for (ptrdiff_t i = 0; i < n; i++) {
            const double r = ref64(op, (double)x[i]), g = (double)y[i];
            int ok;
            if (isnan(r) || isnan(g)) {
                ok = isnan(r) && isnan(g);
            } else if (isinf((float)r)) {
                ok = g == (double)(float)r; /* overflow: that infinity */
            } else if (fabs(r) >= FLT_MIN) {
                const double rel = fabs(g - r) / fabs(r);
                maxrel = rel > maxrel ? rel : maxrel;
                ok = rel <= VM_TOL[f];
            } else {
                const double units = fabs(g - r) / DENORM;
                maxden = units > maxden ? units : maxden;
                ok = units <= VM_DENORM_UNITS;
            }
            if (!ok && bad++ < 3)
                FAIL("%s %s(%a = %.9g) = %.9g, float64 %.17g", isa_name, VM_NAMES[f],
                     (double)x[i], (double)x[i], g, r);
        }
        /* every length of the vector loop's tail, in place, with guards past the end: each
         * element must come out as in the long run (the lanes are independent) */
        int tails_ok = 1;
        for (ptrdiff_t len = 0; len <= 21; len++) {
            float buf[32];
            const ptrdiff_t off = 37 + 11 * len; /* a mix of ordinary inputs */
            memcpy(buf, x + off, sizeof(float) * (size_t)len);
            for (ptrdiff_t i = len; i < 32; i++)
                buf[i] = 12345.0f;
            gc_unary_f32(op, buf, buf, len);
            for (ptrdiff_t i = 0; i < len; i++)
                tails_ok &= memcmp(&buf[i], &y[off + i], sizeof(float)) == 0;
            for (ptrdiff_t i = len; i < 32; i++)
                tails_ok &= buf[i] == 12345.0f;
        }
        if (!tails_ok)
            FAIL("%s %s: short / in-place calls differ or write past the end", isa_name,
                 VM_NAMES[f]);
        printf("vmath %-9s %td inputs: max rel err %.2e (limit %.0e), denormal results within "
               "%.1f units; tails ok: %s\n",
               VM_NAMES[f], n, maxrel, VM_TOL[f], maxden, tails_ok ? "yes" : "NO");
    }
    /* gelu's backward (isa/vmath.h's polynomial / one-exp erfc form, chosen per element): into
     * the digest (the same bits on every ISA), against float64 within 3e-7 absolute (it crosses
     * zero near -0.75, where no relative bound holds) and each element as it comes alone */
    {
        if (!gc_isa.vgelu_backward_f32)
            FAIL("%s: no vectorized float32 gelu backward", isa_name);
        float *ones = xmalloc(sizeof(float) * (size_t)n);
        for (ptrdiff_t i = 0; i < n; i++)
            ones[i] = 1.0f;
        gc_unary_backward_f32(GC_UNARY_GELU, ones, x, y, n);
        digest = fnv1a(digest, y, n);
        double maxabs = 0.0;
        for (ptrdiff_t i = 0; i < n; i++) {
            const double v = (double)x[i];
            if (isnan(v) || isinf(v)) {
                if (!isnan(y[i]))
                    FAIL("%s gelu'(%g) = %g, expected NaN (inf * 0)", isa_name, v, (double)y[i]);
                continue;
            }
            const double a = fabs(v) > 16.0 ? 16.0 : fabs(v);
            const double r = 0.5 * erfc(-(v < 0 ? -a : a) / sqrt(2.0)) +
                             v * exp(-0.5 * a * a) / sqrt(2.0 * M_PI);
            const double e = fabs((double)y[i] - r);
            maxabs = e > maxabs ? e : maxabs;
            if (e > 3e-7)
                FAIL("%s gelu'(%a) = %.9g, float64 %.17g", isa_name, v, (double)y[i], r);
        }
        for (ptrdiff_t i = 0; i < n; i += 97) {
            float one;
            gc_unary_backward_f32(GC_UNARY_GELU, ones, x + i, &one, 1);
            if (memcmp(&one, &y[i], sizeof one) != 0)
                FAIL("%s gelu'(%a): alone %.9g, in the array %.9g", isa_name, (double)x[i],
                     (double)one, (double)y[i]);
        }
        printf("vmath gelu'     %td inputs: max abs err %.2e (limit 3e-7)\n", n, maxabs);
        free(ones);
    }
    /* special values exactly (the first inputs), signs of zeros included */
    const double d = DENORM, inf = INFINITY, nan = NAN;
    static const int nexp[6] = {11, 9, 9, 9, 5, 5};
    const double expect[6][11] = {
        {1, 1, inf, 0, nan, 1, 1, 1, 1, 1, 1},
        {-inf, -inf, inf, nan, nan, log(d), nan, log((double)1e-40f), nan},
        {0.0, -0.0, 1, -1, nan, d, -d, (double)1e-40f, -(double)1e-40f},
        {0.5, 0.5, 1, 0, nan, 0.5, 0.5, 0.5, 0.5},
        {0.0, -0.0, inf, -0.0, nan},
        {0.0, -0.0, inf, -0.0, nan},
    };
    int spec_ok = 1;
    for (int f = 0; f < 6; f++) {
        gc_unary_f32(VM_OPS[f], SPECIAL, y, NSPECIAL);
        for (int i = 0; i < nexp[f]; i++)
            if (!same_value(y[i], expect[f][i])) {
                spec_ok = 0;
                FAIL("%s %s(%g) = %g, expected %g", isa_name, VM_NAMES[f], (double)SPECIAL[i],
                     (double)y[i], expect[f][i]);
            }
    }
    /* large magnitudes (inputs 1e30, -1e30 at 13, 14) */
    static const struct {
        int f, i;
        float want;
    } big[] = {{0, 13, INFINITY}, {2, 13, 1.0f}, {3, 14, 0.0f}, {4, 13, 1e30f}};
    for (int j = 0; j < 4; j++) {
        gc_unary_f32(VM_OPS[big[j].f], SPECIAL, y, NSPECIAL);
        if (y[big[j].i] != big[j].want) {
            spec_ok = 0;
            FAIL("%s %s(%g) = %g, expected %g", isa_name, VM_NAMES[big[j].f],
                 (double)SPECIAL[big[j].i], (double)y[big[j].i], (double)big[j].want);
        }
    }
    if (dump && fclose(dump) != 0)
        FAIL("writing %s failed", dump_path);
    printf("vmath special values (inf, -inf, nan, +-0, denormals, +-large) exact: %s\n",
           spec_ok ? "yes" : "NO");
    /* softmax uses the vector exp: against the scalar build elementwise */
    const ptrdiff_t rows = 33, cols = 1000;
    float *s = xmalloc(sizeof(float) * (size_t)(rows * cols));
    float *o1 = xmalloc(sizeof(float) * (size_t)(rows * cols));
    float *o2 = xmalloc(sizeof(float) * (size_t)(rows * cols));
    double smax = 0.0;
    for (ptrdiff_t i = 0; i < rows * cols; i++)
        s[i] = (float)(10.0 * rng_unif());
    for (int lg = 0; lg < 2; lg++) {
        use_isa("scalar");
        gc_softmax_f32(s, o1, rows, cols, 1, lg);
        use_isa(isa_name);
        gc_softmax_f32(s, o2, rows, cols, 1, lg);
        for (ptrdiff_t i = 0; i < rows * cols; i++) {
            const double r = fabs((double)o2[i] - (double)o1[i]) / fmax(fabs((double)o1[i]), 1e-30);
            smax = r > smax ? r : smax;
        }
    }
    if (!(smax <= 1e-5))
        FAIL("%s softmax vs scalar relative error %.3g > 1e-5", isa_name, smax);
    printf("softmax / log-softmax vs scalar: max rel err %.2e (limit 1e-5)\n", smax);
    /* the fused softmax entries against the scalar table's (expf, double sum, portable loops),
     * every length through two chunks and a long row; y == NULL gives the same sum */
    gc_isa_kernels ks;
    gc_isa_fill_scalar(&ks);
    use_isa(isa_name);
    if (!gc_isa.vmax_f32 || !gc_isa.vsub2_mul_f32 ||
        gc_isa.vexp_shift_sum_f32 == ks.vexp_shift_sum_f32)
        FAIL("%s: softmax entries are not the ISA's own", isa_name);
    double ey = 0.0, es = 0.0;
    int fused_ok = 1;
    for (ptrdiff_t len = 0; len <= 1000; len = len < 300 ? len + 1 : len + 700) {
        const float *xr = s + 17;
        float mx = -INFINITY;
        for (ptrdiff_t j = 0; j < len; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        const double s1 = ks.vexp_shift_sum_f32(xr, o1, len, mx);
        const double s2 = gc_isa.vexp_shift_sum_f32(xr, o2, len, mx);
        fused_ok &= gc_isa.vexp_shift_sum_f32(xr, NULL, len, mx) == s2;
        fused_ok &= !gc_isa.vmax_f32 || gc_isa.vmax_f32(xr, len) == mx;
        for (ptrdiff_t j = 0; j < len; j++) {
            const double r = fabs((double)o2[j] - (double)o1[j]) / (double)o1[j];
            ey = r > ey ? r : ey;
        }
        const double rs = len ? fabs(s2 - s1) / s1 : fabs(s2);
        es = rs > es ? rs : es;
        if (gc_isa.vsub2_mul_f32) {
            gc_isa.vsub2_mul_f32(xr, o2, len, mx, 0.25f, 0.5f);
            for (ptrdiff_t j = 0; j < len; j++)
                fused_ok &= o2[j] == ((xr[j] - mx) - 0.25f) * 0.5f;
        }
    }
    if (!(ey <= 3e-7) || !(es <= 1e-6) || !fused_ok)
        FAIL("%s fused softmax entries: exp rel err %.3g (limit 3e-7), sum %.3g (limit 1e-6), "
             "max / NULL-y sum / sub2_mul exact: %s", isa_name, ey, es, fused_ok ? "yes" : "NO");
    printf("softmax entries vs scalar: exp(x - m) max rel err %.2e, sum %.2e; max, sum without "
           "y, ((x - a) - b) * c exact: %s\n", ey, es, fused_ok ? "yes" : "NO");
    printf("vmath digest: %016llx\n", (unsigned long long)digest);
    free(s);
    free(o1);
    free(o2);
    free(x);
    free(y);
}

/* ---- optimizer loops ------------------------------------------------------------------------ */

static int optim_configs;
/* Elements that are NaN in both results but with other bits: x86's default NaN has the sign bit
 * set, and which NaN operand an operation passes on depends on the operand order the compiler
 * picked, so the x86 builds differ there; on arm64 there are none (counted, not failed). */
static long optim_nan_bits;

/* Fills n values: mostly normal-ish, with zeros, signed zeros, tiny, huge, inf and NaN. */
#define DEFINE_FILL(T, S)                                                                         \
    static void fill_##S(T *v, ptrdiff_t n, int specials, int positive)                          \
    {                                                                                             \
        static const double sp[] = {0.0, -0.0, 1e-30, -3e-39, 1e30, INFINITY, -INFINITY, NAN};   \
        for (ptrdiff_t i = 0; i < n; i++) {                                                       \
            double r = rng_unif() * (1 + (double)(rng_next() % 4));                               \
            if (specials && rng_next() % 16 == 0)                                                 \
                r = sp[rng_next() % (sizeof sp / sizeof sp[0])];                                  \
            v[i] = (T)(positive ? fabs(r) : r);                                                   \
        }                                                                                         \
    }

DEFINE_FILL(float, f32)
DEFINE_FILL(double, f64)

/* Runs one update (two steps) with the scalar and the ISA tables on copies of the same state
 * and compares every buffer bit for bit. */
#define DEFINE_OPTIM_RUN(T, S)                                                                    \
    static void optim_run_##S(const gc_isa_kernels *ks, const gc_isa_kernels *ki, int kind,       \
                              gc_optim_hp h, ptrdiff_t n, int use1, int use2, int use3)           \
    {                                                                                             \
        T *buf[2][6];                                                                             \
        for (int t = 0; t < 2; t++)                                                               \
            for (int j = 0; j < 6; j++)                                                           \
                buf[t][j] = xmalloc(sizeof(T) * (size_t)n);                                       \
        fill_##S(buf[0][0], n, 1, 0);                                                             \
        fill_##S(buf[0][1], n, 1, 0); /* grad, step 1 */                                          \
        fill_##S(buf[0][2], n, 0, 0);                                                             \
        fill_##S(buf[0][3], n, 0, 1); /* second moments / square averages are >= 0 */            \
        fill_##S(buf[0][4], n, 0, kind != 2);                                                     \
        fill_##S(buf[0][5], n, 1, 0); /* grad, step 2 */                                          \
        for (int j = 0; j < 6; j++)                                                               \
            memcpy(buf[1][j], buf[0][j], sizeof(T) * (size_t)n);                                  \
        for (int t = 0; t < 2; t++) {                                                             \
            const gc_isa_kernels *k = t ? ki : ks;                                                \
            for (int step = 0; step < 2; step++) {                                                \
                gc_optim_hp hs = h;                                                               \
                hs.step = h.step + step;                                                          \
                hs.first = h.first && step == 0;                                                  \
                const gc_optim_args_##S a = {buf[t][0], step ? buf[t][5] : buf[t][1],             \
                                             use1 ? buf[t][2] : NULL, use2 ? buf[t][3] : NULL,    \
                                             use3 ? buf[t][4] : NULL, &hs};                       \
                if (kind == 0)                                                                    \
                    k->sgd_##S(&a, 0, n);                                                         \
                else if (kind == 1)                                                               \
                    k->adam_##S(&a, 0, n);                                                        \
                else                                                                              \
                    k->rmsprop_##S(&a, 0, n);                                                     \
            }                                                                                     \
        }                                                                                         \
        for (int j = 0; j < 5; j++) {                                                             \
            ptrdiff_t q = n;                                                                      \
            for (ptrdiff_t i = n - 1; i >= 0; i--) {                                              \
                if (memcmp(&buf[0][j][i], &buf[1][j][i], sizeof(T)) == 0)                         \
                    continue;                                                                     \
                if (isnan(buf[0][j][i]) && isnan(buf[1][j][i]))                                   \
                    optim_nan_bits++; /* both NaN, other sign / payload */                        \
                else                                                                              \
                    q = i;                                                                        \
            }                                                                                     \
            if (q < n)                                                                            \
                FAIL("optim %s " #S " n=%td lr=%g wd=%g mom=%g damp=%g nesterov=%d first=%d "     \
                     "beta1=%g decoupled=%d alpha=%g maximize=%d buffers=%d%d%d: buffer %d [%td] " \
                     "%a, scalar %a",                                                             \
                     kind == 0 ? "sgd" : kind == 1 ? "adam" : "rmsprop", n, h.lr,                 \
                     h.weight_decay, h.momentum, h.dampening, h.nesterov, h.first, h.beta1,       \
                     h.decoupled, h.alpha, h.maximize, use1, use2, use3, j, q,                    \
                     (double)buf[1][j][q], (double)buf[0][j][q]);                                 \
        }                                                                                         \
        optim_configs++;                                                                          \
        for (int t = 0; t < 2; t++)                                                               \
            for (int j = 0; j < 6; j++)                                                           \
                free(buf[t][j]);                                                                  \
    }

DEFINE_OPTIM_RUN(float, f32)
DEFINE_OPTIM_RUN(double, f64)

static void optim_run(const gc_isa_kernels *ks, const gc_isa_kernels *ki, int kind,
                      gc_optim_hp h, int use1, int use2, int use3)
{
    static const ptrdiff_t lens[] = {1, 3, 4, 7, 16, 37, 1031};
    for (int i = 0; i < 7; i++) {
        optim_run_f32(ks, ki, kind, h, lens[i], use1, use2, use3);
        optim_run_f64(ks, ki, kind, h, lens[i], use1, use2, use3);
    }
}

static void check_optim(void)
{
    const int failures0 = failures;
    use_isa("scalar");
    const gc_isa_kernels ks = gc_isa;
    use_isa(isa_name);
    const gc_isa_kernels ki = gc_isa;
    for (int mx = 0; mx < 2; mx++) {
        /* SGD: weight decay, momentum, dampening, nesterov, first step */
        for (int wd = 0; wd < 2; wd++)
            for (int mo = 0; mo < 2; mo++)
                for (int ne = 0; ne < 2; ne++)
                    for (int fi = 0; fi < 2; fi++) {
                        gc_optim_hp h = {.lr = 0.1, .weight_decay = wd ? 0.01 : 0.0,
                                         .momentum = mo ? 0.9 : 0.0, .dampening = ne ? 0.0 : 0.1,
                                         .nesterov = ne, .first = fi, .maximize = mx};
                        optim_run(&ks, &ki, 0, h, mo, 0, 0);
                    }
        /* Adam: no / coupled / decoupled weight decay, AMSGrad, both lerp branches */
        for (int wd = 0; wd < 3; wd++)
            for (int ams = 0; ams < 2; ams++)
                for (int ll = 0; ll < 2; ll++) {
                    gc_optim_hp h = {.lr = 1e-3, .weight_decay = wd ? 0.01 : 0.0,
                                     .beta1 = ll ? 0.9 : 0.3, .beta2 = 0.999, .eps = 1e-8,
                                     .step = 1 + 6 * ll, .decoupled = wd == 2, .maximize = mx};
                    optim_run(&ks, &ki, 1, h, 1, 1, ams);
                }
        /* RMSprop: weight decay, centered (both lerp branches), momentum */
        for (int wd = 0; wd < 2; wd++)
            for (int c = 0; c < 3; c++)
                for (int mo = 0; mo < 2; mo++) {
                    gc_optim_hp h = {.lr = 0.01, .weight_decay = wd ? 0.05 : 0.0,
                                     .momentum = mo ? 0.7 : 0.0, .alpha = c == 2 ? 0.3 : 0.99,
                                     .eps = 1e-8, .maximize = mx};
                    optim_run(&ks, &ki, 2, h, 1, c > 0, mo);
                }
    }
    printf("optimizer loops (sgd, adam, rmsprop; every option; float32 and float64): %d "
           "configurations, bitwise equal to scalar: %s (NaNs with other bits: %ld)\n",
           optim_configs, failures > failures0 ? "NO" : "yes", optim_nan_bits);
}

/* ---- ONNX DynamicQuantizeLinear (qdynamic.c, isa/quant.h) ------------------------------------ */

/* y, scale and zero point under the ISA equal the scalar ISA's bit for bit (the portable loops,
 * which tests/backends/cpu/test_dynamic_quantize_kernel.py checks against onnx.reference):
 * lengths around the vector width, NaN in the body and the tail, infinities, halves. */
static void check_dynamic_quantize(void)
{
    enum { N = 300 };
    static float x[N];
    static uint8_t y0[N], y1[N];
    const int failures0 = failures;
    int cases = 0;
    for (int c = 0; c < 40; c++) {
        const ptrdiff_t n = c < 20 ? c * 7 % N + 1 : N - c;
        for (ptrdiff_t i = 0; i < n; i++)
            x[i] = (float)(rng_unif() * 8.0 - (c % 3 == 0 ? 4.0 : 1.0));
        if (c % 5 == 1)
            x[(c * 13) % n] = NAN;
        if (c % 5 == 2)
            x[(c * 11) % n] = (c & 8) ? INFINITY : -INFINITY;
        if (c % 5 == 3)
            for (ptrdiff_t i = 0; i < n; i++) /* scale 1 when the range is [-127.5, 127.5] */
                x[i] = (float)((int)(rng_unif() * 255.0) - 127) + 0.5f;
        float s0, s1;
        uint8_t z0, z1;
        use_isa("scalar");
        gc_dynamic_quantize_u8(x, n, y0, &s0, &z0);
        use_isa(isa_name);
        gc_dynamic_quantize_u8(x, n, y1, &s1, &z1);
        if (memcmp(&s0, &s1, sizeof s0) != 0 || z0 != z1 || memcmp(y0, y1, (size_t)n) != 0)
            FAIL("dynamic_quantize_u8 case %d (n=%td): scale %g / %g, zero point %d / %d", c, n,
                 (double)s0, (double)s1, z0, z1);
        cases++;
    }
    printf("dynamic_quantize_u8: %d cases, bitwise equal to scalar: %s\n", cases,
           failures > failures0 ? "NO" : "yes");
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static void check_dispatch(void)
{
    char err[512];
    const int mask = gc_isa_supported_mask();
    use_isa(isa_name);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "gemm_%s_", isa_name);
    const size_t np = strlen(prefix);
    if (strcmp(gc_isa.name, isa_name) != 0 || strncmp(gc_isa.ukr_f32_name, prefix, np) != 0 ||
        strncmp(gc_isa.ukr_f64_name, prefix, np) != 0)
        FAIL("GPUCORE_CPU_ISA=%s gave isa %s, kernels %s / %s", isa_name, gc_isa.name,
             gc_isa.ukr_f32_name, gc_isa.ukr_f64_name);
    printf("isa %s: %s (%dx%d), %s (%dx%d); blocking float32 mc=%td kc=%td nc=%td; threads %d\n",
           gc_isa.name, gc_isa.ukr_f32_name, gc_isa.mr_f32, gc_isa.nr_f32, gc_isa.ukr_f64_name,
           gc_isa.mr_f64, gc_isa.nr_f64, gc_blk_f32.mc, gc_blk_f32.kc, gc_blk_f32.nc,
           gc_pool_size());
    if (strcmp(isa_name, "neon") != 0)
        return;
    /* arm64: neon is the default, scalar can be forced, x86 names are refused clearly */
    int ok = (mask & (1 << GC_ISA_NEON)) && (mask & (1 << GC_ISA_SCALAR));
    ok &= gc_cpu_init(NULL, err, sizeof err) == 0 && strcmp(gc_isa.name, "neon") == 0;
    ok &= gc_cpu_init("scalar", err, sizeof err) == 0 && strcmp(gc_isa.name, "scalar") == 0;
    if (!ok)
        FAIL("arm64: neon is not the default or scalar cannot be forced");
    const int refused = gc_cpu_init("avx2", err, sizeof err) != 0;
    if (!refused || !strstr(err, "does not support avx2") || !strstr(err, "supports: neon, scalar"))
        FAIL("GPUCORE_CPU_ISA=avx2 on arm64: %s", refused ? err : "accepted");
    else
        printf("dispatch: default neon; scalar selectable; GPUCORE_CPU_ISA=avx2 refused: \"%s\"\n",
               err);
    use_isa(isa_name);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        isa_name = argv[1];
    const double t0 = now_s();
    check_dispatch();
    check_gemm();
    check_vmath();
    check_optim();
    check_dynamic_quantize();
    if (failures) {
        printf("neon_check: FAILED (%s): %d mismatches, %.1f s\n", isa_name, failures,
               now_s() - t0);
        return 1;
    }
    printf("neon_check: OK (%s), %.1f s\n", isa_name, now_s() - t0);
    return 0;
}
