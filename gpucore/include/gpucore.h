/* gpucore.h: the C API of gpucore (libgpucore), for C and any language with a C FFI.
 *
 * Build against the installed package:
 *     cc prog.c $(pkg-config --cflags --libs gpucore)
 * with PKG_CONFIG_PATH=$(python -m gpucore.capi --pkg-config-path), or by hand with
 * -I$(python -m gpucore.capi --include) -L$(python -m gpucore.capi --libdir) -lgpucore.
 * The library needs no Python at run time.
 *
 * Conventions
 * - Every name starts with gc_ (types, functions) or GC_ (macros, enum values).
 * - Every fallible call takes a gc_error* as its last argument; NULL is allowed (the caller then
 *   only sees the return value).  On entry the call sets err->code = GC_OK; on failure it returns
 *   NULL (handles, pointers) or a negative gc_status (ints), fills err->code with that status and
 *   err->message with a sentence naming the function and the problem.  No call aborts, prints or
 *   exits on bad input.
 * - Handles are opaque: gc_tensor*, gc_scope*, gc_model*.  Every create has its release
 *   (gc_tensor_free, gc_scope_end, gc_model_free).  A handle is checked on every call: NULL, a
 *   handle already released and a pointer gpucore never returned give GC_ERR_INVALID_ARGUMENT,
 *   not a crash (a released handle is known as such until its address is reused by a new
 *   handle).
 * - Every result of an op is a new handle, owned by the caller (or by the innermost open scope
 *   of the calling thread, see Scopes).  Views (reshape of a contiguous tensor, transpose,
 *   contiguous of a contiguous tensor) share memory with their source; freeing either is safe,
 *   the memory lives until its last handle is freed.
 * - Thread safety: every function may be called from any thread.  Handles may be shared between
 *   threads; writing a tensor's memory while another thread reads it is the caller's business.
 * - Autograd is not part of the C API: gradients, optimizers and training live in Python
 *   (gpucore).  The C API computes forward values only.
 * - Devices: CPU execution.  GC_DEVICE_VULKAN is reserved (calls with it give GC_ERR_DEVICE).
 *
 * ABI rules (as ONNX Runtime's versioned API table): within one major version (GC_API_VERSION /
 * 10000) enums and structs only grow at the end, values never change meaning, and functions are
 * never removed or changed in signature; new functions raise the minor version.  Compare
 * gc_api_version() at run time with the GC_API_VERSION you compiled against: the library works
 * for every program whose major version equals its own and whose minor is not newer.
 */
#ifndef GPUCORE_H
#define GPUCORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GC_API_VERSION_MAJOR 0
#define GC_API_VERSION_MINOR 1
#define GC_API_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch */
#define GC_API_VERSION                                                                          \
    (GC_API_VERSION_MAJOR * 10000 + GC_API_VERSION_MINOR * 100 + GC_API_VERSION_PATCH)

#if defined(_WIN32)
#define GC_API __declspec(dllimport)
#elif defined(__GNUC__)
#define GC_API __attribute__((visibility("default")))
#else
#define GC_API
#endif

/* ------------------------------------------------------------------------------------------ */
/* Errors and versions                                                                         */

/* Status codes: 0 success, negative on failure (grow at the end only). */
typedef enum {
    GC_OK = 0,
    GC_ERR_INVALID_ARGUMENT = -1, /* NULL or stale handle, bad value (dim, flag, mode) */
    GC_ERR_SHAPE = -2,            /* shapes that do not fit together, wrong buffer size */
    GC_ERR_DTYPE = -3,            /* unknown dtype, or one the op does not support */
    GC_ERR_OUT_OF_MEMORY = -4,
    GC_ERR_IO = -5,     /* a file that cannot be read */
    GC_ERR_FORMAT = -6, /* a file that is not what it claims to be */
    GC_ERR_DEVICE = -7, /* a device (or instruction set) that is not available */
    GC_ERR_INTERNAL = -8
} gc_status;

#define GC_ERROR_MESSAGE_SIZE 256
typedef struct {
    int code; /* a gc_status */
    char message[GC_ERROR_MESSAGE_SIZE];
} gc_error;

/* Nonzero when err is not NULL and holds a failure. */
GC_API int gc_error_occurred(const gc_error *err);
/* Resets err (NULL allowed) to GC_OK and an empty message. */
GC_API void gc_error_clear(gc_error *err);
/* "GC_OK", "GC_ERR_SHAPE", ...; "GC_ERR_UNKNOWN" for other values. */
GC_API const char *gc_status_name(int code);

/* The library's version string ("0.1.0") and its GC_API_VERSION. */
GC_API const char *gc_version(void);
GC_API int gc_api_version(void);

/* The CPU instruction set the kernels use ("avx512", "avx2", "sse2", "neon", "scalar"; chosen at
 * the first op, GPUCORE_CPU_ISA forces one) and the thread pool (GPUCORE_NUM_THREADS). */
GC_API const char *gc_cpu_isa(gc_error *err);
GC_API int gc_get_num_threads(void);
GC_API int gc_set_num_threads(int n, gc_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Types                                                                                       */

/* Element types, in the order of gpucore.dtypes.ALL (the same names). */
typedef enum {
    GC_DTYPE_BOOL = 0, /* one byte, 0 or 1 */
    GC_DTYPE_UINT8 = 1,
    GC_DTYPE_INT8 = 2,
    GC_DTYPE_INT32 = 3,
    GC_DTYPE_INT64 = 4,
    GC_DTYPE_FLOAT16 = 5,
    GC_DTYPE_BFLOAT16 = 6, /* stored as uint16 bit patterns */
    GC_DTYPE_FLOAT32 = 7,
    GC_DTYPE_FLOAT64 = 8,
    GC_DTYPE_INT16 = 9,
    GC_DTYPE_UINT16 = 10,
    GC_DTYPE_UINT32 = 11,
    GC_DTYPE_UINT64 = 12
} gc_dtype;

/* Devices, as gpucore.device's types. */
typedef enum { GC_DEVICE_CPU = 0, GC_DEVICE_VULKAN = 1 } gc_device;

/* "float32", ...; NULL for an unknown dtype.  Item size in bytes, or -1. */
GC_API const char *gc_dtype_name(int dtype);
GC_API int gc_dtype_size(int dtype);

#define GC_MAX_NDIM 8

typedef struct gc_tensor gc_tensor;
typedef struct gc_scope gc_scope;

/* ------------------------------------------------------------------------------------------ */
/* Tensors                                                                                     */

/* New contiguous tensors of shape[0..ndim) (0 <= ndim <= GC_MAX_NDIM, sizes >= 0; shape may be
 * NULL when ndim == 0).  empty leaves the memory uninitialised; full converts value to dtype (as
 * a C cast; bool: value != 0).  randn: standard normal float32 / float64 from the Philox stream
 * of seed (the same numbers for the same seed on every machine and thread count). */
GC_API gc_tensor *gc_tensor_empty(const int64_t *shape, int ndim, int dtype, int device,
                                  gc_error *err);
GC_API gc_tensor *gc_tensor_zeros(const int64_t *shape, int ndim, int dtype, int device,
                                  gc_error *err);
GC_API gc_tensor *gc_tensor_ones(const int64_t *shape, int ndim, int dtype, int device,
                                 gc_error *err);
GC_API gc_tensor *gc_tensor_full(const int64_t *shape, int ndim, double value, int dtype,
                                 int device, gc_error *err);
GC_API gc_tensor *gc_tensor_randn(const int64_t *shape, int ndim, int dtype, int device,
                                  uint64_t seed, gc_error *err);

/* Called with (data, ctx) when the last handle of a zero-copy tensor is released. */
typedef void (*gc_deleter)(void *data, void *ctx);

typedef enum {
    GC_BUFFER_COPY = 0,     /* the tensor gets its own copy of the bytes */
    GC_BUFFER_ZERO_COPY = 1 /* the tensor uses data in place; deleter (may be NULL) runs when
                               the last handle sharing it is freed; data must stay valid and
                               aligned to the item size until then */
} gc_buffer_mode;

/* A contiguous tensor over nbytes bytes at data, which must equal numel * item size
 * (GC_ERR_SHAPE otherwise).  On failure the deleter is not called: data stays the caller's. */
GC_API gc_tensor *gc_tensor_from_buffer(void *data, size_t nbytes, const int64_t *shape, int ndim,
                                        int dtype, int mode, gc_deleter deleter, void *ctx,
                                        gc_error *err);
/* The address of element [0, ..., 0]; with gc_tensor_strides it addresses every element
 * (contiguous tensors: C order).  Writable. */
GC_API void *gc_tensor_data_ptr(const gc_tensor *t, gc_error *err);
/* Copies the elements in C order into dst, which holds exactly nbytes = numel * item size
 * (GC_ERR_SHAPE otherwise; nothing written).  Returns 0. */
GC_API int gc_tensor_copy_to_buffer(const gc_tensor *t, void *dst, size_t nbytes, gc_error *err);

GC_API int gc_tensor_ndim(const gc_tensor *t, gc_error *err);
/* Writes min(ndim, cap) sizes (strides: in elements) to out; returns ndim. */
GC_API int gc_tensor_shape(const gc_tensor *t, int64_t *out, int cap, gc_error *err);
GC_API int gc_tensor_strides(const gc_tensor *t, int64_t *out, int cap, gc_error *err);
GC_API int64_t gc_tensor_numel(const gc_tensor *t, gc_error *err);
GC_API int gc_tensor_dtype(const gc_tensor *t, gc_error *err);  /* a gc_dtype */
GC_API int gc_tensor_device(const gc_tensor *t, gc_error *err); /* a gc_device */
GC_API int gc_tensor_is_contiguous(const gc_tensor *t, gc_error *err); /* 1 or 0 */

/* A contiguous copy. */
GC_API gc_tensor *gc_tensor_clone(const gc_tensor *t, gc_error *err);
/* A contiguous tensor of t's elements: a view when t is contiguous, else a copy. */
GC_API gc_tensor *gc_tensor_contiguous(const gc_tensor *t, gc_error *err);
/* t's elements in C order under a new shape (one size may be -1: inferred): a view when t is
 * contiguous, else a copy. */
GC_API gc_tensor *gc_tensor_reshape(const gc_tensor *t, const int64_t *shape, int ndim,
                                    gc_error *err);
/* A view with dims d0 and d1 swapped (negative dims count from the end). */
GC_API gc_tensor *gc_tensor_transpose(const gc_tensor *t, int d0, int d1, gc_error *err);

/* Releases the handle (NULL: nothing, returns 0).  A handle released twice gives
 * GC_ERR_INVALID_ARGUMENT.  A tensor owned by a scope may be freed early. */
GC_API int gc_tensor_free(gc_tensor *t, gc_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Ops: float32 and float64 (both operands of one dtype; GC_ERR_DTYPE otherwise); inputs of any
 * strides; results are new contiguous tensors.                                                 */

/* Elementwise with numpy broadcasting; comparisons give GC_DTYPE_BOOL. */
GC_API gc_tensor *gc_add(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_sub(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_mul(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_div(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_pow(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_maximum(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_minimum(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_eq(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_ne(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_lt(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_le(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_gt(const gc_tensor *a, const gc_tensor *b, gc_error *err);
GC_API gc_tensor *gc_ge(const gc_tensor *a, const gc_tensor *b, gc_error *err);

/* Elementwise functions (gelu: the erf form). */
GC_API gc_tensor *gc_relu(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_sigmoid(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_tanh(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_gelu(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_exp(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_log(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_sqrt(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_neg(const gc_tensor *x, gc_error *err);
GC_API gc_tensor *gc_abs(const gc_tensor *x, gc_error *err);

/* torch.matmul: 1-d and n-d operands, batch dims broadcast. */
GC_API gc_tensor *gc_matmul(const gc_tensor *a, const gc_tensor *b, gc_error *err);

/* Sum / mean over dims[0..ndims) (negative dims count from the end; each at most once;
 * dims NULL or ndims 0: every dim); keepdim 1 keeps them as size 1. */
GC_API gc_tensor *gc_sum(const gc_tensor *x, const int *dims, int ndims, int keepdim,
                         gc_error *err);
GC_API gc_tensor *gc_mean(const gc_tensor *x, const int *dims, int ndims, int keepdim,
                          gc_error *err);

/* Softmax / log-softmax along dim. */
GC_API gc_tensor *gc_softmax(const gc_tensor *x, int dim, gc_error *err);
GC_API gc_tensor *gc_log_softmax(const gc_tensor *x, int dim, gc_error *err);

/* torch.nn.functional.conv2d with groups 1: x [N, C, H, W], w [O, C, KH, KW], bias NULL or [O];
 * stride, padding, dilation: 2 values each (NULL: 1, 0, 1). */
GC_API gc_tensor *gc_conv2d(const gc_tensor *x, const gc_tensor *w, const gc_tensor *bias,
                            const int64_t *stride, const int64_t *padding,
                            const int64_t *dilation, gc_error *err);
/* max_pool2d / avg_pool2d over x [N, C, H, W] (floor mode; avg counts the padding, as PyTorch's
 * default count_include_pad); kernel: 2 values; stride NULL: the kernel; padding NULL: 0
 * (at most half the kernel); dilation NULL: 1. */
GC_API gc_tensor *gc_max_pool2d(const gc_tensor *x, const int64_t *kernel, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, gc_error *err);
GC_API gc_tensor *gc_avg_pool2d(const gc_tensor *x, const int64_t *kernel, const int64_t *stride,
                                const int64_t *padding, gc_error *err);
/* layer_norm over the last normalized_ndim dims of x; weight, bias NULL or of those dims'
 * shape; eps >= 0. */
GC_API gc_tensor *gc_layer_norm(const gc_tensor *x, int normalized_ndim, const gc_tensor *weight,
                                const gc_tensor *bias, double eps, gc_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Deployed models                                                                             */

/* A model saved by the Python runtime (gpucore.runtime.compile(...).save(path)), run on the CPU
 * without Python: the file's compiled program (the same kernel calls, in the same order, as the
 * runtime's compiled executor, so the same results) over one memory arena per concurrent run.
 * Models with dynamic sizes run at the sizes they were compiled with; a model with a step that
 * runs in Python, or saved by a gpucore without the C section, gives GC_ERR_FORMAT. */
typedef struct gc_model gc_model;

/* Options of gc_model_load (NULL: the defaults).  Set size = sizeof(gc_model_options): the
 * struct only grows at the end, and the library reads only the fields the caller knows. */
typedef struct {
    size_t size;
    int num_threads; /* > 0: the library's thread pool size (process-wide); 0: unchanged */
} gc_model_options;

/* Reads and checks the whole file (the SHA-256 of every tensor it uses when the file carries
 * them, every node's buffers against the arena and the weights): GC_ERR_IO when it cannot be
 * read, GC_ERR_FORMAT for anything malformed, corrupt or hostile. */
GC_API gc_model *gc_model_load(const char *path, const gc_model_options *options, gc_error *err);
/* Releases the model (NULL: nothing).  No run of it may be in flight. */
GC_API int gc_model_free(gc_model *model, gc_error *err);

GC_API int gc_model_num_inputs(const gc_model *model, gc_error *err);
GC_API int gc_model_num_outputs(const gc_model *model, gc_error *err);
/* The i-th input's / output's name (valid while the model lives), dtype, and shape (writes
 * min(ndim, cap) sizes, returns ndim). */
GC_API const char *gc_model_input_name(const gc_model *model, int i, gc_error *err);
GC_API const char *gc_model_output_name(const gc_model *model, int i, gc_error *err);
GC_API int gc_model_input_dtype(const gc_model *model, int i, gc_error *err);
GC_API int gc_model_output_dtype(const gc_model *model, int i, gc_error *err);
GC_API int gc_model_input_shape(const gc_model *model, int i, int64_t *out, int cap,
                                gc_error *err);
GC_API int gc_model_output_shape(const gc_model *model, int i, int64_t *out, int cap,
                                 gc_error *err);

/* Runs the model: inputs[0..n_inputs) of the inputs' dtypes and shapes (any strides); on success
 * outputs[0..n_outputs) receive new tensors (owned by the caller, or the thread's scope).  Safe
 * to call from many threads at once on one model (each concurrent run gets its own arena). */
GC_API int gc_model_run(gc_model *model, const gc_tensor *const *inputs, int n_inputs,
                        gc_tensor **outputs, int n_outputs, gc_error *err);
/* The same over raw buffers (C order; sizes in bytes must be exact), allocating nothing once
 * the model has an idle arena: the lowest-overhead call. */
GC_API int gc_model_run_buffers(gc_model *model, const void *const *inputs,
                                const size_t *input_bytes, int n_inputs, void *const *outputs,
                                const size_t *output_bytes, int n_outputs, gc_error *err);

/* Run statistics since load or the last reset: runs completed and their latency (microseconds,
 * each run's whole call); p50 / p99 over the last 4096 runs.  Set out->size = sizeof *out. */
typedef struct {
    size_t size;
    int64_t count;
    double mean_us, p50_us, p99_us, min_us, max_us;
} gc_model_stats_t;
GC_API int gc_model_stats(const gc_model *model, gc_model_stats_t *out, gc_error *err);
GC_API int gc_model_reset_stats(gc_model *model, gc_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Scopes (per thread)                                                                         */

/* Opens a scope on the calling thread's stack (NULL only when out of memory).  Until it ends,
 * every tensor this thread creates (creations, views, op results) belongs to it. */
GC_API gc_scope *gc_scope_begin(void);
/* Frees every tensor the scope still owns and closes it.  The scope must be the innermost open
 * one of the calling thread (GC_ERR_INVALID_ARGUMENT otherwise, nothing freed); ending a scope
 * twice gives GC_ERR_INVALID_ARGUMENT. */
GC_API int gc_scope_end(gc_scope *scope, gc_error *err);
/* Takes t out of scope (its owner): t then belongs to the enclosing scope of the same thread, or
 * to the caller when there is none.  Returns t; NULL when t is not owned by scope. */
GC_API gc_tensor *gc_scope_escape(gc_scope *scope, gc_tensor *t, gc_error *err);
/* The number of scopes open on the calling thread. */
GC_API int gc_scope_depth(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUCORE_H */
