/* The small-m path of the GEMM (gemm.c), type-generic (T = GC_T), included by gemm.c after the
 * blocked path: a few rows of A against B read where it lies. */

/* ---- small m: the weight-streaming path --------------------------------------------------- */

/* With a few rows of A, C = A op(B) is bound by reading B once: packing B (the blocked path)
 * costs as much as the product.  These calls read B where it lies through the ISA's gemv
 * kernels (isa.h: gemv_t for B stored n x k, a dot product of contiguous rows per output; gemv_n
 * for B stored k x n, axpy over its rows), split over the threads by chunks of GC_GEMV_CW_*
 * columns (of every item of a batch at once when the items are independent).  A stored
 * transposed (k x m, m > 1) is copied row-major first (m*k elements).  Every element is computed
 * the same way in any chunk, so results do not depend on the thread count. */
typedef struct {
    const GC_T *a, *b;
    GC_T *c;
    ptrdiff_t m, n, k, lda, sa, sb, sc;
    ptrdiff_t cw, nch; /* columns per chunk, chunks per item */
    int tb, act;
    int stream; /* gemv_t's streaming form: B too large to stay in L3 between calls */
    GC_T alpha, beta;
    const GC_T *bias;
} GC_FN(gemv_job);

/* chunks [lo, hi) of the flattened (item, column chunk) space */
static void GC_FN(gemv_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(gemv_job) *J = (const GC_FN(gemv_job) *)ctx;
    const ptrdiff_t m = J->m, n = J->n, k = J->k;
    for (ptrdiff_t u = lo; u < hi;) {
        const ptrdiff_t it = u / J->nch, ch0 = u % J->nch;
        /* the chunks of this item inside [lo, hi) in one call */
        const ptrdiff_t ch1 = (hi - u < J->nch - ch0) ? ch0 + (hi - u) : J->nch;
        const ptrdiff_t j0 = ch0 * J->cw, j1 = ch1 * J->cw < n ? ch1 * J->cw : n;
        const GC_T *a = J->a + it * J->sa, *b = J->b + it * J->sb;
        GC_T *c = J->c + it * J->sc + j0;
        if (J->tb)
            (J->stream ? gc_isa.GC_GEMV_TS : gc_isa.GC_GEMV_T)(m, j1 - j0, k, a, J->lda, b + j0 * k,
                                                               k, c, n, J->alpha, J->beta);
        else /* by blocks of rows of B, each swept across the chunk's columns */
            for (ptrdiff_t p0 = 0; p0 < k; p0 += GC_GEMV_KB_N)
                gc_isa.GC_GEMV_N(m, j1 - j0, k - p0 < GC_GEMV_KB_N ? k - p0 : GC_GEMV_KB_N,
                                 a + p0, J->lda, b + p0 * n + j0, n, c, n, J->alpha,
                                 p0 == 0 ? J->beta : (GC_T)1);
        if (J->bias || J->act >= 0) {
            for (ptrdiff_t i = 0; i < m; i++) {
                GC_T *row = c + i * n;
                if (J->bias)
                    for (ptrdiff_t j = 0; j < j1 - j0; j++)
                        row[j] += J->bias[j0 + j];
                if (J->act >= 0)
                    GC_FN(gc_unary)(J->act, row, row, j1 - j0);
            }
        }
        u += ch1 - ch0;
    }
}

/* Work split for the one-range case: each participant of the region owns a contiguous share of the
 * chunks (gc_split over the planned thread count, slot = share; past 64 threads slots wrap onto
 * the shares) and claims them in order, then takes what is left of the other shares (from the
 * front, alternating with the owner for that tail), so a descheduled worker holds nobody up. Why
 * not gc_parallel_range: its ~4 chunks per thread are claimed in turn, so each thread's chunks
 * alternate with the other's (2 MiB apart at 2048 x 2048): every chunk starts cold (its first rows
 * were not prefetched) and the last rows of each prefetch rows the other thread reads. C harness,
 * 3 x 2048 x 2048 at batch 1 on two Zen 4 threads, 10th percentiles of a loaded machine: ~900 us
 * alternating, ~660 us owned shares, ~700-770 us for a plain streaming read of the same bytes.
 * Which thread computes a chunk never changes its bits.
 */
#define GC_GEMV_SHARES 64
/* chunks are claimed in steps of about this much of B (at least one chunk, at most a quarter of
 * a share): a short k makes chunks of a few KiB, each claim then costs more than its columns */
#define GC_GEMV_CLAIM_BYTES (256.0 * 1024)
typedef struct {
    GC_FN(gemv_job) *J;
    int shares;
    long step; /* chunks per claim */
    struct {
        _Alignas(64) atomic_long next; /* chunks of the share claimed so far */
        ptrdiff_t lo, n;
    } sh[GC_GEMV_SHARES];
} GC_FN(gemv_shares);

static void GC_FN(gemv_share_body)(void *ctx, int slot)
{
    GC_FN(gemv_shares) *S = (GC_FN(gemv_shares) *)ctx;
    for (int o = 0; o < S->shares; o++) {
        const int t = (slot + o) % S->shares;
        const long n = (long)S->sh[t].n;
        const ptrdiff_t lo = S->sh[t].lo;
        for (long c; (c = atomic_fetch_add_explicit(&S->sh[t].next, S->step,
                                                    memory_order_relaxed)) < n;)
            GC_FN(gemv_range)(S->J, lo + c, lo + (c + S->step < n ? c + S->step : n));
    }
}

static void GC_FN(gemv_split)(GC_FN(gemv_job) *J, ptrdiff_t units, double cost_ns)
{
    /* from half the grain while the workers are awake (the MLP step at batch 256: its dW3 =
     * dY^T h2, 10 x 256 x 256, and the forward's 256 x 256 x 10 through gemm_narrow_n) */
    int nt = gc_threads_for(cost_ns, gc_pool_awake() ? GC_GRAIN_NS / 2 : GC_GRAIN_NS);
    if (nt > units)
        nt = (int)units;
    if (nt <= 1) {
        GC_FN(gemv_range)(J, 0, units);
        return;
    }
    GC_FN(gemv_shares) S;
    S.J = J;
    S.shares = nt < GC_GEMV_SHARES ? nt : GC_GEMV_SHARES;
    const double chunk_bytes = (double)J->cw * (double)J->k * (double)sizeof(GC_T);
    const long quarter = (long)(units / S.shares / 4);
    S.step = (long)(GC_GEMV_CLAIM_BYTES / chunk_bytes);
    if (S.step > quarter)
        S.step = quarter;
    if (S.step < 1)
        S.step = 1;
    for (int t = 0; t < S.shares; t++) {
        ptrdiff_t lo, hi;
        gc_split(units, 1, t, S.shares, &lo, &hi);
        S.sh[t].lo = lo;
        S.sh[t].n = hi - lo;
        atomic_init(&S.sh[t].next, 0);
    }
    gc_region(GC_FN(gemv_share_body), &S, nt);
}

static int GC_FN(gemm_small_m)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch,
                               ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b,
                               GC_T alpha, GC_T beta, ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc,
                               const GC_T *bias, int act)
{
    GC_FN(gemv_job) J = {.a = a, .b = b, .c = c, .m = m, .n = n, .k = k, .lda = k, .sa = sa,
                         .sb = sb, .sc = sc, .tb = trans_b, .act = act, .alpha = alpha,
                         .beta = beta, .bias = bias};
    J.cw = trans_b ? GC_GEMV_CW_T : GC_GEMV_CW_N;
    J.stream = (double)n * (double)k * sizeof(GC_T) >= GC_GEMV_STREAM_BYTES;
    J.nch = (n + J.cw - 1) / J.cw;
    /* single-thread time: B streamed from cache or memory, plus the multiply-adds */
    const double item_ns = (double)n * (double)k * (sizeof(GC_T) * GC_GEMV_NS_BYTE +
                                                    (double)m * GC_GEMV_NS_FMA);
    const int packed = trans_a && m > 1;
    if (!packed && (batch == 1 || sc >= m * n)) { /* one range over every item's chunks */
        GC_FN(gemv_split)(&J, batch * J.nch, item_ns * (double)batch);
        return 0;
    }
    GC_T *ap = NULL;
    if (packed) {
        ap = (GC_T *)gc_scratch(sizeof(GC_T) * (size_t)(m * k));
        if (!ap)
            return -1;
    }
    for (ptrdiff_t i = 0; i < batch; i++) { /* in order (C stride 0 accumulates) */
        J.a = a + i * sa;
        if (packed) { /* A stored k x m: A[r, p] = a[p*m + r] */
            for (ptrdiff_t r = 0; r < m; r++)
                for (ptrdiff_t p = 0; p < k; p++)
                    ap[r * k + p] = J.a[p * m + r];
            J.a = ap;
        }
        J.b = b + i * sb;
        J.c = c + i * sc;
        GC_FN(gemv_split)(&J, J.nch, item_ns);
    }
    return 0;
}

/* ---- narrow n: the same path on the transposed product ------------------------------------ */

/* A few columns of C (gemm_dispatch.h's GC_NARROW_*; m past the small-m bound: the last Linear of a
 * classifier, 64 x 512 x 10, or a matrix-vector product) are C^T = op(B)^T op(A)^T with few rows:
 * gemm_small_m on that product, A (its B) read where it lies, into a row-major C^T buffer that
 * one transposing pass (the swapped mode's: bias, then the activation, then epi) moves into C.
 * The blocked path ran these swapped: all of A packed (transposed, unless stored k x m) for one
 * partial row panel of the tile (AVX-512 14 x 32: n of 14 rows).  op(B)^T is copied row-major when
 * B is stored k x n (n k elements).  One item (gemm.c runs a batch blocked, its items spread over
 * the threads); bits as gemm_small_m's: the same for any number of threads. */
/* d [c, r] = relu(s^T + bias) for s [r, c] (bias per row of s, relu if relu): transpose_act's
 * operations (so its bits) through the row-split mode's register transposes (rows_transpose),
 * the columns of s split over the pool.  Its scalar loop took ~2 of the ~12 us of 64 x 512 x 10
 * (AVX-512, one thread) copying B^T alone. */
typedef struct {
    GC_FN(gemm_job) J; /* m, n, ct_bias, ct_relu: rows_transpose's */
    const GC_T *s;
    GC_T *d;
} GC_FN(ntr_job);

static void GC_FN(ntr_range)(void *ctx, ptrdiff_t j0, ptrdiff_t j1)
{
    const GC_FN(ntr_job) *X = (const GC_FN(ntr_job) *)ctx;
    GC_FN(rows_transpose)(&X->J, X->s, X->d, 0, X->J.m, j0, j1 - j0);
}

static void GC_FN(narrow_tr)(const GC_T *s, GC_T *d, ptrdiff_t r, ptrdiff_t c,
                             const GC_T *bias, int relu)
{
    GC_FN(ntr_job) X;
    memset(&X, 0, sizeof X);
    X.J.m = r;
    X.J.n = c;
    X.J.ct_bias = bias;
    X.J.ct_relu = relu;
    X.s = s;
    X.d = d;
    gc_parallel_range(c, 8, (double)r * (double)c * 0.5, GC_FN(ntr_range), &X);
}

static int GC_FN(gemm_narrow_n)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t m, ptrdiff_t n,
                                ptrdiff_t k, int trans_a, int trans_b, GC_T alpha, GC_T beta,
                                const GC_T *bias, int act, const gc_epi *epi)
{
    const ptrdiff_t tsz = (m * n + 63) / 64 * 64;
    GC_T *tt = (GC_T *)gc_scratch(sizeof(GC_T) * (size_t)(tsz + (trans_b ? 0 : n * k)));
    if (!tt)
        return -1;
    if (!trans_b) { /* B stored k x n: bt[r*k + p] = B[p, r] */
        GC_FN(narrow_tr)(b, tt + tsz, k, n, NULL, 0);
        b = tt + tsz;
    }
    if (beta != (GC_T)0) /* tt is n x m: tt[r*m + q] = C[q, r] */
        GC_FN(narrow_tr)(c, tt, m, n, NULL, 0);
    /* trans_a 0 there: its trans_a branch takes gc_scratch itself and would overwrite tt */
    const int rc = GC_FN(gemm_small_m)(b, a, tt, 1, n, m, k, 0, !trans_a, alpha, beta, 0, 0, 0,
                                       NULL, -1);
    if (rc == 0 && (act < 0 || act == GC_UNARY_RELU) && !epi)
        GC_FN(narrow_tr)(tt, c, n, m, bias, act == GC_UNARY_RELU);
    else if (rc == 0)
        GC_FN(transpose_act)(tt, c, n, m, bias, act == GC_UNARY_RELU,
                             act == GC_UNARY_RELU ? -1 : act, epi);
    return rc;
}
