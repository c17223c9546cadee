/* Deployed models through gpucore.h (tests/capi/test_model.py drives it):
 *   model run <path> <in.bin> <out.bin>          one run through gc_model_run; prints the specs
 *   model threads <path> <in.bin> <threads> <n> every thread runs n times (run_buffers and run),
 *                                               all outputs bitwise equal to one run's
 *   model errors <path>                         the error paths of a loaded model
 *   model fuzz <path>...                        load (and run, if it loads) each file; prints the
 *                                               status of each: never crashes
 * The model has one input and one output here.  Prints FAIL lines and exits 1 on a failure. */
#include <gpucore.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            failures++;                                                                         \
            printf("FAIL %d: %s (%s)\n", __LINE__, #cond, err.message);                         \
        }                                                                                       \
    } while (0)

static void *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*n ? *n : 1);
    if (fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static gc_model *load(const char *path)
{
    gc_error err;
    gc_model_options opt = {sizeof opt, 0};
    gc_model *m = gc_model_load(path, &opt, &err);
    if (!m) {
        printf("FAIL load: %s %s\n", gc_status_name(err.code), err.message);
        exit(1);
    }
    return m;
}

static size_t out_bytes(const gc_model *m)
{
    gc_error err;
    int64_t shape[GC_MAX_NDIM], n = 1;
    int nd = gc_model_output_shape(m, 0, shape, GC_MAX_NDIM, &err);
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return (size_t)n * (size_t)gc_dtype_size(gc_model_output_dtype(m, 0, &err));
}

static int cmd_run(const char *path, const char *in_path, const char *out_path)
{
    gc_error err;
    gc_model *m = load(path);
    for (int io = 0; io < 2; io++) {
        const int n = io ? gc_model_num_outputs(m, &err) : gc_model_num_inputs(m, &err);
        for (int i = 0; i < n; i++) {
            int64_t shape[GC_MAX_NDIM];
            const int nd = io ? gc_model_output_shape(m, i, shape, GC_MAX_NDIM, &err)
                              : gc_model_input_shape(m, i, shape, GC_MAX_NDIM, &err);
            const int dt = io ? gc_model_output_dtype(m, i, &err) : gc_model_input_dtype(m, i, &err);
            printf("%s %s %s", io ? "output" : "input",
                   io ? gc_model_output_name(m, i, &err) : gc_model_input_name(m, i, &err),
                   gc_dtype_name(dt));
            for (int d = 0; d < nd; d++)
                printf(" %lld", (long long)shape[d]);
            printf("\n");
        }
    }
    size_t n;
    void *x = read_file(in_path, &n);
    int64_t shape[GC_MAX_NDIM];
    const int nd = gc_model_input_shape(m, 0, shape, GC_MAX_NDIM, &err);
    gc_tensor *in = gc_tensor_from_buffer(x, n, shape, nd, gc_model_input_dtype(m, 0, &err),
                                          GC_BUFFER_COPY, NULL, NULL, &err);
    CHECK(in != NULL);
    gc_tensor *out = NULL;
    CHECK(gc_model_run(m, (const gc_tensor *const *)&in, 1, &out, 1, &err) == 0);
    const size_t nb = out_bytes(m);
    void *y = malloc(nb);
    CHECK(out && gc_tensor_copy_to_buffer(out, y, nb, &err) == 0);
    FILE *f = fopen(out_path, "wb");
    fwrite(y, 1, nb, f);
    fclose(f);
    gc_model_stats_t st = {sizeof st, 0, 0, 0, 0, 0, 0};
    CHECK(gc_model_stats(m, &st, &err) == 0 && st.count == 1 && st.p50_us > 0 &&
          st.p99_us >= st.p50_us && st.mean_us > 0);
    CHECK(gc_model_reset_stats(m, &err) == 0 && gc_model_stats(m, &st, &err) == 0 &&
          st.count == 0);
    gc_tensor_free(in, &err);
    gc_tensor_free(out, &err);
    free(x);
    free(y);
    CHECK(gc_model_free(m, &err) == 0);
    printf(failures ? "FAILED\n" : "ok\n");
    return failures != 0;
}

/* ---- threads ---------------------------------------------------------------------------- */
typedef struct {
    gc_model *m;
    const void *x, *want;
    size_t nx, ny;
    int iters, bad;
} job;

static void *worker(void *arg)
{
    job *J = arg;
    gc_error err;
    void *y = malloc(J->ny);
    int64_t shape[GC_MAX_NDIM];
    const int nd = gc_model_input_shape(J->m, 0, shape, GC_MAX_NDIM, &err);
    gc_tensor *in = gc_tensor_from_buffer((void *)J->x, J->nx, shape, nd,
                                          gc_model_input_dtype(J->m, 0, &err),
                                          GC_BUFFER_ZERO_COPY, NULL, NULL, &err);
    for (int i = 0; i < J->iters; i++) {
        if (i % 2) {
            void *outs[1] = {y};
            const void *ins[1] = {J->x};
            if (gc_model_run_buffers(J->m, ins, &J->nx, 1, outs, &J->ny, 1, &err) < 0 ||
                memcmp(y, J->want, J->ny))
                J->bad++;
        } else {
            gc_tensor *out = NULL;
            if (gc_model_run(J->m, (const gc_tensor *const *)&in, 1, &out, 1, &err) < 0 ||
                gc_tensor_copy_to_buffer(out, y, J->ny, &err) < 0 || memcmp(y, J->want, J->ny))
                J->bad++;
            gc_tensor_free(out, &err);
        }
    }
    gc_tensor_free(in, &err);
    free(y);
    return NULL;
}

static int cmd_threads(const char *path, const char *in_path, int nt, int iters)
{
    gc_error err;
    gc_model *m = load(path);
    size_t nx;
    void *x = read_file(in_path, &nx);
    const size_t ny = out_bytes(m);
    void *want = malloc(ny);
    const void *ins[1] = {x};
    void *outs[1] = {want};
    CHECK(gc_model_run_buffers(m, ins, &nx, 1, outs, &ny, 1, &err) == 0);
    pthread_t th[64];
    job jobs[64];
    for (int t = 0; t < nt; t++) {
        jobs[t] = (job){m, x, want, nx, ny, iters, 0};
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    for (int t = 0; t < nt; t++) {
        pthread_join(th[t], NULL);
        CHECK(jobs[t].bad == 0);
    }
    gc_model_stats_t st = {sizeof st, 0, 0, 0, 0, 0, 0};
    CHECK(gc_model_stats(m, &st, &err) == 0 && st.count == 1 + (int64_t)nt * iters);
    printf("runs %lld mean %.1f p50 %.1f p99 %.1f us\n", (long long)st.count, st.mean_us,
           st.p50_us, st.p99_us);
    CHECK(gc_model_free(m, &err) == 0);
    free(x);
    free(want);
    printf(failures ? "FAILED\n" : "ok\n");
    return failures != 0;
}

/* ---- errors ----------------------------------------------------------------------------- */
static int cmd_errors(const char *path)
{
    gc_error err;
    gc_model *m = load(path);
    int64_t shape[GC_MAX_NDIM];
    const int nd = gc_model_input_shape(m, 0, shape, GC_MAX_NDIM, &err);
    gc_tensor *good = gc_tensor_zeros(shape, nd, GC_DTYPE_FLOAT32, GC_DEVICE_CPU, &err);
    gc_tensor *f64 = gc_tensor_zeros(shape, nd, GC_DTYPE_FLOAT64, GC_DEVICE_CPU, &err);
    shape[0] += 1;
    gc_tensor *wrong = gc_tensor_zeros(shape, nd, GC_DTYPE_FLOAT32, GC_DEVICE_CPU, &err);
    gc_tensor *out = NULL;
    const gc_tensor *ins[2] = {good, good};
    CHECK(gc_model_run(m, ins, 2, &out, 1, &err) == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "takes 1 inputs and 1 outputs; got 2 and 1"));
    ins[0] = f64;
    CHECK(gc_model_run(m, ins, 1, &out, 1, &err) == GC_ERR_DTYPE && strstr(err.message, "float64"));
    ins[0] = wrong;
    CHECK(gc_model_run(m, ins, 1, &out, 1, &err) == GC_ERR_SHAPE && out == NULL);
    ins[0] = NULL;
    CHECK(gc_model_run(m, ins, 1, &out, 1, &err) == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "inputs[0] is NULL"));
    CHECK(gc_model_run(m, NULL, 1, &out, 1, &err) == GC_ERR_INVALID_ARGUMENT);
    float buf[4];
    const void *bins[1] = {buf};
    void *bouts[1] = {buf};
    size_t small = sizeof buf;
    CHECK(gc_model_run_buffers(m, bins, &small, 1, bouts, &small, 1, &err) == GC_ERR_SHAPE &&
          strstr(err.message, "holds 16 bytes"));
    CHECK(gc_model_run_buffers(m, bins, NULL, 1, bouts, &small, 1, &err) ==
          GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_model_input_name(m, 1, &err) == NULL && err.code == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "index 1 is outside [0, 1)"));
    CHECK(gc_model_output_shape(m, -1, shape, 8, &err) == GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_model_input_shape(m, 0, NULL, 8, &err) == GC_ERR_INVALID_ARGUMENT);
    gc_model_stats_t st = {0, 0, 0, 0, 0, 0, 0};
    CHECK(gc_model_stats(m, &st, &err) == GC_ERR_INVALID_ARGUMENT); /* size not set */
    CHECK(gc_model_stats(m, NULL, &err) == GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_model_num_inputs(NULL, &err) == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "model is NULL"));
    CHECK(gc_model_load(NULL, NULL, &err) == NULL && err.code == GC_ERR_INVALID_ARGUMENT);
    gc_model_options bad_opt = {0, 0};
    CHECK(gc_model_load(path, &bad_opt, &err) == NULL && err.code == GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_model_load("/nonexistent/model.gcm", NULL, &err) == NULL && err.code == GC_ERR_IO);
    CHECK(gc_model_free(m, &err) == 0);
    CHECK(gc_model_free(m, &err) == GC_ERR_INVALID_ARGUMENT && strstr(err.message, "not a live"));
    CHECK(gc_model_run(m, ins, 1, &out, 1, &err) == GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_model_free(NULL, &err) == 0);
    gc_tensor_free(good, &err);
    gc_tensor_free(f64, &err);
    gc_tensor_free(wrong, &err);
    printf(failures ? "FAILED\n" : "ok\n");
    return failures != 0;
}

static int cmd_fuzz(int n, char **paths)
{
    for (int i = 0; i < n; i++) {
        gc_error err;
        gc_model *m = gc_model_load(paths[i], NULL, &err);
        if (!m) {
            printf("%s %s\n", gc_status_name(err.code), err.message);
            continue;
        }
        /* it loaded: every buffer was checked, so a run stays in bounds whatever it computes */
        int64_t shape[GC_MAX_NDIM];
        const int nin = gc_model_num_inputs(m, &err), nout = gc_model_num_outputs(m, &err);
        const gc_tensor *ins[16] = {0};
        gc_tensor *outs[16] = {0};
        for (int k = 0; k < nin && k < 16; k++) {
            const int nd = gc_model_input_shape(m, k, shape, GC_MAX_NDIM, &err);
            ins[k] = gc_tensor_zeros(shape, nd, gc_model_input_dtype(m, k, &err), GC_DEVICE_CPU,
                                     &err);
        }
        const int rc = gc_model_run(m, ins, nin, outs, nout, &err);
        printf("loaded run=%s\n", gc_status_name(rc));
        for (int k = 0; k < 16; k++) {
            gc_tensor_free((gc_tensor *)ins[k], &err);
            gc_tensor_free(outs[k], &err);
        }
        gc_model_free(m, &err);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "run"))
        return cmd_run(argv[2], argv[3], argv[4]);
    if (argc >= 6 && !strcmp(argv[1], "threads"))
        return cmd_threads(argv[2], argv[3], atoi(argv[4]), atoi(argv[5]));
    if (argc >= 3 && !strcmp(argv[1], "errors"))
        return cmd_errors(argv[2]);
    if (argc >= 2 && !strcmp(argv[1], "fuzz"))
        return cmd_fuzz(argc - 2, argv + 2);
    printf("FAIL usage\n");
    return 2;
}
