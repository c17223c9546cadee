/* The tile transforms of the Winograd F(4x4, 3x3) convolution (cpu/conv_winograd.c), included by
 * every cpu/isa/<isa>.c so that the compiler vectorizes them to that ISA's width: straight loops
 * along a block of n <= GC_WG_TB tiles, each array [..][GC_WG_TB] holding one value per tile.
 * The extension is built with -std=c11 (no contraction into FMAs) and every ISA runs the same
 * operations in the same order: the same bits everywhere.
 *
 *   wg_in:  V = B^T d B   d[k][j][t]: tile t's 6x6 input window (row k, column j);
 *           V[i*6 + s] written to v + (i*6 + s)*xs + t
 *   wg_out: Y = A^T m A + bias   m[(r*6 + s)*xs + t]: tile t's 36 products;
 *           y[i][j][t]: its 4x4 outputs
 *
 * B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1],
 * A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]. */

/* the six outputs of B^T applied to (d0 .. d5) */
#define WG_BT(o0, o1, o2, o3, o4, o5, d0, d1, d2, d3, d4, d5)                                     \
    do {                                                                                          \
        o0 = 4.0f * (d0) - 5.0f * (d2) + (d4);                                                    \
        o1 = -4.0f * ((d1) + (d2)) + ((d3) + (d4));                                               \
        o2 = 4.0f * ((d1) - (d2)) + ((d4) - (d3));                                                \
        o3 = 2.0f * ((d3) - (d1)) + ((d4) - (d2));                                                \
        o4 = 2.0f * ((d1) - (d3)) + ((d4) - (d2));                                                \
        o5 = 4.0f * (d1) - 5.0f * (d3) + (d5);                                                    \
    } while (0)

/* one row of B^T over six arrays along n tiles */
static void wg_bt_rows(const float *restrict a0, const float *restrict a1,
                       const float *restrict a2, const float *restrict a3,
                       const float *restrict a4, const float *restrict a5, float *restrict o0,
                       float *restrict o1, float *restrict o2, float *restrict o3,
                       float *restrict o4, float *restrict o5, ptrdiff_t n)
{
    for (ptrdiff_t t = 0; t < n; t++) {
        float r0, r1, r2, r3, r4, r5;
        WG_BT(r0, r1, r2, r3, r4, r5, a0[t], a1[t], a2[t], a3[t], a4[t], a5[t]);
        o0[t] = r0;
        o1[t] = r1;
        o2[t] = r2;
        o3[t] = r3;
        o4[t] = r4;
        o5[t] = r5;
    }
}

static void wg_in_f32(const float *d, ptrdiff_t n, float *v, ptrdiff_t xs)
{
    float z[6][6][GC_WG_TB]; /* z[i][j] = sum_k BT[i][k] d[k][j] */
#define D(k, j) (d + ((k) * 6 + (j)) * GC_WG_TB)
    for (int j = 0; j < 6; j++)
        wg_bt_rows(D(0, j), D(1, j), D(2, j), D(3, j), D(4, j), D(5, j), z[0][j], z[1][j],
                   z[2][j], z[3][j], z[4][j], z[5][j], n);
#undef D
    for (int i = 0; i < 6; i++) {
        float *vi = v + i * 6 * xs;
        wg_bt_rows(z[i][0], z[i][1], z[i][2], z[i][3], z[i][4], z[i][5], vi, vi + xs,
                   vi + 2 * xs, vi + 3 * xs, vi + 4 * xs, vi + 5 * xs, n);
    }
}

/* one row of A^T over six arrays along n tiles, plus b */
static void wg_at_rows(const float *restrict a0, const float *restrict a1,
                       const float *restrict a2, const float *restrict a3,
                       const float *restrict a4, const float *restrict a5, float *restrict o0,
                       float *restrict o1, float *restrict o2, float *restrict o3, float b,
                       ptrdiff_t n)
{
    for (ptrdiff_t t = 0; t < n; t++) {
        const float s12 = a1[t] + a2[t], d12 = a1[t] - a2[t];
        const float s34 = a3[t] + a4[t], d34 = a3[t] - a4[t];
        o0[t] = (a0[t] + s12 + s34) + b;
        o1[t] = (d12 + 2.0f * d34) + b;
        o2[t] = (s12 + 4.0f * s34) + b;
        o3[t] = (d12 + 8.0f * d34 + a5[t]) + b;
    }
}

static void wg_out_f32(const float *m, ptrdiff_t xs, ptrdiff_t n, float bias, float *y)
{
    float q[4][6][GC_WG_TB]; /* q[i][s] = sum_r AT[i][r] m[r][s] */
    for (int s = 0; s < 6; s++) {
        const float *c = m + s * xs;
        wg_at_rows(c, c + 6 * xs, c + 12 * xs, c + 18 * xs, c + 24 * xs, c + 30 * xs, q[0][s],
                   q[1][s], q[2][s], q[3][s], 0.0f, n);
    }
#define Y(i, j) (y + ((i) * 4 + (j)) * GC_WG_TB)
    for (int i = 0; i < 4; i++)
        wg_at_rows(q[i][0], q[i][1], q[i][2], q[i][3], q[i][4], q[i][5], Y(i, 0), Y(i, 1),
                   Y(i, 2), Y(i, 3), bias, n);
#undef Y
}

static void gc_winograd_fill(gc_isa_kernels *k)
{
    k->wg_in_f32 = wg_in_f32;
    k->wg_out_f32 = wg_out_f32;
}
