/* One edge kernel of the GEMM template isa/ukr.h (see there): the first UKR_ER rows of the
 * UKR_MR x (UKR_NV vectors) tile, A a packed panel of UKR_MR rows (UKR_MR elements per k step,
 * the first UKR_ER read), only UKR_ER rows of C read / written.  Included by ukr.h once per row
 * count; nothing when UKR_ER is not below UKR_MR. */
#if UKR_ER < UKR_MR
static void UKR_ROWS_CAT(UKR_NAME_ROWS, UKR_ER)(ptrdiff_t k, const UKR_T *restrict a,
                                                const UKR_T *restrict b, ptrdiff_t ldb,
                                                UKR_T *restrict c, ptrdiff_t ldc, UKR_T beta,
                                                const UKR_T *restrict bias, int relu)
{
    UKR_VT acc[UKR_ER][UKR_NV];
#pragma GCC unroll 32
    for (int i = 0; i < UKR_ER; i++) {
        V_PREFETCH(c + i * ldc);
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            acc[i][v] = V_ZERO();
    }
GC_UKR_UNROLL(UKR_UNROLL)
    for (ptrdiff_t p = 0; p < k; p++) {
        UKR_TILE_FMA(UKR_ER, a[i], b);
        a += UKR_MR;
        b += ldb;
    }
#pragma push_macro("UKR_MR")
#undef UKR_MR
#define UKR_MR UKR_ER
    UKR_EPILOGUE();
#pragma pop_macro("UKR_MR")
}
#endif
