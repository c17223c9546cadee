/* The row-split mode of the blocked GEMM (gemm.c), type-generic (T = GC_T), included by gemm.c
 * after gemm_unit.  For a narrow op(B) (every K block of it across all of N within ~1.6 x L2: the
 * dX = dY @ W and dW = dY^T @ X products of a d = 128 model, N = 128 .. 512 at small K):
 *
 *   pack all of op(B) once, K block by K block, every NR panel across N (the threads claim
 *   groups of panels; one wait, for the last of them); then
 *   for each unit (a group of at most J->rg MR-row panels of A, claimed dynamically):
 *     for pc in K by KC:
 *       its A panels (read in place, or packed into the participant's own small buffer)
 *       gemm_unit over all of N: each A micro-panel (L1) meets every NR panel of the B block (L2)
 *
 * A small row-major B (read in place by the blocked steps too) has only its edge panel packed.
 * The blocked steps instead pack an A block shared by all threads (both wait for it at every K
 * block) and give each compute unit its own copy of a B chunk, so that a narrow N splits into
 * chunks that each read the whole A block from L3 again (N = 128 became two chunks of 64 with
 * NC = 96).  Here no thread waits after the B packing, A is read once per K block, and a unit
 * updates only its own rows of C, K block after K block.  The tiles, their K blocks and the
 * micro-kernel calls are those of the blocked steps, so C is bitwise the same (and the same for
 * any number of threads).  gc_gemm_px asks rows_fit whether a product takes the mode and
 * rows_swap whether an unpacked one should run swapped (M and N exchanged) to take it. */

/* The swapped mode's C^T rows [i0, i0 + mb) x columns [j0, j0 + nb) (in s, row stride n) into
 * the caller's C (d, row stride m), with transpose_range's operations (bias per row of C^T, then
 * relu): a unit's finished block, while it is in L1 / L2.  GC_VN x GC_VN register transposes
 * (pack.c's), the rest element by element: the same operations per element (one rounded add,
 * relu as a select to +0 that keeps NaN), so the same bits; the scalar loop had taken ~1/12 of
 * a 32 x 512 x 512 Linear's time on each of two threads. */
static void GC_FN(rows_transpose)(const GC_FN(gemm_job) * J, const GC_T *s, GC_T *d,
                                  ptrdiff_t i0, ptrdiff_t mb, ptrdiff_t j0, ptrdiff_t nb)
{
    const ptrdiff_t m = J->m, n = J->n, ie = i0 + mb, je = j0 + nb;
    const GC_T *bias = J->ct_bias;
    const int relu = J->ct_relu;
    /* Rows and columns left over by whole GC_VN groups go through one more group that ends at
     * the block's edge, overlapping the previous one: its elements are computed again from s
     * with the same operations, so they are stored twice with the same bits.  (A 14-row unit
     * had left 2 of its 14 rows to the scalar loop, ~1/3 of this pass's time.) */
    for (ptrdiff_t ig = i0; ig < ie && mb >= GC_VN; ig += GC_VN) {
        const ptrdiff_t iv = ig + GC_VN <= ie ? ig : ie - GC_VN;
        GC_VT bv[GC_VN]; /* bias[iv + q] in every lane of bv[q] (x - +0 is x, -0 included) */
        for (int q = 0; q < GC_VN; q++)
            bv[q] = (bias ? bias[iv + q] : (GC_T)0) - (GC_VT){0};
        for (ptrdiff_t jg = j0; jg < je && nb >= GC_VN; jg += GC_VN) {
            const ptrdiff_t j = jg + GC_VN <= je ? jg : je - GC_VN;
            GC_VT x[GC_VN];
            for (int q = 0; q < GC_VN; q++) {
                memcpy(&x[q], s + (iv + q) * n + j, sizeof x[q]);
                if (bias)
                    x[q] += bv[q];
                if (relu) /* v <= 0 ? +0 : v, NaN kept */
                    x[q] = (GC_VT)(~(x[q] <= (GC_T)0) & (__typeof__(x[q] <= (GC_T)0))x[q]);
            }
            GC_TRANSPOSE(x);
            for (int q = 0; q < GC_VN; q++)
                memcpy(d + (j + q) * m + iv, &x[q], sizeof x[q]);
        }
    }
    if (mb >= GC_VN && nb >= GC_VN)
        return;
    for (ptrdiff_t j = j0; j < je; j++) /* (a block narrower than GC_VN) */
        for (ptrdiff_t i = i0; i < ie; i++) {
            GC_T v = s[i * n + j];
            if (bias)
                v += bias[i];
            d[j * m + i] = relu && v <= (GC_T)0 ? (GC_T)0 : v;
        }
}

/* The counter of the A panels that claim range r packs in K block i (J->afine): on its own
 * cache line, after the K blocks' a_done counters (rows_setup's nsteps). */
static inline atomic_int *GC_FN(rows_afine)(const GC_FN(gemm_job) * J, gc_gemm_step *st,
                                            ptrdiff_t i, int r)
{
    const ptrdiff_t nkb = (J->k + J->kc - 1) / J->kc;
    return &st[J->nrange + nkb + i * J->nrange + r].a_done;
}

/* Unit u of the row-split mode, run by one participant with A buffer abuf (rg * mr * kc): column
 * chunk u / ru times row group u % ru (of the ru groups).  Before K block i it waits for
 * st[J->nrange + i].a_done to reach packed (that K block's packing items; 0: none), or with
 * J->afine only for the claim ranges that pack its own A panels (rows_afine). */
static void GC_FN(gemm_rows_unit)(const GC_FN(gemm_job) * J, const GC_T *a, const GC_T *b,
                                  GC_T *c, GC_T *abuf, ptrdiff_t u, gc_gemm_step *st, int packed)
{
    const ptrdiff_t m = J->m, k = J->k;
    const int mr = J->mr;
    const ptrdiff_t cj = u / J->ru; /* column chunk major: a claim range holds one chunk */
    u %= J->ru;
    /* panels [q0, q1): the npa panels spread evenly over the ru units (at most rg each); with
     * J->rblk rows [ic, ic + mb): m spread evenly, a block's last panel cut at its end */
    const ptrdiff_t q0 = u * J->npa / J->ru, q1 = (u + 1) * J->npa / J->ru;
    const ptrdiff_t ic = J->rblk ? m * u / J->ru : q0 * mr;
    const ptrdiff_t mb = J->rblk ? m * (u + 1) / J->ru - ic
                                 : (m - ic < (q1 - q0) * mr ? m - ic : (q1 - q0) * mr);
    const ptrdiff_t npan = (mb + mr - 1) / mr;
    for (ptrdiff_t pc = 0; pc < k; pc += J->kc) {
        const ptrdiff_t kb = k - pc < J->kc ? k - pc : J->kc;
        const GC_T *ablk = abuf;
        if (packed && J->afine) {
            for (int r = 0; r < J->nrange; r++) {
                const ptrdiff_t a0 = J->npa * r / J->nrange, a1 = J->npa * (r + 1) / J->nrange;
                if (a0 < q1 && q0 < a1)
                    gc_wait_at_least(GC_FN(rows_afine)(J, st, pc / J->kc, r), (int)(a1 - a0));
            }
        } else if (packed) {
            gc_wait_at_least(&st[J->nrange + pc / J->kc].a_done, packed);
        }
        if (J->pka && !J->pa_scale) {
            ablk = J->pka + pc * J->npa * mr + ic * kb;
        } else if (J->pka) {
            const GC_T *src = J->pka + pc * J->npa * mr + ic * kb;
            for (ptrdiff_t i = 0; i < npan * mr * kb; i++)
                abuf[i] = J->alpha * src[i];
        } else if (J->ta || !J->adirect) {
            GC_FN(pack_a)(abuf, a, m, k, J->ta, J->alpha, ic, mb, pc, kb, mr, 0, npan);
        } else if (npan * mr > mb) { /* in place: only the edge panel is packed */
            GC_FN(pack_a)(abuf, a, m, k, 0, J->alpha, ic, mb, pc, kb, mr, npan - 1, npan);
        }
        /* (unit cj of the step's grid: chunk cj of the ncu across N, gm >= npan) */
        GC_FN(gemm_unit)(J, a, b, c, ablk, NULL, ic, mb, pc, kb, cj);
    }
    if (J->ct_out) { /* swapped: this block of C^T into C (gemm_unit's chunk bounds) */
        const ptrdiff_t p0 = cj * J->pn / J->ncu, p1 = (cj + 1) * J->pn / J->ncu;
        const ptrdiff_t jc = p0 * J->nr, je = p1 * J->nr < J->n ? p1 * J->nr : J->n;
        GC_FN(rows_transpose)(J, c, J->ct_out, ic, mb, jc, je - jc);
    }
}

/* One GEMM in row-split mode, run by every participant (slot: its A buffer).  Counters:
 * st[r].a_next claims the packing items of range r (GC_ROWS_BPAN panels of B each, then, with
 * J->apack, one MR panel of A each), st[J->nrange + i].a_done counts K block i's packed ones,
 * and st[r].u_next claims the units of range r.  A unit waits only for its next K block's items
 * (all claimed, by running threads, before anyone starts a unit), so a thread with no items left
 * starts its units while another still packs later K blocks. */
#define GC_ROWS_BPAN 4
static void GC_FN(gemm_rows_item)(const GC_FN(gemm_job) * J, const GC_T *a, const GC_T *b,
                                  GC_T *c, GC_T *bw, GC_T *abuf, gc_gemm_step *st, int slot)
{
    const ptrdiff_t m = J->m, n = J->n, k = J->k;
    const int nr = J->nr, mr = J->mr;
    /* (B read in place: only its edge panel, if any) */
    const ptrdiff_t first = J->bdirect ? n / nr : 0;
    ptrdiff_t ng = bw ? (J->pn - first + GC_ROWS_BPAN - 1) / GC_ROWS_BPAN : 0;
    GC_FN(gemm_job) own;
    /* this participant's own copy of B, all of it, read by it alone: packed when it claims its
     * first unit (one that joins late and finds none left packs nothing: the caller waits at the
     * region's close for every participant that joined) */
    const int own_b = bw && J->bslot;
    if (own_b) {
        bw += slot * J->bslot;
        ng = 0;
    }
    const ptrdiff_t na = J->apack ? J->npa : 0, per = ng + na; /* shared items per K block */
    const ptrdiff_t nkb = (k + J->kc - 1) / J->kc;
    /* claimed in J->nrange ranges too (range r: its share of the B groups and A panels of every
     * K block, K block by K block; st[r].a_next), own range first: in the column-chunk split the
     * B panels that a thread packs are then those its units read (they stay in its L2; the shared
     * 1 MiB B of 128 x 512 x 512 took ~55 us to pack, packed by whichever thread came first) */
    for (int r0 = 0; r0 < J->nrange && per; r0++) {
        const int r = (slot + r0) % J->nrange;
        const ptrdiff_t g0 = ng * r / J->nrange, g1 = ng * (r + 1) / J->nrange;
        const ptrdiff_t a0 = na * r / J->nrange, a1 = na * (r + 1) / J->nrange;
        const ptrdiff_t per_r = g1 - g0 + a1 - a0;
        for (ptrdiff_t t; (t = atomic_fetch_add_explicit(&st[r].a_next, 1,
                                                         memory_order_relaxed)) < per_r * nkb;) {
            const ptrdiff_t i = t / per_r, j = t % per_r;
            const ptrdiff_t pc = i * J->kc, kb = k - pc < J->kc ? k - pc : J->kc;
            if (j < g1 - g0) {
                const ptrdiff_t q0 = first + (g0 + j) * GC_ROWS_BPAN, jc = q0 * nr;
                const ptrdiff_t nb = n - jc < GC_ROWS_BPAN * nr ? n - jc : GC_ROWS_BPAN * nr;
                GC_FN(pack_b)(bw + pc * J->pn * nr + q0 * nr * kb, b, n, k, J->tb, pc, kb, jc,
                              nb, nr);
            } else { /* A panel q of the K block, where rows_unit reads a pre-packed A's */
                const ptrdiff_t q = a0 + j - (g1 - g0);
                GC_FN(pack_a)((GC_T *)J->pka + pc * J->npa * mr, a, m, k, J->ta, J->alpha, 0, m,
                              pc, kb, mr, q, q + 1);
            }
            atomic_fetch_add_explicit(J->afine ? GC_FN(rows_afine)(J, st, i, r)
                                               : &st[J->nrange + i].a_done,
                                      1, memory_order_release);
        }
    }
    /* The units in J->nrange contiguous claim ranges: participant s takes range s first (the same
     * units, the same rows of C and panels of A / B, call after call when every participant runs:
     * their lines stay in its own L2 rather than move between the cores' caches with each call's
     * claim order), then the ranges of the others that are left, in turn. */
    const ptrdiff_t units = J->ru * J->ncu;
    for (int r0 = 0; r0 < J->nrange; r0++) {
        const int r = (slot + r0) % J->nrange;
        const ptrdiff_t lo = units * r / J->nrange, len = units * (r + 1) / J->nrange - lo;
        /* with J->afine the range's units start at the A panels that range packed (one panel
         * per unit, a range = one column chunk): its participant waits for no other's packing,
         * which it reaches only later (128 x 512 x 512 on two threads: both had waited ~20 us
         * of ~350 for the whole first K block of A) */
        const ptrdiff_t rot = J->afine ? J->npa * r / J->nrange : 0;
        for (ptrdiff_t t; (t = atomic_fetch_add_explicit(&st[r].u_next, 1,
                                                         memory_order_relaxed)) < len;) {
            const ptrdiff_t u = (t + rot) % len;
            if (own_b && J != &own) {
                for (ptrdiff_t pc = 0; pc < k; pc += J->kc) {
                    const ptrdiff_t kb = k - pc < J->kc ? k - pc : J->kc;
                    GC_FN(pack_b)(bw + pc * J->pn * nr + first * nr * kb, b, n, k, J->tb, pc, kb,
                                  first * nr, n - first * nr, nr);
                }
                own = *J;
                own.pkb = bw;
                J = &own;
            }
            GC_FN(gemm_rows_unit)(J, a, b, c, abuf, lo + u, st, (int)per);
        }
    }
}

/* Whether the row-split mode fits an m x n x k product for `want` threads (bpacked: op(B) comes
 * pre-packed): every K block of B across all of N within 1.6 x L2 (one thread, GFLOP/s blocked ->
 * row-split on AVX2: 1024 x 600 x 320 with a 750 KiB B block 56 -> 76, 512 x 1024 x 256 54 -> 60, a
 * 300 x 2048 x 256 dW 52 -> 50; narrower B blocks gain more: benchmarks/README.md, *A narrow B*),
 * all of B within GC_ROWS_MAX_B (the workspace holds it, and stays allocated), and at least two
 * MR panels per thread or, on two or more threads, two NR panels per thread (rows_setup's column
 * chunks).  With several K blocks each unit reloads every B block from L3; when the
 * whole A block fits in L2 the blocked steps reload nothing and win on one thread (dW of 128 x
 * 2048 x 128: ~10 %).  On two or more they lose: both threads wait for the shared A block and
 * then for each other's units at every K block (4 times per dW of the d = 128 GPT, where a thread
 * that the busy machine deschedules stops the other), while here the only wait is for B. */
#define GC_ROWS_MAX_B (8.0 * 1024 * 1024)
#define GC_ROWS_MAX_APACK (2.0 * 1024 * 1024) /* A packed once for all chunks, at most */
#define GC_ROWS_OWN_B (512 * 1024) /* B up to this size: one copy per participant */
#define GC_ROWS_OWN_B_THREADS 4     /* ... always for this many participants at most */
static int GC_FN(rows_fit)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int want, int bpacked)
{
    const ptrdiff_t kc = gc_gemm_kc(sizeof(GC_T) == 4 ? 'f' : 'd', k);
    const ptrdiff_t npa = (m + GC_BLK.mr - 1) / GC_BLK.mr;
    const double width = (double)GC_FN(round_up)(n, GC_BLK.nr) * sizeof(GC_T);
    const double ablk = (double)(npa * GC_BLK.mr) * (double)kc * sizeof(GC_T);
    if (want == 1 && k > kc && ablk <= 0.6 * (double)gc_cache_info.l2)
        return 0;
    return (double)kc * width <= 1.6 * (double)gc_cache_info.l2 &&
           (bpacked || (double)k * width <= GC_ROWS_MAX_B) &&
           (npa >= 2 * (ptrdiff_t)want ||
            (want > 1 && width >= 2.0 * want * GC_BLK.nr * sizeof(GC_T)));
}

/* Whether an unpacked product that does not fit the row-split mode should run swapped (C^T =
 * op(B)^T op(A)^T) because that one fits: a dW = dY^T X with a wide X (128 x 2048 x 512 in the
 * GPT: the blocked steps' waits at every K block, as above) becomes 512 x 2048 x 128 with its
 * B = dY packed once.  Only with alpha 1 (swapped, alpha would scale the other operand: other
 * bits than the unswapped call on one thread), outside batch mode, with C^T small enough for the
 * swapped mode's row-major buffer, and when the swapped tiles waste no more than a tenth more. */
static int GC_FN(rows_swap)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, ptrdiff_t batch, ptrdiff_t sc,
                            GC_T alpha)
{
    /* (gc_gemm_px's thread count; batch mode, where the mode is not used, takes these) */
    const int want = gc_threads_for(2.0 * (double)m * (double)n * (double)k, GC_GEMM_GRAIN);
    if (want < 2 || (batch > 1 && sc >= m * n && want < gc_pool_size()) || alpha != (GC_T)1 ||
        (double)m * (double)n * sizeof(GC_T) > GC_CT_BUF_BYTES)
        return 0;
    const double use = GC_FN(tile_use)(m, GC_BLK.mr) * GC_FN(tile_use)(n, GC_BLK.nr);
    const double use_t = GC_FN(tile_use)(n, GC_BLK.mr) * GC_FN(tile_use)(m, GC_BLK.nr);
    return use_t >= 0.9 * use && !GC_FN(rows_fit)(m, n, k, want, 0) &&
           GC_FN(rows_fit)(n, m, k, want, 0);
}

/* Sets up job J (blocking and units already chosen) for the row-split mode with `want` threads:
 * units of about 3 per thread (2 with several K blocks: each unit then reads all of B from L3),
 * at most 4 MR panels (8 when A is stored transposed, so that its packed rows are longer), their
 * count a multiple of the threads and the panels spread evenly over them (dynamic claims then
 * add up to the same work per thread).  Workspace: B (bsz: one for all, or one per participant,
 * bslot apart; then A packed once for all, at aoff, with apack), an A buffer per participant (asz:
 * 0 with apack), the counters. */
static void GC_FN(rows_setup)(GC_FN(gemm_job) * J, int want, int a_packed)
{
    const ptrdiff_t per = J->k > J->kc ? 2 : 3, rmax = J->ta ? 8 : 4;
    ptrdiff_t rg = J->npa / (per * want);
    rg = rg < rmax ? (rg > 1 ? rg : 1) : rmax;
    ptrdiff_t ru = (J->npa + rg - 1) / rg;
    ru = ru > want ? (ru + want / 2) / want * want : ru;
    ru = ru < J->npa ? ru : J->npa;
    J->ru = ru;
    J->rg = (J->npa + ru - 1) / ru;
    J->ncu = 1;
    /* B within GC_ROWS_OWN_B stays in L2 (each participant's own copy): units of one panel then
     * cost nothing more and end evenly (256^3 on two threads: units of 2 and 3 panels, 32 - 48
     * us each, left one thread idle ~10 us at the end of ~175) */
    if ((double)J->k * (double)(J->npb * J->nr) * sizeof(GC_T) <= GC_ROWS_OWN_B) {
        J->ru = J->npa;
        J->rg = 1;
    }
    /* Few panels per thread (under 8): one panel per group, each split into `want` column
     * chunks, so that every thread gets about the same share of every panel.  Groups of whole
     * panels end unevenly: 64 x 784 x 512 has 5 panels of 14 rows (3 against 2 on two threads),
     * 128 rows 9 full panels and one of 2 rows (which the edge kernel makes cheap), so 6 groups of
     * 1, 2, 2, 1, 2, 2 panels left one thread with 5 of the 9.14 panels' work.  Fewer than two
     * panels per thread take this split too (the blocked steps made both threads wait for each
     * K block's A block, and an unpacked 32 x 512 x 512 ran swapped, packing all of B^T as its A:
     * slower on two threads than on one). */
    if (want > 1 && J->npa < 8 * (ptrdiff_t)want && J->npb >= 2 * want) {
        J->ru = J->npa;
        J->rg = 1;
        J->ncu = want;
    }
    /* ... unless every thread has rows for at least 4 panels, B comes pre-packed (a B packed
     * here is packed in shares, each thread's share that of its own chunk) and its K block
     * across all of N stays in L2 (within 0.6 x L2; A not pre-packed: its panels are fixed):
     * then one block of m / want rows per thread (its last panel cut at the block's end: the
     * same bits, which depend only on the K blocks), all of N, A packed by its own unit.  Not
     * for alpha != 1 with A read in place: full panels apply alpha in the kernel there while a
     * cut edge panel, packed, folds it into A (other bits, at rows that move with the thread
     * count).  In chained layers (an MLP at batch 128: 128 x 512 x 512) each thread then reads
     * only the rows of A that it wrote as C in the previous layer and writes no line that the
     * other reads: with column chunks both threads packed half of a shared A each, read the
     * other's half and wrote C lines the other had read (on this machine's two vCPUs, lines that
     * the other core holds are slow to take over). */
    const double bkblk = (double)J->kc * (double)(J->npb * J->nr) * sizeof(GC_T);
    if (J->ncu > 1 && !a_packed && J->pkb && J->m >= 4 * (ptrdiff_t)want * J->mr &&
        bkblk <= 0.6 * (double)gc_cache_info.l2 && (J->alpha == (GC_T)1 || !J->adirect)) {
        J->rblk = 1;
        J->ru = want;
        J->rg = ((J->m + want - 1) / want + J->mr - 1) / J->mr;
        J->ncu = 1;
    }
    J->pn = J->npb;
    J->gm = J->rg;
    /* A in place for alpha 1 (the same bits as packed), unless its rows alias in L1 */
    J->adirect |= !a_packed && !J->ta && J->alpha == (GC_T)1 &&
                  !gc_rows_alias(J->k * (ptrdiff_t)sizeof(GC_T), J->mr);
    J->bpack = !J->pkb;
    J->asz = GC_FN(round_up)(J->rg * J->mr * J->kc, 64);
    J->bsz = J->pkb ? 0 : GC_FN(round_up)(J->k * J->npb * J->nr, 64);
    /* A small B packed by every participant into its own copy instead of once for all: lines
     * that one core writes while the other holds them (it read the shared copy in the previous
     * call) are slow to take over (here, two vCPUs whose caches are far apart: 256^3's 256 KiB B
     * took ~65 us to pack on two threads against ~7 us on one, the whole product ~155 us).  Only
     * for few participants, or where the copy (k n elements) is a small share of each one's work
     * (2 m n k / want flops; want <= m / 64: under 1/128): every participant packs all of B, and
     * the copies take want x bsz (2048 x 128 x 1024 on 64 threads: 32 MiB for a 512 KiB B). */
    const int own_ok = want <= GC_ROWS_OWN_B_THREADS || (ptrdiff_t)want * 64 <= J->m;
    J->bslot = want > 1 && own_ok && J->bsz && J->bsz * sizeof(GC_T) <= GC_ROWS_OWN_B ? J->bsz : 0;
    J->bsz *= J->bslot ? want : 1;
    /* Panels split into column chunks, A packed: once for all chunks, every K block, shared (with
     * B's, the one wait), rather than by each chunk's unit again (128 x 512 x 512 on two threads:
     * each thread packed all of A, ~7 % of its time) */
    const double abytes = (double)J->npa * J->mr * (double)J->k * sizeof(GC_T);
    J->apack = J->ncu > 1 && !a_packed && !J->adirect && abytes <= GC_ROWS_MAX_APACK;
    if (J->apack) { /* workspace [B, A] (pka), no A buffers */
        J->aoff = J->bsz;
        J->bsz += GC_FN(round_up)(J->npa * J->mr * J->k, 64);
        J->asz = 0;
    }
    /* A packed once and B not packed in the region (pre-packed, or each participant's own
     * copy): the units wait only for the A panels they read (rows_afine) */
    J->afine = J->apack && (!J->bpack || J->bslot);
    /* counters: the claim ranges' (a_next, u_next) in steps [0, want), K block i's a_done in
     * step want + i (on its own cache line: claims of range 0 would otherwise keep taking the line
     * that the units of K block 0 poll); with afine, range r's A panels of K block i in step
     * want + nkb + i * want + r instead (rows_afine) */
    J->nrange = want;
    const ptrdiff_t nkb = (J->k + J->kc - 1) / J->kc;
    J->nsteps = want + nkb + (J->afine ? want * nkb : 0);
}
