/* Error paths of gpucore.h: every bad call returns NULL / a negative code, sets the right status
 * and a message naming the function, and never crashes, aborts or prints.  Prints "ok <n>" (the
 * number of checks) or "FAIL <line>: ..." lines and exits 1. */
#include <gpucore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

static void expect_err(int line, int failed, const gc_error *e, int code, const char *needle)
{
    checks++;
    if (!failed || e->code != code || !strstr(e->message, needle) || !gc_error_occurred(e)) {
        failures++;
        printf("FAIL %d: failed=%d code=%s (want %s) message='%s' (want '%s')\n", line, failed,
               gc_status_name(e->code), gc_status_name(code), e->message, needle);
    }
}

static void expect_ok(int line, int ok, const gc_error *e)
{
    checks++;
    if (!ok || gc_error_occurred(e)) {
        failures++;
        printf("FAIL %d: unexpected error %s '%s'\n", line, gc_status_name(e->code), e->message);
    }
}

/* a call returning a handle / pointer (NULL on failure) or an int (negative on failure) */
#define BADP(call, want, needle) expect_err(__LINE__, (call) == NULL, &err, want, needle)
#define BADI(call, want, needle)                                                                \
    do {                                                                                        \
        int rc_ = (int)(call);                                                                  \
        expect_err(__LINE__, rc_ < 0 && rc_ == err.code, &err, want, needle);                   \
    } while (0)
#define OK(cond) expect_ok(__LINE__, (cond), &err)
#define TRUE(cond) expect_ok(__LINE__, (cond), &clean) /* no err involved */

static int deleted;
static void deleter(void *data, void *ctx)
{
    (void)data;
    deleted += *(int *)ctx;
}

int main(void)
{
    gc_error err, clean = {0, ""};
    memset(&err, 0x5a, sizeof err); /* garbage in: every fallible call resets it */
    const int F = GC_DTYPE_FLOAT32, CPU = GC_DEVICE_CPU, EINV = GC_ERR_INVALID_ARGUMENT;
    const int64_t s23[] = {2, 3}, s32[] = {3, 2}, s4[] = {4}, s2[] = {2}, neg[] = {2, -1};
    const int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};

    /* versions and names */
    checks++;
    if (gc_api_version() != GC_API_VERSION || strcmp(gc_version(), "0.1.0") < 0) {
        failures++;
        printf("FAIL version %d %s\n", gc_api_version(), gc_version());
    }
    TRUE(gc_dtype_name(99) == NULL && gc_dtype_size(-1) == -1 && gc_dtype_size(F) == 4);
    TRUE(!strcmp(gc_status_name(GC_ERR_SHAPE), "GC_ERR_SHAPE") &&
         !strcmp(gc_status_name(-99), "GC_ERR_UNKNOWN"));
    TRUE(!gc_error_occurred(NULL));
    gc_error_clear(NULL);

    /* creation */
    BADP(gc_tensor_zeros(s23, 2, 42, CPU, &err), GC_ERR_DTYPE, "unknown dtype 42");
    BADP(gc_tensor_zeros(s23, 2, -1, CPU, &err), GC_ERR_DTYPE, "gc_tensor_zeros");
    BADP(gc_tensor_ones(neg, 2, F, CPU, &err), GC_ERR_SHAPE, "negative");
    BADP(gc_tensor_empty(s9, 9, F, CPU, &err), GC_ERR_SHAPE, "ndim = 9");
    BADP(gc_tensor_empty(s23, -1, F, CPU, &err), GC_ERR_SHAPE, "ndim = -1");
    BADP(gc_tensor_full(NULL, 2, 1.0, F, CPU, &err), EINV, "shape is NULL");
    BADP(gc_tensor_zeros(s23, 2, F, GC_DEVICE_VULKAN, &err), GC_ERR_DEVICE, "GC_DEVICE_VULKAN");
    BADP(gc_tensor_zeros(s23, 2, F, 7, &err), GC_ERR_DEVICE, "unknown device 7");
    const int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
    BADP(gc_tensor_empty(huge, 2, F, CPU, &err), GC_ERR_SHAPE, "too many elements");
    const int64_t big[] = {(int64_t)1 << 28, (int64_t)1 << 28}; /* 2^58 bytes: no memory */
    BADP(gc_tensor_empty(big, 2, GC_DTYPE_UINT8, CPU, &err), GC_ERR_OUT_OF_MEMORY, "out of memory");
    BADP(gc_tensor_randn(s23, 2, GC_DTYPE_INT32, CPU, 1, &err), GC_ERR_DTYPE, "float32 or float64");
    gc_tensor *z = gc_tensor_zeros(NULL, 0, F, CPU, NULL); /* NULL err is allowed */
    OK(z != NULL && gc_tensor_ndim(z, &err) == 0 && gc_tensor_numel(z, &err) == 1);

    /* buffers */
    float buf[6] = {0};
    int one = 1;
    BADP(gc_tensor_from_buffer(buf, 20, s23, 2, F, GC_BUFFER_COPY, NULL, NULL, &err), GC_ERR_SHAPE,
         "holds 20 bytes");
    BADP(gc_tensor_from_buffer(NULL, 24, s23, 2, F, GC_BUFFER_COPY, NULL, NULL, &err), EINV,
         "data is NULL");
    BADP(gc_tensor_from_buffer(buf, 24, s23, 2, F, 5, NULL, NULL, &err), EINV, "mode 5");
    BADP(gc_tensor_from_buffer(buf, 24, s23, 2, 13, GC_BUFFER_COPY, NULL, NULL, &err),
         GC_ERR_DTYPE, "unknown dtype");
    BADP(gc_tensor_from_buffer((char *)buf + 1, 24, s23, 2, F, GC_BUFFER_ZERO_COPY, deleter, &one,
                               &err),
         EINV, "aligned");
    TRUE(deleted == 0); /* failures never call the deleter */
    gc_tensor *t = gc_tensor_from_buffer(buf, 24, s23, 2, F, GC_BUFFER_ZERO_COPY, deleter, &one,
                                         &err);
    OK(t != NULL && gc_tensor_data_ptr(t, &err) == (void *)buf);
    float dst[6];
    BADI(gc_tensor_copy_to_buffer(t, dst, 23, &err), GC_ERR_SHAPE, "dst holds 23 bytes");
    BADI(gc_tensor_copy_to_buffer(t, NULL, 24, &err), EINV, "dst is NULL");
    BADI(gc_tensor_copy_to_buffer(NULL, dst, 24, &err), EINV, "t is NULL");
    int64_t shp[8];
    BADI(gc_tensor_shape(t, NULL, 2, &err), EINV, "out is NULL");
    OK(gc_tensor_shape(t, shp, 1, &err) == 2 && shp[0] == 2); /* cap smaller than ndim */

    /* null and stale handles on every accessor */
    BADI(gc_tensor_ndim(NULL, &err), EINV, "gc_tensor_ndim: t is NULL");
    BADI(gc_tensor_numel(NULL, &err), EINV, "gc_tensor_numel: t is NULL");
    BADI(gc_tensor_dtype(NULL, &err), EINV, "t is NULL");
    BADI(gc_tensor_device(NULL, &err), EINV, "t is NULL");
    BADI(gc_tensor_is_contiguous(NULL, &err), EINV, "t is NULL");
    BADI(gc_tensor_strides(NULL, shp, 8, &err), EINV, "t is NULL");
    BADP(gc_tensor_data_ptr(NULL, &err), EINV, "t is NULL");
    BADP(gc_tensor_clone(NULL, &err), EINV, "gc_tensor_clone: t is NULL");
    int not_a_tensor[64] = {0};
    BADP(gc_tensor_clone((gc_tensor *)not_a_tensor, &err), EINV, "not a live gc_tensor");
    BADI(gc_tensor_free((gc_tensor *)not_a_tensor, &err), EINV, "not a live gc_tensor");
    OK(gc_tensor_free(NULL, &err) == 0);

    /* views */
    const int64_t r5[] = {5}, rbad[] = {-1, -1}, r0[] = {0, -1};
    BADP(gc_tensor_reshape(t, r5, 1, &err), GC_ERR_SHAPE, "holds 5 elements");
    BADP(gc_tensor_reshape(t, rbad, 2, &err), GC_ERR_SHAPE, "invalid");
    BADP(gc_tensor_reshape(t, r0, 2, &err), GC_ERR_SHAPE, "cannot infer");
    BADP(gc_tensor_reshape(t, NULL, 1, &err), GC_ERR_SHAPE, "shape is NULL");
    BADP(gc_tensor_transpose(t, 0, 2, &err), EINV, "dim 2 is outside [-2, 2)");
    BADP(gc_tensor_transpose(t, -3, 0, &err), EINV, "dim -3");

    /* ops: dtypes, shapes, handles */
    gc_tensor *a = gc_tensor_ones(s23, 2, F, CPU, &err), *b = gc_tensor_ones(s32, 2, F, CPU, &err);
    gc_tensor *d = gc_tensor_ones(s23, 2, GC_DTYPE_FLOAT64, CPU, &err);
    gc_tensor *i32 = gc_tensor_ones(s23, 2, GC_DTYPE_INT32, CPU, &err);
    gc_tensor *v4 = gc_tensor_ones(s4, 1, F, CPU, &err), *v2 = gc_tensor_ones(s2, 1, F, CPU, &err);
    OK(a && b && d && i32 && v4 && v2);
    BADP(gc_add(a, b, &err), GC_ERR_SHAPE, "do not broadcast");
    BADP(gc_add(a, d, &err), GC_ERR_DTYPE, "a is float32 and b is float64");
    BADP(gc_mul(i32, i32, &err), GC_ERR_DTYPE, "int32");
    BADP(gc_eq(NULL, a, &err), EINV, "gc_eq: a is NULL");
    BADP(gc_sub(a, NULL, &err), EINV, "gc_sub: b is NULL");
    BADP(gc_relu(NULL, &err), EINV, "gc_relu: x is NULL");
    BADP(gc_gelu(i32, &err), GC_ERR_DTYPE, "gc_gelu: x is int32");
    BADP(gc_matmul(a, a, &err), GC_ERR_SHAPE, "3 columns and b 2 rows");
    BADP(gc_matmul(a, d, &err), GC_ERR_DTYPE, "one dtype");
    BADP(gc_matmul(z, a, &err), GC_ERR_SHAPE, "at least one dim");
    const int64_t s423[] = {4, 2, 3}, s333[] = {3, 3, 3};
    gc_tensor *p = gc_tensor_ones(s423, 3, F, CPU, &err);
    gc_tensor *q = gc_tensor_ones(s333, 3, F, CPU, &err);
    BADP(gc_matmul(p, q, &err), GC_ERR_SHAPE, "batch dims do not broadcast");
    const int dd[] = {0, 0}, dbad[] = {2};
    BADP(gc_sum(a, dd, 2, 0, &err), EINV, "appears twice");
    BADP(gc_sum(a, dbad, 1, 0, &err), EINV, "dim 2 is outside");
    BADP(gc_mean(a, NULL, 1, 0, &err), EINV, "dims is NULL");
    BADP(gc_mean(a, dd, 1, 2, &err), EINV, "keepdim = 2");
    BADP(gc_softmax(a, 5, &err), EINV, "gc_softmax: dim 5");
    BADP(gc_log_softmax(i32, 0, &err), GC_ERR_DTYPE, "int32");

    /* conv, pool, norm */
    const int64_t sx[] = {1, 2, 5, 5}, sw[] = {3, 2, 3, 3}, swbad[] = {3, 4, 3, 3};
    const int64_t sbig[] = {3, 2, 7, 7}, zero2[] = {0, 1}, k3[] = {3, 3}, pad2[] = {2, 2};
    gc_tensor *x = gc_tensor_ones(sx, 4, F, CPU, &err), *w = gc_tensor_ones(sw, 4, F, CPU, &err);
    gc_tensor *wbad = gc_tensor_ones(swbad, 4, F, CPU, &err);
    gc_tensor *wbig = gc_tensor_ones(sbig, 4, F, CPU, &err);
    BADP(gc_conv2d(a, w, NULL, NULL, NULL, NULL, &err), GC_ERR_SHAPE, "must be 4-d");
    BADP(gc_conv2d(x, wbad, NULL, NULL, NULL, NULL, &err), GC_ERR_SHAPE, "input channels");
    BADP(gc_conv2d(x, w, v4, NULL, NULL, NULL, &err), GC_ERR_SHAPE, "bias must be [3]");
    BADP(gc_conv2d(x, w, NULL, zero2, NULL, NULL, &err), EINV, "stride (0, 1)");
    BADP(gc_conv2d(x, wbig, NULL, NULL, NULL, NULL, &err), GC_ERR_SHAPE, "smaller than the window");
    BADP(gc_conv2d(x, NULL, NULL, NULL, NULL, NULL, &err), EINV, "w is NULL");
    BADP(gc_conv2d(x, w, d, NULL, NULL, NULL, &err), GC_ERR_DTYPE, "bias is float64");
    BADP(gc_max_pool2d(a, k3, NULL, NULL, NULL, &err), GC_ERR_SHAPE, "[C, H, W] or [N, C, H, W]");
    BADP(gc_max_pool2d(x, NULL, NULL, NULL, NULL, &err), EINV, "kernel is NULL");
    BADP(gc_max_pool2d(x, k3, NULL, pad2, NULL, &err), EINV, "at most half the kernel");
    BADP(gc_avg_pool2d(x, zero2, NULL, NULL, &err), EINV, "kernel (0, 1)");
    BADP(gc_layer_norm(a, 3, NULL, NULL, 1e-5, &err), GC_ERR_SHAPE, "normalized_ndim = 3");
    BADP(gc_layer_norm(a, 1, v4, NULL, 1e-5, &err), GC_ERR_SHAPE, "weight must have");
    BADP(gc_layer_norm(a, 1, NULL, v2, 1e-5, &err), GC_ERR_SHAPE, "bias must have");
    BADP(gc_layer_norm(a, 1, NULL, NULL, -1.0, &err), EINV, "eps");

    /* threads */
    BADI(gc_set_num_threads(0, &err), EINV, "n = 0");
    OK(gc_get_num_threads() >= 1 && gc_cpu_isa(&err) != NULL);

    /* double free, then the stale handle everywhere */
    gc_tensor *view = gc_tensor_transpose(t, 0, 1, &err);
    OK(view != NULL);
    OK(gc_tensor_free(t, &err) == 0);
    OK(deleted == 0); /* the view still holds the buffer */
    BADI(gc_tensor_free(t, &err), EINV, "freed twice");
    BADP(gc_add(t, t, &err), EINV, "gc_add: a is not a live gc_tensor");
    BADI(gc_tensor_numel(t, &err), EINV, "not a live");
    OK(gc_tensor_free(view, &err) == 0);
    OK(deleted == 1);

    gc_tensor *all[] = {z, a, b, d, i32, v4, v2, p, q, x, w, wbad, wbig};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        OK(gc_tensor_free(all[i], &err) == 0);
    printf(failures ? "FAILED %d of %d\n" : "ok %d\n", failures ? failures : checks, checks);
    return failures ? 1 : 0;
}
