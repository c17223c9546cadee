/* Histograms (torch.histogram / histogramdd / histc), float32 / float64: one pass over the
 * points, each point's bin found per dimension and its count (or weight) added.
 *
 * A point whose coordinate in some dimension is NaN or lies outside [edges[0], edges[last]] is
 * skipped; bin b holds [edges[b], edges[b + 1]), the last bin also its right edge.  The bin of a
 * coordinate v is found as PyTorch's CPU kernel finds it (aten/src/ATen/native/cpu/
 * HistogramKernel.cpp), per `mode`:
 *   GC_HIST_SEARCH  the last edge <= v (a binary search over all edges: any increasing edges);
 *   GC_HIST_LINEAR  (v - e0) * bins / (e_last - e0) in the element type, truncated, then the
 *                   edges around it searched (pos - 1 .. pos + 1: equal-width edges, finite);
 *   GC_HIST_HISTC   (v - e0) * bins / (e_last - e0) alone (torch.histc: only e0 and e_last read).
 *
 * Determinism: the points are cut into chunks whose size depends on the point and bin counts
 * only; each chunk sums into its own row of partial sums (double: counts exact to 2^53), and the
 * rows are added in chunk order per bin.  Any thread count gives the same bits. */
#ifndef GC_T

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

#define GC_HIST_CHUNK 65536          /* points per chunk, at least */
#define GC_HIST_PARTIALS (1 << 22)   /* partial sums (chunks x bins) kept below this, where can */

#define GC_BODY "histogram.c"
#include "each_float.h"

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *x, *edges, *w;
    const int64_t *nedges, *off;
    ptrdiff_t npts, dims, nbins, chunk;
    int mode;
    double *part;
} GC_FN(hist_job);

/* The bin of v in edges e[0 .. ne) (ne >= 2), or -1 when v is outside or NaN. */
static inline ptrdiff_t GC_FN(hist_bin)(GC_T v, const GC_T *e, ptrdiff_t ne, int mode)
{
    const GC_T lo = e[0], hi = e[ne - 1];
    if (!(v >= lo && v <= hi))
        return -1;
    const ptrdiff_t nb = ne - 1;
    ptrdiff_t pos;
    if (mode == GC_HIST_SEARCH) {
        ptrdiff_t a = 0, b = ne; /* upper_bound: the first edge > v */
        while (a < b) {
            const ptrdiff_t mid = a + (b - a) / 2;
            if (e[mid] <= v)
                a = mid + 1;
            else
                b = mid;
        }
        pos = a - 1;
    } else {
        const GC_T q = (v - lo) * (GC_T)nb / (hi - lo); /* PyTorch's, in the element type */
        pos = q >= (GC_T)0 ? (q < (GC_T)nb ? (ptrdiff_t)q : nb) : 0; /* (NaN: an overflow) */
        if (mode == GC_HIST_LINEAR) {
            ptrdiff_t a = pos - 1 > 0 ? pos - 1 : 0, b = pos + 2 < ne ? pos + 2 : ne;
            while (a < b) { /* upper_bound over e[pos - 1 .. pos + 2) */
                const ptrdiff_t mid = a + (b - a) / 2;
                if (e[mid] <= v)
                    a = mid + 1;
                else
                    b = mid;
            }
            pos = a - 1;
        }
    }
    return pos == nb ? nb - 1 : pos; /* the last edge belongs to the last bin */
}

static void GC_FN(hist_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(hist_job) *J = ctx;
    const ptrdiff_t D = J->dims;
    for (ptrdiff_t c = lo; c < hi; c++) {
        double *restrict h = J->part + c * J->nbins;
        memset(h, 0, sizeof(double) * (size_t)J->nbins);
        const ptrdiff_t p0 = c * J->chunk, p1 = p0 + J->chunk < J->npts ? p0 + J->chunk : J->npts;
        if (D == 1) { /* histogram: one edge list */
            const GC_T *e = J->edges;
            const ptrdiff_t ne = (ptrdiff_t)J->nedges[0];
            for (ptrdiff_t p = p0; p < p1; p++) {
                const ptrdiff_t b = GC_FN(hist_bin)(J->x[p], e, ne, J->mode);
                if (b >= 0)
                    h[b] += J->w ? (double)J->w[p] : 1.0;
            }
            continue;
        }
        for (ptrdiff_t p = p0; p < p1; p++) {
            ptrdiff_t idx = 0, d = 0;
            for (; d < D; d++) {
                const ptrdiff_t ne = (ptrdiff_t)J->nedges[d];
                const ptrdiff_t b = GC_FN(hist_bin)(J->x[p * D + d], J->edges + J->off[d], ne,
                                                    J->mode);
                if (b < 0)
                    break;
                idx = idx * (ne - 1) + b;
            }
            if (d == D)
                h[idx] += J->w ? (double)J->w[p] : 1.0;
        }
    }
}

int GC_FN(gc_histogram)(const GC_T *x, ptrdiff_t npts, ptrdiff_t dims, const GC_T *edges,
                        const int64_t *nedges, const GC_T *w, GC_T *hist, int mode)
{
    ptrdiff_t nbins = 1;
    for (ptrdiff_t d = 0; d < dims; d++)
        nbins *= (ptrdiff_t)nedges[d] - 1;
    if (nbins <= 0)
        return 0;
    ptrdiff_t *off = malloc(sizeof(ptrdiff_t) * (size_t)(dims > 0 ? dims : 1));
    if (!off)
        return -1;
    for (ptrdiff_t d = 0, o = 0; d < dims; d++) {
        off[d] = o;
        o += (ptrdiff_t)nedges[d];
    }
    /* chunks of at least GC_HIST_CHUNK points, fewer where the partial sums would be too many */
    ptrdiff_t chunk = GC_HIST_CHUNK;
    const double want = (double)npts * (double)nbins / (double)GC_HIST_PARTIALS;
    if (want > (double)chunk)
        chunk = want < (double)npts ? (ptrdiff_t)want + 1 : (npts > 0 ? npts : 1);
    const ptrdiff_t nc = npts > 0 ? (npts + chunk - 1) / chunk : 0;
    double *part = nc ? malloc(sizeof(double) * (size_t)(nc * nbins)) : NULL;
    if (nc && !part) {
        free(off);
        return -1;
    }
    GC_FN(hist_job) J = {.x = x, .edges = edges, .w = w, .nedges = nedges, .off = off,
                         .npts = npts, .dims = dims, .nbins = nbins, .chunk = chunk,
                         .mode = mode, .part = part};
    /* ~4 ns per coordinate (a search: ~2 ns per edge halving) */
    double per = 0.0;
    for (ptrdiff_t d = 0; d < dims; d++) {
        double steps = 1.0;
        for (ptrdiff_t e = (ptrdiff_t)nedges[d]; e > 1 && mode == GC_HIST_SEARCH; e >>= 1)
            steps += 1.0;
        per += 2.0 + 2.0 * steps;
    }
    if (nc)
        gc_parallel_range(nc, 1, (double)npts * per, GC_FN(hist_range), &J);
    /* the chunks' rows added in chunk order: the same sums on any thread count */
    for (ptrdiff_t c = 1; c < nc; c++)
        for (ptrdiff_t b = 0; b < nbins; b++)
            part[b] += part[c * nbins + b];
    for (ptrdiff_t b = 0; b < nbins; b++)
        hist[b] = nc ? (GC_T)part[b] : (GC_T)0;
    free(part);
    free(off);
    return 0;
}

#endif
