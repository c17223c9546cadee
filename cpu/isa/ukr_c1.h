/* The few-input-channels direct convolution's row kernel (contract in isa.h: gc_c1ukr_f32; driver
 * conv_c1.c), included by cpu/isa/<isa>.c with a vector set (isa/vec_f32x*.h or the scalar
 * GEMM's macros: UKR_T, UKR_VT, UKR_VL, V_ZERO, V_LOADU, V_STOREU, V_SET1, V_FMA, V_ADD), the
 * output-channel block UKR_C1_OB (accumulators held in registers), the vector relu UKR_C1_RELU
 * and the name UKR_C1_NAME.  Only this loop is ISA-specific.
 *
 * Pixels along the lanes: UKR_VL consecutive output pixels of one row read as one vector at each
 * tap's offset in the zero-padded rows (stride 1 along the row), each of UKR_C1_OB output
 * channels' weight broadcast, one FMA per tap and channel: acc = w * x + acc from zero in tap
 * order (ci, ki, kj), im2col's K order, then + bias, + residual, relu, each rounded on its own --
 * the operations the im2col GEMM (its gemv_n path up to 24 output channels, its blocked tile
 * beyond, one K block) and conv_direct.c's tile apply to each element: the same bits.  The last
 * partial vector is the vector ending at the last pixel, overlapping the one before (the same
 * element computed twice, the same bits), so runs of at least UKR_VL pixels need no masks;
 * shorter ones go through stack vectors.  A missing bias adds -0, which changes no bit (x + -0
 * is x for every x, +0 and -0 included), so the epilogue keeps no branch per vector; +0 would
 * not do: the chain gives -0 where every product rounds to -0 (an FMA of a negative product
 * smaller than the least subnormal onto a zero), and -0 + +0 is +0 where the GEMM, which adds
 * no bias, keeps -0. */

#include <string.h>

/* npix >= UKR_VL pixels, the residual and relu constant in each instance */
static inline __attribute__((always_inline)) void
UKR_C1_BODY(ptrdiff_t nt, const UKR_T *restrict x, const int32_t *restrict koff,
            const UKR_T *restrict w, ptrdiff_t o, const UKR_T *restrict bias,
            const UKR_T *restrict res, const int relu, UKR_T *restrict out, ptrdiff_t ldo,
            ptrdiff_t npix)
{
    for (ptrdiff_t o0 = 0; o0 < o; o0 += UKR_C1_OB, w += nt * UKR_C1_OB) {
        const int nch = o - o0 < UKR_C1_OB ? (int)(o - o0) : UKR_C1_OB;
        UKR_T bs[UKR_C1_OB];
        for (int j = 0; j < UKR_C1_OB; j++)
            bs[j] = bias && j < nch ? bias[o0 + j] : (UKR_T)-0.0;
        for (ptrdiff_t px = 0; px < npix; px += UKR_VL) {
            const ptrdiff_t at = px + UKR_VL > npix ? npix - UKR_VL : px;
            UKR_VT acc[UKR_C1_OB];
#pragma GCC unroll 16
            for (int j = 0; j < UKR_C1_OB; j++)
                acc[j] = V_ZERO();
            const UKR_T *xp = x + at, *wp = w;
            for (ptrdiff_t t = 0; t < nt; t++, wp += UKR_C1_OB) {
                const UKR_VT xv = V_LOADU(xp + koff[t]);
#pragma GCC unroll 16
                for (int j = 0; j < UKR_C1_OB; j++)
                    acc[j] = V_FMA(V_SET1(wp[j]), xv, acc[j]);
            }
            UKR_T *op = out + o0 * ldo + at;
            const UKR_T *rp = res ? res + o0 * ldo + at : NULL;
#pragma GCC unroll 16
            for (int j = 0; j < UKR_C1_OB; j++) {
                if (j < nch) {
                    UKR_VT v = V_ADD(acc[j], V_SET1(bs[j]));
                    if (rp)
                        v = V_ADD(v, V_LOADU(rp + j * ldo));
                    if (relu)
                        v = UKR_C1_RELU(v);
                    V_STOREU(op + j * ldo, v);
                }
            }
        }
    }
}

static void UKR_C1_NAME(ptrdiff_t nt, const UKR_T *restrict x, const int32_t *restrict koff,
                        const UKR_T *restrict w, ptrdiff_t o, const UKR_T *restrict bias,
                        const UKR_T *restrict res, int relu, UKR_T *restrict out, ptrdiff_t ldo,
                        ptrdiff_t npix)
{
    if (npix >= UKR_VL) {
        if (res && relu)
            UKR_C1_BODY(nt, x, koff, w, o, bias, res, 1, out, ldo, npix);
        else if (res)
            UKR_C1_BODY(nt, x, koff, w, o, bias, res, 0, out, ldo, npix);
        else if (relu)
            UKR_C1_BODY(nt, x, koff, w, o, bias, NULL, 1, out, ldo, npix);
        else
            UKR_C1_BODY(nt, x, koff, w, o, bias, NULL, 0, out, ldo, npix);
        return;
    }
    /* fewer pixels than a vector: one vector per channel block through the stack (x is
     * readable a whole vector wide), the same operations */
    for (ptrdiff_t o0 = 0; o0 < o; o0 += UKR_C1_OB, w += nt * UKR_C1_OB) {
        const int nch = o - o0 < UKR_C1_OB ? (int)(o - o0) : UKR_C1_OB;
        UKR_VT acc[UKR_C1_OB];
        for (int j = 0; j < UKR_C1_OB; j++)
            acc[j] = V_ZERO();
        for (ptrdiff_t t = 0; t < nt; t++) {
            const UKR_VT xv = V_LOADU(x + koff[t]);
            for (int j = 0; j < UKR_C1_OB; j++)
                acc[j] = V_FMA(V_SET1(w[t * UKR_C1_OB + j]), xv, acc[j]);
        }
        for (int j = 0; j < nch; j++) {
            UKR_T r[UKR_VL] = {0}, s[UKR_VL];
            UKR_VT v = V_ADD(acc[j], V_SET1(bias ? bias[o0 + j] : (UKR_T)-0.0));
            if (res) {
                memcpy(r, res + (o0 + j) * ldo, sizeof(UKR_T) * (size_t)npix);
                v = V_ADD(v, V_LOADU(r));
            }
            if (relu)
                v = UKR_C1_RELU(v);
            V_STOREU(s, v);
            memcpy(out + (o0 + j) * ldo, s, sizeof(UKR_T) * (size_t)npix);
        }
    }
}
