/* Success paths of gpucore.h: makes deterministic inputs, runs every op and prints each result as
 *     case <name> <dtype> <ndim> <sizes...> : <values...>
 * (values "%.17g"); tests/capi/test_capi.py builds the same inputs in Python and compares.  Any
 * unexpected error prints "FAIL ..." and exits 1. */
#include <gpucore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static gc_error err;

static void check(const char *what)
{
    if (gc_error_occurred(&err)) {
        printf("FAIL %s: %s %s\n", what, gc_status_name(err.code), err.message);
        exit(1);
    }
}

/* value i of input `seed`: small rationals, exact in float32: ((i*7 + seed*13) % 23 - 11) / 4 */
static double val(int64_t i, int seed)
{
    return (double)((i * 7 + seed * 13) % 23 - 11) / 4.0;
}

static gc_tensor *input(const int64_t *shape, int ndim, int seed, int dtype)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    void *buf = malloc((size_t)(n > 0 ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == GC_DTYPE_FLOAT64)
            ((double *)buf)[i] = val(i, seed);
        else
            ((float *)buf)[i] = (float)val(i, seed);
    }
    gc_tensor *t = gc_tensor_from_buffer(buf, (size_t)n * (size_t)gc_dtype_size(dtype), shape,
                                         ndim, dtype, GC_BUFFER_COPY, NULL, NULL, &err);
    free(buf);
    check("input");
    return t;
}

static void emit(const char *name, gc_tensor *t)
{
    if (!t) {
        printf("FAIL %s: NULL result: %s %s\n", name, gc_status_name(err.code), err.message);
        exit(1);
    }
    int64_t shape[GC_MAX_NDIM];
    int nd = gc_tensor_shape(t, shape, GC_MAX_NDIM, &err);
    int dt = gc_tensor_dtype(t, &err);
    int64_t n = gc_tensor_numel(t, &err);
    check(name);
    size_t nb = (size_t)n * (size_t)gc_dtype_size(dt);
    unsigned char *buf = malloc(nb ? nb : 1);
    gc_tensor_copy_to_buffer(t, buf, nb, &err);
    check(name);
    printf("case %s %s %d", name, gc_dtype_name(dt), nd);
    for (int d = 0; d < nd; d++)
        printf(" %lld", (long long)shape[d]);
    printf(" :");
    for (int64_t i = 0; i < n; i++) {
        double v;
        switch (dt) {
        case GC_DTYPE_FLOAT32: v = ((float *)buf)[i]; break;
        case GC_DTYPE_FLOAT64: v = ((double *)buf)[i]; break;
        case GC_DTYPE_INT32: v = ((int32_t *)buf)[i]; break;
        case GC_DTYPE_INT64: v = (double)((int64_t *)buf)[i]; break;
        case GC_DTYPE_INT8: v = ((int8_t *)buf)[i]; break;
        case GC_DTYPE_INT16: v = ((int16_t *)buf)[i]; break;
        case GC_DTYPE_UINT16: v = ((uint16_t *)buf)[i]; break;
        case GC_DTYPE_UINT32: v = ((uint32_t *)buf)[i]; break;
        case GC_DTYPE_UINT64: v = (double)((uint64_t *)buf)[i]; break;
        case GC_DTYPE_FLOAT16:
        case GC_DTYPE_BFLOAT16: v = ((uint16_t *)buf)[i]; break; /* the bits */
        default: v = buf[i]; break;
        }
        printf(" %.17g", v);
    }
    printf("\n");
    free(buf);
    gc_tensor_free(t, &err);
    check(name);
}

typedef gc_tensor *(*binop)(const gc_tensor *, const gc_tensor *, gc_error *);
typedef gc_tensor *(*unop)(const gc_tensor *, gc_error *);

int main(void)
{
    const int F = GC_DTYPE_FLOAT32, D = GC_DTYPE_FLOAT64;
    const int64_t s234[] = {2, 3, 4}, s31[] = {3, 1}, s4[] = {4}, s34[] = {3, 4}, s45[] = {4, 5};
    gc_tensor *a = input(s234, 3, 1, F), *b = input(s31, 2, 2, F), *c = input(s4, 1, 3, F);
    gc_tensor *ad = input(s234, 3, 1, D), *bd = input(s31, 2, 2, D);

    /* binary with broadcasting */
    const char *bn[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
    binop bf[] = {gc_add, gc_sub, gc_mul, gc_div, gc_maximum, gc_minimum};
    char name[64];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "%s_f32", bn[i]);
        emit(name, bf[i](a, b, &err));
        snprintf(name, sizeof name, "%s_f64", bn[i]);
        emit(name, bf[i](ad, bd, &err));
    }
    const char *cn[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    binop cf[] = {gc_eq, gc_ne, gc_lt, gc_le, gc_gt, gc_ge};
    for (int i = 0; i < 6; i++)
        emit(cn[i], cf[i](a, c, &err));
    gc_tensor *absa = gc_abs(a, &err);
    emit("pow", gc_pow(absa, b, &err));
    gc_tensor_free(absa, &err);

    /* unary, on a contiguous and on a transposed input */
    const char *un[] = {"relu", "sigmoid", "tanh", "gelu", "exp", "neg", "abs"};
    unop uf[] = {gc_relu, gc_sigmoid, gc_tanh, gc_gelu, gc_exp, gc_neg, gc_abs};
    gc_tensor *at = gc_tensor_transpose(a, 0, 2, &err);
    check("transpose");
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof name, "%s", un[i]);
        emit(name, uf[i](a, &err));
        snprintf(name, sizeof name, "%s_t", un[i]);
        emit(name, uf[i](at, &err));
    }
    emit("relu_f64", gc_relu(ad, &err));
    gc_tensor *one = gc_tensor_full(NULL, 0, 1.0, F, GC_DEVICE_CPU, &err);
    gc_tensor *pa = gc_abs(a, &err), *pa1 = gc_add(pa, one, &err);
    check("abs+1");
    emit("log", gc_log(pa1, &err));
    emit("sqrt", gc_sqrt(pa, &err));
    emit("add_t", gc_add(at, at, &err));
    gc_tensor_free(pa, &err);
    gc_tensor_free(pa1, &err);
    gc_tensor_free(one, &err);

    /* matmul */
    gc_tensor *m34 = input(s34, 2, 4, F), *m45 = input(s45, 2, 5, F);
    const int64_t s2134[] = {2, 1, 3, 4}, s345[] = {3, 4, 5}, s5[] = {5}, s54[] = {5, 4};
    gc_tensor *b2134 = input(s2134, 4, 6, F), *b345 = input(s345, 3, 7, F);
    gc_tensor *v4 = input(s4, 1, 8, F), *v5 = input(s5, 1, 9, F), *m54 = input(s54, 2, 10, F);
    emit("mm", gc_matmul(m34, m45, &err));
    emit("mm_batch", gc_matmul(a, m45, &err));
    emit("mm_bcast", gc_matmul(b2134, b345, &err));
    emit("mm_vec_mat", gc_matmul(v4, m45, &err));
    emit("mm_mat_vec", gc_matmul(m45, v5, &err));
    emit("mm_dot", gc_matmul(v4, v4, &err));
    gc_tensor *m54t = gc_tensor_transpose(m54, 0, 1, &err);
    emit("mm_trans", gc_matmul(m34, m54t, &err));
    gc_tensor *b345t = gc_tensor_transpose(b345, 0, 2, &err); /* [5, 4, 3]: strided batch */
    emit("mm_strided", gc_matmul(b345t, m34, &err));
    gc_tensor *m34d = input(s34, 2, 4, D), *m45d = input(s45, 2, 5, D);
    emit("mm_f64", gc_matmul(m34d, m45d, &err));

    /* reductions */
    const int d1[] = {1}, d02[] = {0, 2}, dneg[] = {-1};
    emit("sum_all", gc_sum(a, NULL, 0, 0, &err));
    emit("sum_1", gc_sum(a, d1, 1, 0, &err));
    emit("sum_02_keep", gc_sum(a, d02, 2, 1, &err));
    emit("mean_neg", gc_mean(a, dneg, 1, 0, &err));
    emit("mean_02", gc_mean(a, d02, 2, 0, &err));
    emit("mean_t_1", gc_mean(at, d1, 1, 0, &err));
    emit("sum_f64", gc_sum(ad, d1, 1, 1, &err));

    /* softmax */
    emit("softmax_last", gc_softmax(a, -1, &err));
    emit("softmax_0", gc_softmax(a, 0, &err));
    emit("log_softmax_1", gc_log_softmax(a, 1, &err));
    emit("log_softmax_t", gc_log_softmax(at, 2, &err));

    /* conv2d, pooling, layer_norm */
    const int64_t sx[] = {2, 3, 7, 6}, sw[] = {4, 3, 3, 2}, sbias[] = {4};
    gc_tensor *x = input(sx, 4, 11, F), *w = input(sw, 4, 12, F), *bias = input(sbias, 1, 13, F);
    const int64_t st2[] = {2, 1}, pd1[] = {1, 0}, dl2[] = {1, 2};
    emit("conv", gc_conv2d(x, w, bias, NULL, NULL, NULL, &err));
    emit("conv_geom", gc_conv2d(x, w, NULL, st2, pd1, dl2, &err));
    gc_tensor *xd = input(sx, 4, 11, D), *wd = input(sw, 4, 12, D);
    emit("conv_f64", gc_conv2d(xd, wd, NULL, NULL, pd1, NULL, &err));
    const int64_t k3[] = {3, 3}, k2[] = {2, 2}, s22[] = {2, 2}, p11[] = {1, 1};
    emit("maxpool", gc_max_pool2d(x, k3, s22, p11, NULL, &err));
    emit("maxpool_k2", gc_max_pool2d(x, k2, NULL, NULL, NULL, &err));
    emit("avgpool", gc_avg_pool2d(x, k3, s22, p11, &err));
    emit("avgpool_k2", gc_avg_pool2d(x, k2, NULL, NULL, &err));
    gc_tensor *lw = input(s4, 1, 14, F), *lb = input(s4, 1, 15, F);
    emit("layer_norm", gc_layer_norm(a, 1, lw, lb, 1e-5, &err));
    emit("layer_norm_2", gc_layer_norm(a, 2, NULL, NULL, 1e-5, &err));

    /* tensors: creation, views */
    const int64_t s23[] = {2, 3}, rs[] = {4, -1};
    for (int dt = 0; dt <= GC_DTYPE_UINT64; dt++) {
        snprintf(name, sizeof name, "full_%s", gc_dtype_name(dt));
        emit(name, gc_tensor_full(s23, 2, -2.5, dt, GC_DEVICE_CPU, &err));
        snprintf(name, sizeof name, "ones_%s", gc_dtype_name(dt));
        emit(name, gc_tensor_ones(s23, 2, dt, GC_DEVICE_CPU, &err));
        snprintf(name, sizeof name, "zeros_%s", gc_dtype_name(dt));
        emit(name, gc_tensor_zeros(s23, 2, dt, GC_DEVICE_CPU, &err));
    }
    emit("randn", gc_tensor_randn(s23, 2, F, GC_DEVICE_CPU, 7, &err));
    emit("randn_f64", gc_tensor_randn(s23, 2, D, GC_DEVICE_CPU, 7, &err));
    emit("reshape", gc_tensor_reshape(a, rs, 2, &err));
    emit("reshape_t", gc_tensor_reshape(at, rs, 2, &err));
    emit("clone_t", gc_tensor_clone(at, &err));
    emit("contiguous_t", gc_tensor_contiguous(at, &err));
    emit("transpose", gc_tensor_transpose(a, -1, 1, &err));

    gc_tensor *all[] = {a, b, c, ad, bd, at, m34, m45, b2134, b345, v4, v5, m54, m54t, b345t,
                        m34d, m45d, x, w, bias, xd, wd, lw, lb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        gc_tensor_free(all[i], &err);
    check("free");
    printf("done\n");
    return 0;
}
