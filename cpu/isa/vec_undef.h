/* Undefines the kernel templates' vector set (the vector type and width, the operations every
 * template reads), before isa/vec_f32x*.h define another and in isa/ukr_undef.h.  No include
 * guard: included once per use. */
#undef UKR_VT
#undef UKR_VL
#undef V_ZERO
#undef V_LOADU
#undef V_STOREU
#undef V_SET1
#undef V_FMA
#undef V_ADD
