/* Node kinds: the eager bindings that a compiled Program (program.c) can run, split in two.
 *
 * Each kind is one eager binding of gpucore._cpu cut into
 *
 *   parse(args, nargs, node, bs): every check of the binding, in its order and with its
 *       exceptions and messages; acquires the buffers into bs (the caller releases them, on
 *       success too) and resolves pointers and parameters into node, a small per-kind struct
 *       that holds no Python object (raw data pointers, sizes, op codes);
 *   exec(node): runs the kernel from the struct alone (no Python: called with the GIL released);
 *       0, or -1 when the kernel failed (a malloc, or a data-dependent check such as
 *       max_pool2d_backward's indices);
 *   fail(fn, node, rc): optional; sets the exception for exec's rc < 0 (NULL: MemoryError).
 *
 * The eager binding is gc_node_call(kind, args, nargs): parse into a stack struct, exec with the
 * GIL released, release the buffers.  A Program parses every node once at construction, keeps
 * its buffers acquired (so the memory stays alive) and only runs exec, so a node runs exactly
 * the kernel call of the eager binding with the same arguments: results are bitwise identical.
 *
 * Adding a node kind (say `layer_norm`, whose binding lives in cpu/python/norm.c):
 *   1. in norm.c, write the struct, parse and exec (and the binding as gc_node_call):
 *          typedef struct { ... } layer_norm_node;
 *          static int layer_norm_parse(PyObject *const *args, Py_ssize_t nargs, void *node,
 *                                      bufset *bs) { ... }
 *          static int layer_norm_exec(const void *node) { ... }
 *          GC_NODE_KIND(layer_norm, layer_norm_parse, layer_norm_exec, layer_norm_node, NULL);
 *          GC_NODE_BINDING(layer_norm)    (defines gc_py_layer_norm)
 *      or, listing its data pointer fields so that a Program's kernels may read / write the
 *      caller's run buffers in place (the compiled executor's direct_io), the fields exec
 *      writes through as GC_NODE_OUT, the ones it only reads as GC_NODE_PTR:
 *          GC_NODE_KIND_IO(layer_norm, ..., NULL, GC_NODE_PTR(layer_norm_node, x), ...,
 *                          GC_NODE_OUT(layer_norm_node, out));
 *   2. its line here: X(layer_norm) in GC_NODES;
 *   3. its case in tests/backends/cpu/test_program.py (case_layer_norm: a program of it equals
 *      the eager calls bitwise; a test fails while a kind has no case) and its name in
 *      cpu/README.md's Programs table.
 * Program(("layer_norm", args), ...) then accepts it.  A binding whose checks read the data
 * (cross_entropy's targets) must move them into exec (a Program's buffers change between runs);
 * random streams (philox, ...) and the optimizer steps are not node kinds.
 */
#ifndef GPUCORE_PYTHON_NODES_H
#define GPUCORE_PYTHON_NODES_H

#include "args.h"

#include <stddef.h>

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Every node kind, by the eager binding's name (= the Python function and the node's name). */
#define GC_NODES(X)                                                                               \
    /* gemm.c */ X(gemm) X(gemm_ex)                                                               \
    /* unary.c */ X(unary) X(unary_backward)                                                      \
    /* binary.c */ X(binary) X(where)                                                             \
    /* reduce.c */ X(reduce)                                                                      \
    /* softmax.c */ X(softmax) X(softmax_backward)                                                \
    /* copy.c, cast.c, gather.c */ X(copy) X(cast) X(gather)                                      \
    /* im2col.c, conv.c, maxpool.c */ X(im2col) X(col2im) X(conv2d_forward)                      \
    X(conv2d_backward) X(max_pool2d) X(max_pool2d_backward)                                       \
    /* norm.c, attention.c */ X(layer_norm) X(attention)                                         \
    /* qgemm.c (int8) */ X(qgemm) X(qconv2d) X(quantize_u8) X(dequantize_u8) X(max_pool2d_u8)                    \
    X(quantize_linear_u8) X(dynamic_quantize_u8) X(qgemm_dynamic) X(dynamic_quantize_torch_u8)

typedef int (*gc_node_parse_fn)(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs);
typedef int (*gc_node_exec_fn)(const void *node);
typedef void (*gc_node_fail_fn)(const char *fn, const void *node, int rc);

/* One data pointer field of a kind's struct (GC_NODE_PTR / GC_NODE_OUT). */
typedef struct {
    size_t off;       /* its byte offset in the struct */
    const char *name; /* the field's name, for messages */
    int written;      /* exec writes through it (an output, or a buffer updated in place) */
} gc_node_ptr;

typedef struct {
    const char *name;
    gc_node_parse_fn parse;
    gc_node_exec_fn exec;
    gc_node_fail_fn fail; /* NULL: exec's rc < 0 means MemoryError */
    size_t size;          /* of the struct parse fills */
    /* The struct's data pointer fields (GC_NODE_KIND_IO): every pointer parse resolves from a
     * buffer argument, each a plain `T *` word.  A Program may repoint these, and only these,
     * at a caller's run buffer (program.c, relocate), and an input's only at fields exec does
     * not write (a run never writes a caller's input); NULL / 0 for a kind that declares none
     * (its nodes always go through the io nodes' copies). */
    const gc_node_ptr *ptrs;
    size_t nptrs;
} gc_node_kind;

/* The largest node struct (the eager call keeps one on its stack). */
#define GC_NODE_MAX 512

/* Defines the kind gc_node_<name> in the family's file. */
#define GC_NODE_KIND(nm, parse, exec, type, fail)                                                 \
    _Static_assert(sizeof(type) <= GC_NODE_MAX, #type " exceeds GC_NODE_MAX (nodes.h)");          \
    const gc_node_kind gc_node_##nm = {#nm, parse, exec, fail, sizeof(type), NULL, 0}

/* The same for a kind whose data pointer fields are listed (GC_NODE_PTR(type, field) for one
 * exec only reads, GC_NODE_OUT(type, field) for one it writes through, ...): it must list every
 * field that parse sets from a buffer argument and mark every written one (tests/backends/cpu/
 * test_program_io.py runs each such kind's case with its whole arena repointed, and refuses it
 * as an input's readers), and exec may depend on nothing derived from those pointers elsewhere
 * in the struct (no saved difference or alignment test).  Pointers move together only within
 * one io buffer: parse's comparisons between two pointers into one buffer stay true when it is
 * repointed; between two buffers they need not, which is why a Program refuses a kernel node
 * with fields in two overlapping io buffers (program.c, io_disjoint). */
#define GC_NODE_KIND_IO(nm, parse, exec, type, fail, ...)                                         \
    _Static_assert(sizeof(type) <= GC_NODE_MAX, #type " exceeds GC_NODE_MAX (nodes.h)");          \
    static const gc_node_ptr gc_node_ptrs_##nm[] = {__VA_ARGS__};                                 \
    const gc_node_kind gc_node_##nm = {#nm,                                                       \
                                       parse,                                                     \
                                       exec,                                                      \
                                       fail,                                                      \
                                       sizeof(type),                                              \
                                       gc_node_ptrs_##nm,                                         \
                                       sizeof gc_node_ptrs_##nm / sizeof(gc_node_ptr)}

/* Offset of type's pointer field (a compile error when the field is not a pointer, which `*`
 * needs, or not pointer-sized). */
#define GC_NODE_PTR_OFF(type, field)                                                              \
    (offsetof(type, field) + 0 * sizeof(&*((type *)0)->field) +                                   \
     0 * sizeof(char[sizeof(((type *)0)->field) == sizeof(void *) ? 1 : -1]))

/* A pointer field that exec only reads through. */
#define GC_NODE_PTR(type, field) {GC_NODE_PTR_OFF(type, field), #field, 0}

/* A pointer field that exec writes through (an output, or a buffer updated in place). */
#define GC_NODE_OUT(type, field) {GC_NODE_PTR_OFF(type, field), #field, 1}

/* Defines the eager binding gc_py_<name> as parse + exec + release. */
#define GC_NODE_BINDING(nm)                                                                       \
    PyObject *gc_py_##nm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)                 \
    {                                                                                             \
        (void)self;                                                                               \
        return gc_node_call(&gc_node_##nm, args, nargs);                                          \
    }

#define GC_DECLARE_NODE(nm) extern const gc_node_kind gc_node_##nm;
GC_NODES(GC_DECLARE_NODE)
#undef GC_DECLARE_NODE

/* program.c: the eager call (None, or NULL with the exception set) and exec's failure. */
PyObject *gc_node_call(const gc_node_kind *k, PyObject *const *args, Py_ssize_t nargs);
void gc_node_fail(const gc_node_kind *k, const void *node, int rc);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUCORE_PYTHON_NODES_H */
