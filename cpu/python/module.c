/* gpucore._cpu: the module (see cpu/README.md for the contract).
 *
 * The method table (from bindings.h's list; the functions live in one binding file per kernel
 * family, cpu/python/<family>.c, over the shared argument checks of args.c) and the constants:
 * UNARY_*, BINARY_*, REDUCE_* and the table OPCODES, all from cpu/opcodes.def (OPCODES holds
 * every section of it, the shader-private constants included); the types HostBuffer
 * (host_cache.c) and Program (program.c).
 */
#include "args.h"
#include "bindings.h"
#include "isa.h"

/* ------------------------------------------------------------------------------------------ */
/* Op names, indexed by code                                                                   */

const char *const gc_unary_names[GC_UNARY_COUNT] = {
#define GC_UNARY(NAME, name, code) [code] = #NAME,
#include "opcodes.def"
#undef GC_UNARY
};
const char *const gc_binary_names[GC_BINARY_COUNT] = {
#define GC_BINARY(NAME, name, code, kind) [code] = #NAME,
#include "opcodes.def"
#undef GC_BINARY
};
const char *const gc_reduce_names[GC_REDUCE_COUNT] = {
#define GC_REDUCE(NAME, name, code) [code] = #NAME,
#include "opcodes.def"
#undef GC_REDUCE
};

/* The fused-program encoding fits together (fused.comp decodes what fusion.py encodes). */
enum {
#define GC_FUSED(NAME, value) GC_FUSED_##NAME = value,
#include "opcodes.def"
#undef GC_FUSED
};
_Static_assert(GC_FUSED_SRC_NONE >= GC_FUSED_MAX_SLOTS && GC_FUSED_SRC_ACC >= GC_FUSED_MAX_SLOTS &&
                   GC_FUSED_SRC_NONE != GC_FUSED_SRC_ACC &&
                   GC_FUSED_SRC_ACC < (1 << (GC_FUSED_SRC_B_SHIFT - GC_FUSED_SRC_A_SHIFT)) &&
                   GC_FUSED_SRC_NONE < (1 << (GC_FUSED_OUT_SHIFT - GC_FUSED_SRC_B_SHIFT)),
               "opcodes.def: SRC_NONE / SRC_ACC must be distinct 4-bit non-slot values");
_Static_assert((int)GC_UNARY_COUNT <= GC_FUSED_COPY && GC_FUSED_COPY < GC_FUSED_BACKWARD &&
                   GC_FUSED_BACKWARD + (int)GC_UNARY_COUNT <= GC_FUSED_BINARY &&
                   GC_FUSED_BINARY + (int)GC_BINARY_COUNT <= (1 << GC_FUSED_SRC_A_SHIFT),
               "opcodes.def: the fused op ranges (unary, COPY, BACKWARD + c, BINARY + c) must be "
               "disjoint and fit the op field");
_Static_assert((GC_FUSED_MAX_SLOTS & (GC_FUSED_MAX_SLOTS - 1)) == 0 &&
                   GC_FUSED_MAX_SLOTS <= GC_FUSED_COUNT_SHIFT,
               "opcodes.def: MAX_SLOTS must be a power of two (MAX_SLOTS - 1 masks the output "
               "slot) and leave the op count's bits free in the meta word");

/* ------------------------------------------------------------------------------------------ */
/* OPCODES                                                                                     */

/* d[key] = value; -1 with an exception set. */
static int set_int(PyObject *d, const char *key, long value)
{
    PyObject *v = PyLong_FromLong(value);
    const int rc = v ? PyDict_SetItemString(d, key, v) : -1;
    Py_XDECREF(v);
    return rc;
}

/* A new dict all[key]; NULL with an exception set. */
static PyObject *sub_table(PyObject *all, const char *key)
{
    PyObject *d = PyDict_New();
    if (d && PyDict_SetItemString(all, key, d) < 0)
        Py_CLEAR(d);
    Py_XDECREF(d); /* all holds it */
    return d;
}

/* The structured table of cpu/README.md ("OPCODES"): op tables keyed by the ops' Python names,
 * constant tables keyed by the constants' names. */
static PyObject *opcodes_table(void)
{
    PyObject *all = PyDict_New(), *d;
    if (!all)
        return NULL;
#define TABLE(key)                                                                                \
    if (!(d = sub_table(all, key)))                                                               \
        goto fail;
#define ADD(name, code)                                                                           \
    if (set_int(d, name, code) < 0)                                                               \
        goto fail;
#define ADD_IF(cond, name, code)                                                                  \
    if ((cond) && set_int(d, name, code) < 0)                                                     \
        goto fail;

    TABLE("unary")
#define GC_UNARY(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_UNARY

    TABLE("binary")
#define GC_BINARY(NAME, name, code, kind) ADD(#name, code)
#include "opcodes.def"
#undef GC_BINARY

    TABLE("reduce")
#define GC_REDUCE(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_REDUCE

    TABLE("special")
#define GC_SPECIAL(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_SPECIAL

    TABLE("special2")
#define GC_SPECIAL2(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_SPECIAL2

    TABLE("act")
#define GC_ACT(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_ACT

    TABLE("strided") /* binary.comp's OP: every binary code and the strided-only ones */
#define GC_BINARY(NAME, name, code, kind) ADD(#name, code)
#define GC_STRIDED(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_BINARY
#undef GC_STRIDED

    TABLE("type")
#define GC_TYPE(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_TYPE

    TABLE("fused")
#define GC_FUSED(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_FUSED

    TABLE("fused_binary") /* the binary ops of a fused program: BINARY + code */
#define GC_BINARY(NAME, name, code, kind) ADD_IF(!GC_BINARY_KIND_##kind, #name, code)
#include "opcodes.def"
#undef GC_BINARY

    /* The shader-private constants, keyed by the shader's constant name. */
    TABLE("reduce_op")
#define GC_REDUCE_OP(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_REDUCE_OP

    TABLE("reduce_flag")
#define GC_REDUCE_FLAG(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_REDUCE_FLAG

    TABLE("softmax_op")
#define GC_SOFTMAX_OP(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_SOFTMAX_OP

    TABLE("softmax_mode")
#define GC_SOFTMAX_MODE(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_SOFTMAX_MODE

    TABLE("optim_variant")
#define GC_OPTIM_VARIANT(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_OPTIM_VARIANT

    TABLE("optim_flag")
#define GC_OPTIM_FLAG(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_OPTIM_FLAG

    TABLE("pool_mode")
#define GC_POOL_MODE(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_POOL_MODE

    TABLE("im2col_mode")
#define GC_IM2COL_MODE(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_IM2COL_MODE

    TABLE("random_mode")
#define GC_RANDOM_MODE(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_RANDOM_MODE

    TABLE("gemm_flags")
#define GC_GEMM_FLAGS(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_GEMM_FLAGS

    TABLE("gemm_variant")
#define GC_GEMM_VARIANT(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_GEMM_VARIANT

    TABLE("gemm_a_mode")
#define GC_GEMM_A_MODE(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_GEMM_A_MODE

    TABLE("gemm_b_mode")
#define GC_GEMM_B_MODE(NAME, value) ADD(#NAME, value)
#include "opcodes.def"
#undef GC_GEMM_B_MODE

    TABLE("node_kind")
#define GC_NODE_KIND(NAME, name, code) ADD(#name, code)
#include "opcodes.def"
#undef GC_NODE_KIND

    TABLE("node_arg")
#define GC_NODE_ARG(NAME, code) ADD(#NAME, code)
#include "opcodes.def"
#undef GC_NODE_ARG

#undef TABLE
#undef ADD
#undef ADD_IF
    return all;
fail:
    Py_DECREF(all);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Module                                                                                      */

#define GC_METHOD(name)                                                                           \
    {#name, (PyCFunction)(void (*)(void))gc_py_##name, METH_FASTCALL, gc_##name##_doc},

static PyMethodDef cpu_methods[] = {GC_FUNCTIONS(GC_METHOD){NULL, NULL, 0, NULL}};

static struct PyModuleDef cpu_module = {
    PyModuleDef_HEAD_INIT,
    "gpucore._cpu",
    "C11 kernels over host buffers for gpucore (see cpu/README.md).  Kernels write into the "
    "output buffers they are given and release the GIL while they run.",
    -1,
    cpu_methods,
    NULL,
    NULL,
    NULL,
    NULL};

/* PREFIX<NAME> = code for every op of a family. */
static int add_names(PyObject *m, const char *prefix, const char *const *names, int count)
{
    char full[64];
    for (int i = 0; i < count; i++) {
        PyOS_snprintf(full, sizeof full, "%s%s", prefix, names[i]);
        if (PyModule_AddIntConstant(m, full, i) < 0)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__cpu(void)
{
    char err[512];
    if (gc_cpu_init(getenv("GPUCORE_CPU_ISA"), err, sizeof err) < 0) {
        PyErr_SetString(PyExc_ImportError, err);
        return NULL;
    }
    if (PyType_Ready(&gc_HostBufferType) < 0 || PyType_Ready(&gc_ProgramType) < 0 ||
        PyType_Ready(&gc_PackedMatrixType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&cpu_module);
    if (!m)
        return NULL;
    PyObject *opcodes = opcodes_table();
    if (!opcodes || PyModule_AddObjectRef(m, "OPCODES", opcodes) < 0 ||
        add_names(m, "UNARY_", gc_unary_names, GC_UNARY_COUNT) < 0 ||
        add_names(m, "BINARY_", gc_binary_names, GC_BINARY_COUNT) < 0 ||
        add_names(m, "REDUCE_", gc_reduce_names, GC_REDUCE_COUNT) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIMS", GC_MAX_DIMS) < 0 ||
        PyModule_AddIntConstant(m, "RNN_TANH", GC_RNN_TANH) < 0 ||
        PyModule_AddIntConstant(m, "RNN_RELU", GC_RNN_RELU) < 0 ||
        PyModule_AddIntConstant(m, "RNN_LSTM", GC_RNN_LSTM) < 0 ||
        PyModule_AddIntConstant(m, "RNN_GRU", GC_RNN_GRU) < 0 ||
        PyModule_AddObjectRef(m, "HostBuffer", (PyObject *)&gc_HostBufferType) < 0 ||
        PyModule_AddObjectRef(m, "Program", (PyObject *)&gc_ProgramType) < 0 ||
        PyModule_AddObjectRef(m, "PackedMatrix", (PyObject *)&gc_PackedMatrixType) < 0) {
        Py_XDECREF(opcodes);
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(opcodes);
    return m;
}
