/* Recurrent layers (RNN tanh/relu, LSTM, GRU): one layer and one direction over the whole
 * sequence in one call, forward and backward (kernels.h's gc_rnn).
 *
 * Forward, per time step: one GEMM for every gate of every active row (h_prev W_hh^T, the
 * input projection xg of all steps having been one GEMM of the caller's), then one pass over
 * the rows that adds xg and b_hh, applies the gate nonlinearities (the unary kernels' vector
 * forms) and updates the state.  It saves what the backward needs: the activated gates, the
 * state each step read (hprev) and, per mode, the extra record (LSTM: c_prev, tanh(c_t); GRU:
 * h W_hn^T + b_hn, which r multiplies).
 *
 * Backward, per step in reverse order: one pass turns the output and state gradients into the
 * pre-activation gate gradients (dxg: the gradient of the input projection; for GRU the hidden
 * side's differ in the n gate, dhg = dxg with dn * r), then one GEMM gives the previous state's
 * gradient (dhg W_hh).  dW_hh = dHG^T Hprev over all steps is one GEMM at the end, db_hh the
 * column sums of dHG.
 *
 * Rows outside bs[t] (packed sequences) are left alone: their state passes through the step
 * and their output is 0; their records are written as 0 so that every output is defined. */
#ifndef GC_T

#define _POSIX_C_SOURCE 200112L /* posix_memalign */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* Steps with more active rows than this multiply by W_hh packed once per call (gemm_px); fewer
 * rows take the GEMM's gemv path, which reads W_hh in place (gemm_dispatch.h's GC_GEMV_MAX_M_T). */
#define GC_RNN_PACK_MIN_ROWS 16

int gc_rnn_gates(int mode)
{
    return mode == GC_RNN_LSTM ? 4 : mode == GC_RNN_GRU ? 3 : 1;
}

ptrdiff_t gc_rnn_extra(int mode, ptrdiff_t h)
{
    return mode == GC_RNN_LSTM ? 2 * h : mode == GC_RNN_GRU ? h : 0;
}

#define GC_BODY "recurrent.c"
#include "each_float.h"

#else

/* the row count of step t and the step processed k-th */
static ptrdiff_t GC_FN(rnn_rows)(const gc_rnn *p, ptrdiff_t t)
{
    return p->bs ? (ptrdiff_t)p->bs[t] : p->b;
}

int GC_FN(gc_rnn_forward)(const GC_T *xg, const GC_T *whh, const GC_T *bhh, const GC_T *h0,
                          const GC_T *c0, GC_T *y, GC_T *gates, GC_T *hprev, GC_T *extra,
                          const gc_rnn *p)
{
    const ptrdiff_t T = p->t, B = p->b, H = p->h, G = gc_rnn_gates(p->mode);
    const ptrdiff_t GH = G * H, E = gc_rnn_extra(p->mode, H);
    const int lstm = p->mode == GC_RNN_LSTM, gru = p->mode == GC_RNN_GRU;
    GC_T *hcur = y + T * B * H; /* the running state lives where h_n ends up */
    GC_T *ccur = lstm ? y + (T + 1) * B * H : NULL;
    GC_T *hg = malloc(sizeof(GC_T) * (size_t)(B * GH > 0 ? B * GH : 1));
    if (!hg)
        return -1;
    memcpy(hcur, h0, sizeof(GC_T) * (size_t)(B * H));
    if (lstm)
        memcpy(ccur, c0, sizeof(GC_T) * (size_t)(B * H));
    const int act = p->mode == GC_RNN_RELU ? GC_UNARY_RELU : GC_UNARY_TANH;
    /* W_hh^T as the B operand of every step, packed once (not once per step) */
    gc_packed pw;
    int packed = 0;
    if (B > GC_RNN_PACK_MIN_ROWS && T > 1 &&
        gc_gemm_pack_init(&pw, sizeof(GC_T) == 4 ? 'f' : 'd', 1, H, GH, 1, 0) == 0 &&
        posix_memalign(&pw.data, 64, sizeof(GC_T) * (size_t)(pw.elems > 0 ? pw.elems : 1)) == 0) {
        GC_FN(gc_gemm_pack)(whh, &pw);
        packed = 1;
    }
    int rc = 0;
    for (ptrdiff_t k = 0; k < T && rc == 0; k++) {
        const ptrdiff_t t = p->reverse ? T - 1 - k : k, n = GC_FN(rnn_rows)(p, t);
        GC_T *yt = y + t * B * H, *gt = gates + t * B * GH, *ht = hprev + t * B * H;
        GC_T *et = extra + t * B * E;
        const GC_T *xt = xg + t * B * GH;
        memcpy(ht, hcur, sizeof(GC_T) * (size_t)(n * H));
        memset(ht + n * H, 0, sizeof(GC_T) * (size_t)((B - n) * H));
        memset(gt + n * GH, 0, sizeof(GC_T) * (size_t)((B - n) * GH));
        memset(et + n * E, 0, sizeof(GC_T) * (size_t)((B - n) * E));
        memset(yt + n * H, 0, sizeof(GC_T) * (size_t)((B - n) * H));
        if (n == 0)
            continue;
        if (packed && n > GC_RNN_PACK_MIN_ROWS)
            rc = GC_FN(gc_gemm_px)(ht, NULL, NULL, &pw, hg, 1, n, GH, H, 0, 1, 1, 0, 0, 0, 0, NULL,
                                   GC_UNARY_NONE);
        else
            rc = GC_FN(gc_gemm)(ht, whh, hg, 1, n, GH, H, 0, 1, 1, 0, 0, 0, 0);
        if (rc < 0)
            break;
        for (ptrdiff_t r = 0; r < n; r++) {
            GC_T *g = gt + r * GH, *hr = hcur + r * H, *e = et + r * E;
            const GC_T *x = xt + r * GH, *a = hg + r * GH;
            if (gru) {
                /* r, z: sigmoid(x + a + b); n: tanh(x_n + r * (a_n + b_n)) */
                for (ptrdiff_t j = 0; j < 2 * H; j++)
                    g[j] = x[j] + a[j] + (bhh ? bhh[j] : 0);
                for (ptrdiff_t j = 0; j < H; j++)
                    e[j] = a[2 * H + j] + (bhh ? bhh[2 * H + j] : 0);
                GC_FN(gc_unary)(GC_UNARY_SIGMOID, g, g, 2 * H);
                for (ptrdiff_t j = 0; j < H; j++)
                    g[2 * H + j] = x[2 * H + j] + g[j] * e[j];
                GC_FN(gc_unary)(GC_UNARY_TANH, g + 2 * H, g + 2 * H, H);
                for (ptrdiff_t j = 0; j < H; j++) {
                    const GC_T z = g[H + j], nn = g[2 * H + j];
                    hr[j] = nn + z * (hr[j] - nn);
                }
            } else {
                for (ptrdiff_t j = 0; j < GH; j++)
                    g[j] = x[j] + a[j] + (bhh ? bhh[j] : 0);
                if (lstm) {
                    GC_T *cr = ccur + r * H, *th = e + H;
                    GC_FN(gc_unary)(GC_UNARY_SIGMOID, g, g, 2 * H);
                    GC_FN(gc_unary)(GC_UNARY_TANH, g + 2 * H, g + 2 * H, H);
                    GC_FN(gc_unary)(GC_UNARY_SIGMOID, g + 3 * H, g + 3 * H, H);
                    memcpy(e, cr, sizeof(GC_T) * (size_t)H);
                    for (ptrdiff_t j = 0; j < H; j++)
                        cr[j] = g[H + j] * cr[j] + g[j] * g[2 * H + j];
                    GC_FN(gc_unary)(GC_UNARY_TANH, cr, th, H);
                    for (ptrdiff_t j = 0; j < H; j++)
                        hr[j] = g[3 * H + j] * th[j];
                } else {
                    GC_FN(gc_unary)(act, g, g, H);
                    memcpy(hr, g, sizeof(GC_T) * (size_t)H);
                }
            }
        }
        memcpy(yt, hcur, sizeof(GC_T) * (size_t)(n * H));
    }
    if (packed)
        free(pw.data);
    free(hg);
    return rc;
}

int GC_FN(gc_rnn_backward)(const GC_T *gy, const GC_T *gates, const GC_T *hprev,
                           const GC_T *extra, const GC_T *whh, GC_T *dxg, GC_T *dwhh, GC_T *dbhh,
                           GC_T *dh0, GC_T *dc0, const gc_rnn *p)
{
    const ptrdiff_t T = p->t, B = p->b, H = p->h, G = gc_rnn_gates(p->mode);
    const ptrdiff_t GH = G * H, E = gc_rnn_extra(p->mode, H);
    const int lstm = p->mode == GC_RNN_LSTM, gru = p->mode == GC_RNN_GRU;
    const int relu = p->mode == GC_RNN_RELU;
    /* GRU's hidden-side gate gradients differ from dxg in the n gate: their own buffer */
    GC_T *dhg = dxg;
    if (gru) {
        dhg = malloc(sizeof(GC_T) * (size_t)(T * B * GH > 0 ? T * B * GH : 1));
        if (!dhg)
            return -1;
    }
    memcpy(dh0, gy + T * B * H, sizeof(GC_T) * (size_t)(B * H));
    if (lstm)
        memcpy(dc0, gy + (T + 1) * B * H, sizeof(GC_T) * (size_t)(B * H));
    /* dh_prev = dhg W_hh has few rows: as dhg W_hh, the GEMM's gemv path streams W_hh once per
     * row.  Computed transposed instead, (W_hh^T dhg^T) [H, n], with W_hh^T packed once, it
     * runs through the blocked kernel (2-3x faster at B = 20, H = 256), then is transposed into
     * dh0. */
    gc_packed pt;
    GC_T *dht = NULL;
    if (H > GC_RNN_PACK_MIN_ROWS + 8 && T > 1 &&
        gc_gemm_pack_init(&pt, sizeof(GC_T) == 4 ? 'f' : 'd', 0, H, GH, 1, 1) == 0 &&
        posix_memalign(&pt.data, 64, sizeof(GC_T) * (size_t)(pt.elems > 0 ? pt.elems : 1)) == 0) {
        dht = malloc(sizeof(GC_T) * (size_t)(B * H > 0 ? B * H : 1));
        if (dht)
            GC_FN(gc_gemm_pack)(whh, &pt);
        else
            free(pt.data);
    }
    int rc = 0;
    for (ptrdiff_t k = T - 1; k >= 0; k--) {
        const ptrdiff_t t = p->reverse ? T - 1 - k : k, n = GC_FN(rnn_rows)(p, t);
        const GC_T *gt = gates + t * B * GH, *ht = hprev + t * B * H, *et = extra + t * B * E;
        const GC_T *gyt = gy + t * B * H;
        GC_T *dx = dxg + t * B * GH, *dh = dhg + t * B * GH;
        memset(dx + n * GH, 0, sizeof(GC_T) * (size_t)((B - n) * GH));
        if (gru)
            memset(dh + n * GH, 0, sizeof(GC_T) * (size_t)((B - n) * GH));
        if (n == 0)
            continue;
        for (ptrdiff_t r = 0; r < n; r++) {
            const GC_T *g = gt + r * GH, *e = et + r * E, *gyr = gyt + r * H;
            GC_T *d = dx + r * GH, *dhr = dh0 + r * H;
            if (lstm) {
                GC_T *dcr = dc0 + r * H;
                for (ptrdiff_t j = 0; j < H; j++) {
                    const GC_T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
                    const GC_T cp = e[j], th = e[H + j];
                    const GC_T dhv = dhr[j] + gyr[j];
                    const GC_T dc = dcr[j] + dhv * o * (1 - th * th);
                    d[j] = dc * gg * i * (1 - i);
                    d[H + j] = dc * cp * f * (1 - f);
                    d[2 * H + j] = dc * i * (1 - gg * gg);
                    d[3 * H + j] = dhv * th * o * (1 - o);
                    dcr[j] = dc * f;
                }
            } else if (gru) {
                const GC_T *hp = ht + r * H;
                GC_T *dq = dh + r * GH;
                for (ptrdiff_t j = 0; j < H; j++) {
                    const GC_T rr = g[j], z = g[H + j], nn = g[2 * H + j];
                    const GC_T dhv = dhr[j] + gyr[j];
                    const GC_T dn = dhv * (1 - z) * (1 - nn * nn);
                    const GC_T dr = dn * e[j] * rr * (1 - rr);
                    const GC_T dz = dhv * (hp[j] - nn) * z * (1 - z);
                    d[j] = dq[j] = dr;
                    d[H + j] = dq[H + j] = dz;
                    d[2 * H + j] = dn;
                    dq[2 * H + j] = dn * rr;
                    dhr[j] = dhv * z; /* the direct path; the GEMM adds the gates' */
                }
            } else {
                for (ptrdiff_t j = 0; j < H; j++) {
                    const GC_T dhv = dhr[j] + gyr[j], hv = g[j];
                    d[j] = relu ? (hv > 0 ? dhv : 0) : dhv * (1 - hv * hv);
                }
            }
        }
        /* dh_prev = dhg W_hh (+ the GRU's direct path already in dh0) */
        if (dht) {
            rc = GC_FN(gc_gemm_px)(NULL, &pt, dh, NULL, dht, 1, H, n, GH, 1, 1, 1, 0, 0, 0, 0,
                                   NULL, GC_UNARY_NONE);
            for (ptrdiff_t r = 0; r < n && rc == 0; r++) {
                GC_T *dhr = dh0 + r * H;
                for (ptrdiff_t j = 0; j < H; j++)
                    dhr[j] = (gru ? dhr[j] : 0) + dht[j * n + r];
            }
        } else {
            rc = GC_FN(gc_gemm)(dh, whh, dh0, 1, n, H, GH, 0, 0, 1, gru ? 1 : 0, 0, 0, 0);
        }
        if (rc < 0)
            break;
    }
    if (dht) {
        free(dht);
        free(pt.data);
    }
    if (rc == 0 && T * B > 0)
        rc = GC_FN(gc_gemm)(dhg, hprev, dwhh, 1, GH, H, T * B, 1, 0, 1, 0, 0, 0, 0);
    else if (rc == 0)
        memset(dwhh, 0, sizeof(GC_T) * (size_t)(GH * H));
    if (rc == 0 && dbhh) {
        memset(dbhh, 0, sizeof(GC_T) * (size_t)GH);
        for (ptrdiff_t r = 0; r < T * B; r++)
            for (ptrdiff_t j = 0; j < GH; j++)
                dbhh[j] += dhg[r * GH + j];
    }
    if (gru)
        free(dhg);
    return rc;
}

#endif
