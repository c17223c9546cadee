/* libgpucore: deployed models' life, accessors, runs and statistics (see model.h).
 *
 * A run takes an idle arena of the model (or makes one), copies the inputs in, executes the
 * checked nodes in order, copies the outputs out and gives the arena back: concurrent runs of
 * one model each use their own arena and share the read-only constants. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign, clock_gettime */

#include "isa.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *ptr(const gc_marg *a, char *arena, void *const *consts)
{
    if (a->tag != GC_ARG_BUF && a->tag != GC_ARG_PACKED && a->tag != GC_ARG_QPACKED)
        return NULL;
    return (a->region < 0 ? arena : (char *)consts[a->region]) + a->off;
}

#define P(k) ptr(&nd->a[k], arena, m->consts)
#define I(k) ((ptrdiff_t)nd->a[k].i)

/* Runs node nd; 0, -1 when a kernel's scratch allocation failed, or -2 with *bad the index
 * value a gather found outside its dim. */
static int exec_node(const gc_model *m, const gc_mnode *nd, char *arena, const void *const *in,
                     void *const *out, int64_t *bad)
{
    if (nd->empty)
        return 0;
    const int d = nd->f64;
    switch (nd->kind) {
    case GC_NK_INPUT: {
        const gc_mio *io = &m->in[nd->a[0].i];
        if (io->nbytes)
            memcpy(P(1), in[nd->a[0].i], io->nbytes);
        return 0;
    }
    case GC_NK_OUTPUT: {
        const gc_mio *io = &m->out[nd->a[0].i];
        if (io->nbytes)
            memcpy(out[nd->a[0].i], P(1), io->nbytes);
        return 0;
    }
    case GC_NK_GEMM:
    case GC_NK_GEMM_EX: {
        const int ex = nd->kind == GC_NK_GEMM_EX;
        const void *bias = ex ? P(14) : NULL;
        const int act = ex ? (int)nd->a[15].i : GC_UNARY_NONE;
        const double al = nd->a[9].f, be = nd->a[10].f;
        return d ? gc_gemm_px_f64(P(0), nd->pk[0], P(1), nd->pk[1], P(2), I(3), I(4), I(5), I(6),
                                  (int)I(7), (int)I(8), al, be, I(11), I(12), I(13), bias, act)
                 : gc_gemm_px_f32(P(0), nd->pk[0], P(1), nd->pk[1], P(2), I(3), I(4), I(5), I(6),
                                  (int)I(7), (int)I(8), (float)al, (float)be, I(11), I(12), I(13),
                                  bias, act);
    }
    case GC_NK_UNARY:
        if (d)
            gc_unary_f64((int)I(0), P(1), P(2), nd->a[1].numel);
        else
            gc_unary_f32((int)I(0), P(1), P(2), nd->a[1].numel);
        return 0;
    case GC_NK_BINARY:
        if (d)
            gc_binary_f64((int)I(0), &nd->it, P(1), P(2), P(3));
        else
            gc_binary_f32((int)I(0), &nd->it, P(1), P(2), P(3));
        return 0;
    case GC_NK_COPY:
        gc_copy(&nd->it, P(0), P(1), (size_t)gc_dtype_size(nd->a[0].dtype));
        return 0;
    case GC_NK_CAST:
        gc_cast(&nd->it, P(0), nd->cast[0], P(1), nd->cast[1]);
        return 0;
    case GC_NK_REDUCE:
        return d ? gc_reduce_f64((int)I(0), P(1), P(2), I(3), I(4), I(5))
                 : gc_reduce_f32((int)I(0), P(1), P(2), I(3), I(4), I(5));
    case GC_NK_SOFTMAX:
        if (d)
            gc_softmax_f64(P(0), P(1), I(2), I(3), I(4), (int)I(5));
        else
            gc_softmax_f32(P(0), P(1), I(2), I(3), I(4), (int)I(5));
        return 0;
    case GC_NK_LAYER_NORM:
        if (d)
            gc_layer_norm_f64(P(0), P(1), P(2), P(3), I(4), I(5), nd->a[6].f);
        else
            gc_layer_norm_f32(P(0), P(1), P(2), P(3), I(4), I(5), nd->a[6].f);
        return 0;
    case GC_NK_CONV2D: {
        const int ex = nd->nargs == 19, relu = ex && I(18) >= 0;
        void *res = ex ? P(17) : NULL;
        return d ? gc_conv2d_forward_ex_f64(P(0), P(1), nd->pk[0], P(2), res, relu, P(3), &nd->cv,
                                            I(16))
                 : gc_conv2d_forward_ex_f32(P(0), P(1), nd->pk[0], P(2), res, relu, P(3), &nd->cv,
                                            I(16));
    }
    case GC_NK_MAX_POOL2D:
        if (d)
            gc_max_pool2d_f64(P(0), P(1), P(2), &nd->pl);
        else
            gc_max_pool2d_f32(P(0), P(1), P(2), &nd->pl);
        return 0;
    case GC_NK_ATTENTION:
        return d ? gc_attention_f64(P(0), P(1), P(2), P(3), P(4), &nd->at)
                 : gc_attention_f32(P(0), P(1), P(2), P(3), P(4), &nd->at);
    case GC_NK_WHERE:
        gc_where(&nd->it, P(0), P(1), P(2), P(3), (size_t)gc_dtype_size(nd->a[1].dtype));
        return 0;
    case GC_NK_GATHER:
        return gc_gather(&nd->it, P(0), (ptrdiff_t)nd->gx[0], (ptrdiff_t)nd->gx[1], P(1), P(2),
                         (size_t)gc_dtype_size(nd->a[0].dtype), bad) < 0
                   ? -2
                   : 0;
    case GC_NK_IM2COL:
        if (d)
            gc_im2col_f64(P(0), P(1), &nd->cv);
        else
            gc_im2col_f32(P(0), P(1), &nd->cv);
        return 0;
    case GC_NK_QUANTIZE_U8:
        gc_quantize_u8(P(0), P(1), I(2), nd->q.a_scale, nd->q.a_zp);
        return 0;
    case GC_NK_QUANTIZE_LINEAR_U8:
        gc_quantize_linear_u8(P(0), P(1), I(2), nd->q.a_scale, nd->q.a_zp);
        return 0;
    case GC_NK_DEQUANTIZE_U8:
        gc_dequantize_u8(P(0), P(1), I(2), nd->q.a_scale, nd->q.a_zp);
        return 0;
    case GC_NK_QGEMM:
        return gc_qgemm(P(0), I(3), nd->qp->k, nd->qp, P(2), nd->qp->n, &nd->q);
    case GC_NK_QCONV2D:
        return gc_qconv2d(P(0), nd->qp, P(2), P(3), &nd->cv, &nd->q);
    case GC_NK_MAX_POOL2D_U8:
        gc_max_pool2d_u8(P(0), P(1), &nd->cv);
        return 0;
    case GC_NK_DYNAMIC_QUANTIZE_U8:
        gc_dynamic_quantize_u8(P(0), I(4), P(1), P(2), P(3));
        return 0;
    case GC_NK_DYNAMIC_QUANTIZE_TORCH_U8:
        gc_dynamic_quantize_torch_u8(P(0), I(4), P(1), P(2), P(3));
        return 0;
    case GC_NK_QGEMM_DYNAMIC: {
        /* the activations' zero point and scale as they are now; w_scales and bias where the
         * arguments point */
        gc_qargs q = nd->q;
        q.a_zp = *(const uint8_t *)P(5);
        if (q.mode == GC_QOUT_F32) {
            q.a_scale = *(const float *)P(4);
            q.w_scale = P(6);
            q.bias = P(7);
        }
        return gc_qgemm(P(0), I(3), nd->qp->k, nd->qp, P(2), nd->qp->n, &q);
    }
    default: return -1; /* never: the loader checked every kind */
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Life                                                                                        */

void gc_model_release(gc_model *m)
{
    for (int k = 0; m->consts && k < m->n_consts; k++)
        free(m->consts[k]);
    free(m->consts);
    free(m->const_bytes);
    free(m->const_dtype);
    free(m->in);
    free(m->out);
    for (int j = 0; m->nodes && j <= m->n_nodes; j++) { /* (one more: a node that failed late) */
        for (int i = 0; i < 2; i++)
            if (m->nodes[j].pk[i]) {
                free(m->nodes[j].pk[i]->data);
                free(m->nodes[j].pk[i]);
            }
        if (m->nodes[j].qp) {
            free(m->nodes[j].qp->data);
            free(m->nodes[j].qp);
        }
    }
    free(m->nodes);
    free(m->names);
    for (int i = 0; i < m->n_idle; i++)
        free(m->idle[i]);
    free(m->idle);
}

gc_model *gc_model_load(const char *path, const gc_model_options *options, gc_error *err)
{
    gc_ok(err);
    if (!path) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT, "gc_model_load: path is NULL");
        return NULL;
    }
    if (options && options->size < sizeof(size_t)) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                "gc_model_load: options->size must be sizeof(gc_model_options)");
        return NULL;
    }
    if (gc_capi_init(err) < 0)
        return NULL;
    if (options && options->size >= offsetof(gc_model_options, num_threads) + sizeof(int) &&
        options->num_threads > 0)
        gc_pool_set_size(options->num_threads);
    gc_model *m = calloc(1, sizeof *m);
    if (!m) {
        gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->stats_lock, NULL);
    m->min_us = 1e300;
    if (gc_model_decode(m, path, err) < 0 || gc_handle_add(m) < 0) {
        if (err && err->code == GC_OK)
            gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
        gc_model_release(m);
        pthread_mutex_destroy(&m->lock);
        pthread_mutex_destroy(&m->stats_lock);
        free(m);
        return NULL;
    }
    m->magic = GC_MODEL_MAGIC;
    return m;
}

static int check_model(const gc_model *m, const char *fn, gc_error *err)
{
    if (!m)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: model is NULL", fn);
    if (!gc_handle_live(m, GC_MODEL_MAGIC))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "%s: model is not a live gc_model (already freed, or not made by "
                       "gc_model_load)",
                       fn);
    return 0;
}

int gc_model_free(gc_model *m, gc_error *err)
{
    gc_ok(err);
    if (!m)
        return 0;
    int rc = check_model(m, "gc_model_free", err);
    if (rc < 0 || !gc_handle_remove(m))
        return rc < 0 ? rc
                      : gc_fail(err, GC_ERR_INVALID_ARGUMENT, "gc_model_free: freed twice");
    m->magic = 0;
    gc_model_release(m);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->stats_lock);
    free(m);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Accessors                                                                                   */

int gc_model_num_inputs(const gc_model *m, gc_error *err)
{
    gc_ok(err);
    int rc = check_model(m, "gc_model_num_inputs", err);
    return rc < 0 ? rc : m->n_in;
}

int gc_model_num_outputs(const gc_model *m, gc_error *err)
{
    gc_ok(err);
    int rc = check_model(m, "gc_model_num_outputs", err);
    return rc < 0 ? rc : m->n_out;
}

static const gc_mio *io_at(const gc_model *m, int in, int i, const char *fn, gc_error *err)
{
    gc_ok(err);
    if (check_model(m, fn, err) < 0)
        return NULL;
    const int n = in ? m->n_in : m->n_out;
    if (i < 0 || i >= n) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: index %d is outside [0, %d)", fn, i, n);
        return NULL;
    }
    return in ? &m->in[i] : &m->out[i];
}

const char *gc_model_input_name(const gc_model *m, int i, gc_error *err)
{
    const gc_mio *io = io_at(m, 1, i, "gc_model_input_name", err);
    return io ? io->name : NULL;
}

const char *gc_model_output_name(const gc_model *m, int i, gc_error *err)
{
    const gc_mio *io = io_at(m, 0, i, "gc_model_output_name", err);
    return io ? io->name : NULL;
}

int gc_model_input_dtype(const gc_model *m, int i, gc_error *err)
{
    const gc_mio *io = io_at(m, 1, i, "gc_model_input_dtype", err);
    return io ? io->dtype : err ? err->code : GC_ERR_INVALID_ARGUMENT;
}

int gc_model_output_dtype(const gc_model *m, int i, gc_error *err)
{
    const gc_mio *io = io_at(m, 0, i, "gc_model_output_dtype", err);
    return io ? io->dtype : err ? err->code : GC_ERR_INVALID_ARGUMENT;
}

static int io_shape(const gc_mio *io, int64_t *out, int cap, const char *fn, gc_error *err)
{
    if (!io)
        return err ? err->code : GC_ERR_INVALID_ARGUMENT;
    if (cap < 0 || (cap > 0 && !out))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: out is NULL or cap = %d < 0", fn, cap);
    for (int d = 0; d < io->ndim && d < cap; d++)
        out[d] = io->shape[d];
    return io->ndim;
}

int gc_model_input_shape(const gc_model *m, int i, int64_t *out, int cap, gc_error *err)
{
    const char *fn = "gc_model_input_shape";
    return io_shape(io_at(m, 1, i, fn, err), out, cap, fn, err);
}

int gc_model_output_shape(const gc_model *m, int i, int64_t *out, int cap, gc_error *err)
{
    const char *fn = "gc_model_output_shape";
    return io_shape(io_at(m, 0, i, fn, err), out, cap, fn, err);
}

/* ------------------------------------------------------------------------------------------ */
/* Runs                                                                                        */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int run(gc_model *m, const void *const *in, void *const *out, double t0, const char *fn,
               gc_error *err)
{
    char *arena = NULL;
    pthread_mutex_lock(&m->lock);
    if (m->n_idle > 0)
        arena = m->idle[--m->n_idle];
    pthread_mutex_unlock(&m->lock);
    if (!arena) {
        void *p = NULL;
        const size_t nb = m->arena_bytes > 0 ? (size_t)m->arena_bytes : 64;
        if (posix_memalign(&p, 64, nb) != 0)
            return gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory for an arena", fn);
        memset(p, 0, nb);
        arena = p;
    }
    int rc = 0, j = 0;
    int64_t bad = 0;
    for (; j < m->n_nodes; j++)
        if ((rc = exec_node(m, &m->nodes[j], arena, in, out, &bad)) < 0)
            break;
    pthread_mutex_lock(&m->lock);
    int kept = 0;
    if (m->n_idle == m->cap_idle) {
        const int cap = m->cap_idle ? m->cap_idle * 2 : 4;
        void **idle = realloc(m->idle, (size_t)cap * sizeof *idle);
        if (idle) {
            m->idle = idle;
            m->cap_idle = cap;
        }
    }
    if (m->n_idle < m->cap_idle) {
        m->idle[m->n_idle++] = arena;
        kept = 1;
    }
    pthread_mutex_unlock(&m->lock);
    if (!kept)
        free(arena);
    if (rc == -2)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "%s: node %d (gather): index %lld lies outside [0, %lld): check the "
                       "model's integer inputs",
                       fn, j, (long long)bad, (long long)m->nodes[j].gx[1]);
    if (rc < 0)
        return gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: node %d: out of memory for the kernel's "
                       "scratch", fn, j);
    const double us = now_us() - t0;
    pthread_mutex_lock(&m->stats_lock);
    m->ring[m->count % GC_STATS_RING] = (float)us;
    m->count++;
    m->sum_us += us;
    m->min_us = us < m->min_us ? us : m->min_us;
    m->max_us = us > m->max_us ? us : m->max_us;
    pthread_mutex_unlock(&m->stats_lock);
    return 0;
}

/* err cleared; m live and taking n_inputs inputs and n_outputs outputs, else < 0 with err set */
static int check_call(const gc_model *m, const char *fn, int n_inputs, int n_outputs,
                      gc_error *err)
{
    gc_ok(err);
    int rc = check_model(m, fn, err);
    if (rc < 0)
        return rc;
    if (n_inputs != m->n_in || n_outputs != m->n_out)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "%s: the model takes %d inputs and %d outputs; got %d and %d", fn, m->n_in,
                       m->n_out, n_inputs, n_outputs);
    return 0;
}

int gc_model_run_buffers(gc_model *m, const void *const *inputs, const size_t *input_bytes,
                         int n_inputs, void *const *outputs, const size_t *output_bytes,
                         int n_outputs, gc_error *err)
{
    const char *fn = "gc_model_run_buffers";
    const double t0 = now_us();
    int rc = check_call(m, fn, n_inputs, n_outputs, err);
    if (rc < 0)
        return rc;
    if ((m->n_in && (!inputs || !input_bytes)) || (m->n_out && (!outputs || !output_bytes)))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: a buffer or size array is NULL", fn);
    for (int i = 0; i < m->n_in + m->n_out; i++) {
        const int in = i < m->n_in, k = in ? i : i - m->n_in;
        const gc_mio *io = in ? &m->in[k] : &m->out[k];
        const size_t got = in ? input_bytes[k] : output_bytes[k];
        if (got != io->nbytes)
            return gc_fail(err, GC_ERR_SHAPE, "%s: %s %d ('%.60s') holds %zu bytes; it needs %zu",
                           fn, in ? "input" : "output", k, io->name, got, io->nbytes);
        if (!(in ? (const void *)inputs[k] : (const void *)outputs[k]) && io->nbytes)
            return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: %s %d is NULL", fn,
                           in ? "input" : "output", k);
    }
    return run(m, inputs, outputs, t0, fn, err);
}

int gc_model_run(gc_model *m, const gc_tensor *const *inputs, int n_inputs, gc_tensor **outputs,
                 int n_outputs, gc_error *err)
{
    const char *fn = "gc_model_run";
    const double t0 = now_us();
    int rc = check_call(m, fn, n_inputs, n_outputs, err);
    if (rc < 0)
        return rc;
    if ((m->n_in && !inputs) || (m->n_out && !outputs))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: inputs or outputs is NULL", fn);
    const void **in = calloc((size_t)m->n_in + 1, sizeof *in);
    void **out = calloc((size_t)m->n_out + 1, sizeof *out);
    gc_tensor **tmp = calloc((size_t)m->n_in + 1, sizeof *tmp);
    if (!in || !out || !tmp)
        rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    char what[32];
    for (int k = 0; rc == 0 && k < m->n_in; k++) {
        const gc_mio *io = &m->in[k];
        const gc_tensor *t = inputs[k];
        snprintf(what, sizeof what, "inputs[%d]", k);
        if ((rc = gc_check(t, fn, what, err)) < 0)
            break;
        int same = t->ndim == io->ndim;
        for (int d = 0; same && d < io->ndim; d++)
            same = t->shape[d] == io->shape[d];
        if (t->dtype != io->dtype)
            rc = gc_fail(err, GC_ERR_DTYPE, "%s: %s ('%.60s') is %s; the model takes %s", fn,
                         what, io->name, gc_dtype_name(t->dtype), gc_dtype_name(io->dtype));
        else if (!same)
            rc = gc_fail(err, GC_ERR_SHAPE, "%s: %s ('%.60s') has another shape than the "
                         "model's input (see gc_model_input_shape)", fn, what, io->name);
        else if (gc_contig_input(t, &tmp[k], fn, err) == NULL)
            rc = err ? err->code : GC_ERR_OUT_OF_MEMORY;
        else
            in[k] = gc_ptr(tmp[k] ? tmp[k] : t);
    }
    for (int k = 0; rc == 0 && k < m->n_out; k++) {
        outputs[k] = gc_tensor_new(m->out[k].shape, m->out[k].ndim, m->out[k].dtype, fn, err);
        if (!outputs[k])
            rc = err ? err->code : GC_ERR_OUT_OF_MEMORY;
        else
            out[k] = gc_ptr(outputs[k]);
    }
    if (rc == 0)
        rc = run(m, in, out, t0, fn, err);
    if (rc < 0 && outputs)
        for (int k = 0; k < m->n_out; k++)
            if (out && out[k]) {
                gc_tensor_free(outputs[k], NULL);
                outputs[k] = NULL;
            }
    for (int k = 0; tmp && k < m->n_in; k++)
        gc_tensor_drop(tmp[k]);
    free(tmp);
    free(in);
    free(out);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Statistics                                                                                  */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int gc_model_stats(const gc_model *m, gc_model_stats_t *out, gc_error *err)
{
    const char *fn = "gc_model_stats";
    gc_ok(err);
    int rc = check_model(m, fn, err);
    if (rc < 0)
        return rc;
    if (!out || out->size < sizeof(size_t))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: out is NULL or out->size is not set",
                       fn);
    gc_model_stats_t s;
    memset(&s, 0, sizeof s);
    float *sorted = malloc(sizeof(float) * GC_STATS_RING);
    if (!sorted)
        return gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    gc_model *mm = (gc_model *)m; /* the lock only */
    pthread_mutex_lock(&mm->stats_lock);
    const int64_t n = m->count < GC_STATS_RING ? m->count : GC_STATS_RING;
    memcpy(sorted, m->ring, sizeof(float) * (size_t)n);
    s.count = m->count;
    if (m->count > 0) {
        s.mean_us = m->sum_us / (double)m->count;
        s.min_us = m->min_us;
        s.max_us = m->max_us;
    }
    pthread_mutex_unlock(&mm->stats_lock);
    if (n > 0) {
        qsort(sorted, (size_t)n, sizeof(float), cmp_float);
        s.p50_us = sorted[(n - 1) / 2];
        s.p99_us = sorted[(int64_t)((double)(n - 1) * 0.99 + 0.5)];
    }
    free(sorted);
    const size_t size = out->size < sizeof s ? out->size : sizeof s;
    s.size = out->size;
    memcpy(out, &s, size);
    return 0;
}

int gc_model_reset_stats(gc_model *m, gc_error *err)
{
    gc_ok(err);
    int rc = check_model(m, "gc_model_reset_stats", err);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&m->stats_lock);
    m->count = 0;
    m->sum_us = m->max_us = 0;
    m->min_us = 1e300;
    pthread_mutex_unlock(&m->stats_lock);
    return 0;
}
