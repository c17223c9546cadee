/* Ends one element type's GEMM and small-M instantiations (isa/ukr.h, isa/stream.h) in an ISA
 * file: undefines their parameters (the element and vector types, the vector operations, the
 * kernel names, stream.h's own) so that the next type can define its set.  No include guard:
 * included once per instantiation. */
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX
#undef UKR_T
#include "isa/vec_undef.h"
#undef V_RELU
#undef UKR_NAME
#undef UKR_NAME_DA
#undef V_MUL
