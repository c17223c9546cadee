/* The functions of gpucore._cpu: one list, from which module.c builds the method table.
 *
 * GC_FUNCTIONS(X) calls X(name) once per Python function, grouped by the binding file that
 * defines it (cpu/python/<family>.c binds the kernels of cpu/<family>.c).  Each binding file
 * defines, for each of its names,
 *
 *     GC_DOC(name, "name(args, /)\n--\n\n" "What it does.");
 *     PyObject *gc_py_name(PyObject *self, PyObject *const *args, Py_ssize_t nargs) { ... }
 *
 * (METH_FASTCALL, positional arguments only).  Adding a function: its line here, its
 * definition in the family's file.
 */
#ifndef GPUCORE_PYTHON_BINDINGS_H
#define GPUCORE_PYTHON_BINDINGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "args.h" /* bufset */

#define GC_FUNCTIONS(X)                                                                           \
    /* memory.c, host_cache.c: host memory */                                                     \
    X(data_ptr) X(host_empty) X(host_cache_info) X(host_cache_clear)                              \
    /* fastpath.c, fastpath_nn.c, fastpath_view.c: the small-op fast lane */                      \
    X(fast_setup) X(set_fast_limit) X(fast_unary) X(fast_binary) X(fast_unary_backward)           \
    X(fast_accept) X(fast_matmul) X(fast_linear) X(fast_softmax) X(fast_softmax_backward)         \
    X(fast_norm_rows) X(fast_norm_rows_backward) X(fast_group_norm) X(fast_batch_norm)            \
    X(fast_relu_backward_bias)                                                                    \
    X(fast_view) X(fast_tensor) X(fast_reshape_copy)                                              \
    /* dispatch.c: ISA, caches, GEMM blocking, thread pool */                                     \
    X(info) X(set_num_threads) X(pool_awake)                                                      \
    /* gemm.c, pack.c */                                                                          \
    X(gemm) X(gemm_ex) X(gemm_pack)                                                               \
    /* gemm_bf16.c: the bfloat16 GEMM (AVX-512 BF16) */                                          \
    X(gemm_bf16) X(gemm_bf16_kernel) X(conv2d_bf16)                                                              \
    /* qgemm.c: the int8 GEMM, quantized inference (qconv.c) */                                   \
    X(qgemm_pack) X(qgemm) X(qconv2d) X(qconv2d_work_bytes) X(quantize_u8) X(dequantize_u8)       \
    X(max_pool2d_u8) X(quantize_linear_u8) X(dynamic_quantize_u8) X(qgemm_dynamic)                \
    X(dynamic_quantize_torch_u8)                                                                  \
    /* unary.c */                                                                                 \
    X(unary) X(unary_backward)                                                                    \
    /* binary.c */                                                                                \
    X(binary) X(where)                                                                            \
    /* reduce.c */                                                                                \
    X(reduce)                                                                                     \
    /* softmax.c */                                                                               \
    X(softmax) X(softmax_backward) X(cross_entropy_forward) X(cross_entropy_backward)             \
    /* copy.c, cast.c, gather.c */                                                                \
    X(copy) X(cast) X(gather) X(index_add_rows)                                                   \
    /* isin.c, igemm.c: membership, integer matrix products */                                    \
    X(isin) X(igemm)                                                                              \
    /* trsm.c: triangular solves, LU factorization; histogram.c */                               \
    X(trsm) X(getrf) X(histogram)                                                              \
    /* special.c: torch.special's functions (special2: those of two arguments) */                 \
    X(special) X(special2)                                                                        \
    /* norm.c, norm_batch.c, attention.c, attention_backward.c */                                 \
    X(layer_norm) X(norm_rows_forward) X(norm_rows_backward) X(batch_norm_forward)                \
    X(batch_norm_backward)                                                                        \
    X(attention) X(attention_forward) X(attention_backward)                                       \
    /* recurrent.c */                                                                             \
    X(rnn_forward) X(rnn_backward)                                                                \
    /* im2col.c, conv.c, maxpool.c */                                                             \
    X(im2col) X(col2im) X(conv2d_forward) X(conv2d_backward) X(conv2d_direct) X(max_pool2d)       \
    X(max_pool2d_backward) X(conv2d_winograd) X(conv2d_pointwise) X(conv2d_direct_lanes)         \
    X(conv2d_c1) X(conv2d_relu_max_pool2d)                                                        \
    /* avgpool.c */                                                                               \
    X(avg_pool2d) X(avg_pool2d_backward)                                                          \
    /* grid_sample.c, ctc.c */                                                                    \
    X(grid_sample) X(grid_sample_backward) X(ctc_loss) X(ctc_loss_backward)                       \
    /* philox.c */                                                                                \
    X(philox) X(uniform) X(normal) X(philox_block)                                                \
    /* optim.c */                                                                                 \
    X(sgd_step) X(adam_step) X(rmsprop_step) X(sgd_step_multi) X(adam_step_multi)                 \
    X(rmsprop_step_multi)

/* A docstring in PyDoc form ("sig\n--\n\n" then the text). */
#define GC_DOC(name, text) const char gc_##name##_doc[] = PyDoc_STR(text)

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

#define GC_DECLARE_FUNCTION(name)                                                                 \
    PyObject *gc_py_##name(PyObject *self, PyObject *const *args, Py_ssize_t nargs);              \
    extern const char gc_##name##_doc[];
GC_FUNCTIONS(GC_DECLARE_FUNCTION)
#undef GC_DECLARE_FUNCTION

/* host_cache.c: the type of host_empty's blocks, exported as HostBuffer */
extern PyTypeObject gc_HostBufferType;
/* host_cache.c's caching allocator for other owners of host memory (PackedMatrix): a block of at
 * least n bytes (64-byte aligned; *block: its real size, to pass back), NULL when out of memory;
 * both with the GIL held (it guards the free lists). */
void *gc_host_block_acquire(size_t n, size_t *block);
void gc_host_block_release(void *p, size_t block);

/* pack.c: gemm_pack's result, exported as PackedMatrix, and the arguments that take one:
 * gc_is_packed(obj) says whether obj is one; gc_packed_arg checks it against the call (side 0 /
 * 1 = 'a' / 'b' as the argument name says, op(X)'s rows x cols, trans, the call's float kind:
 * ValueError / TypeError naming the argument) and keeps a reference to it in bs (released with
 * the call's buffers; a Program's for its life).  NULL with an exception set on failure. */
extern PyTypeObject gc_PackedMatrixType;
int gc_is_packed(PyObject *obj);
const gc_packed *gc_packed_arg(bufset *bs, const char *fn, const char *name, PyObject *obj,
                               int side, Py_ssize_t rows, Py_ssize_t cols, int trans, char kind);

/* program.c: the compiled executor's program, exported as Program; its node kinds (the
 * bindings it can run, split into parse + exec) are listed in nodes.h */
extern PyTypeObject gc_ProgramType;

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUCORE_PYTHON_BINDINGS_H */
