/* Classify the held-out digits with the model the Python runtime saved, from C alone.
 *
 *     python examples/c/export_digits.py --out digits_c          (once: model + images)
 *     export PKG_CONFIG_PATH="$(python -m gpucore.capi --pkg-config-path)"
 *     cc -std=c11 -O2 examples/c/predict.c $(pkg-config --cflags --libs gpucore) -o predict
 *     ./predict digits_c/digits.gcm digits_c/images.f32 digits_c/labels.i64
 *
 * Loads the model with gc_model_load, reads its input shape ([1, 1, 8, 8]: one image per run),
 * classifies every image (argmax of the logits), prints one prediction per line, the accuracy
 * and the run statistics.  Exits 1 on any error, with gpucore's message. */
#include <gpucore.h>

#include <stdio.h>
#include <stdlib.h>

static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(*n ? *n : 1);
    if (buf && fread(buf, 1, *n, f) != *n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s model.gcm images.f32 labels.i64\n", argv[0]);
        return 2;
    }
    gc_error err;
    gc_model *model = gc_model_load(argv[1], NULL, &err);
    if (!model) {
        fprintf(stderr, "%s: %s\n", gc_status_name(err.code), err.message);
        return 1;
    }
    int64_t shape[GC_MAX_NDIM], out_shape[GC_MAX_NDIM];
    const int ndim = gc_model_input_shape(model, 0, shape, GC_MAX_NDIM, &err);
    const int out_ndim = gc_model_output_shape(model, 0, out_shape, GC_MAX_NDIM, &err);
    if (ndim < 1 || out_ndim != 2 || shape[0] != 1) {
        fprintf(stderr, "expected a model of one image per run\n");
        return 1;
    }
    int64_t per_image = 1;
    for (int d = 1; d < ndim; d++)
        per_image *= shape[d];
    const int64_t classes = out_shape[1];

    size_t nbytes, nlabels;
    float *images = read_all(argv[2], &nbytes);
    int64_t *labels = read_all(argv[3], &nlabels);
    if (!images || !labels) {
        fprintf(stderr, "cannot read %s or %s\n", argv[2], argv[3]);
        return 1;
    }
    const int64_t n = (int64_t)(nbytes / sizeof(float)) / per_image;
    if (n * (int64_t)sizeof(int64_t) != (int64_t)nlabels) {
        fprintf(stderr, "%lld images but %zu labels\n", (long long)n, nlabels / sizeof(int64_t));
        return 1;
    }

    float *logits = malloc(sizeof(float) * (size_t)classes);
    const size_t in_bytes = sizeof(float) * (size_t)per_image;
    const size_t out_bytes = sizeof(float) * (size_t)classes;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++) {
        const void *in[1] = {images + i * per_image};
        void *out[1] = {logits};
        if (gc_model_run_buffers(model, in, &in_bytes, 1, out, &out_bytes, 1, &err) < 0) {
            fprintf(stderr, "%s: %s\n", gc_status_name(err.code), err.message);
            return 1;
        }
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (logits[c] > logits[best])
                best = c;
        correct += best == labels[i];
        printf("%lld\n", (long long)best);
    }
    gc_model_stats_t st = {sizeof st, 0, 0, 0, 0, 0, 0};
    gc_model_stats(model, &st, &err);
    fprintf(stderr, "accuracy %.2f%% over %lld images; %lld runs, mean %.1f us, p50 %.1f us, "
            "p99 %.1f us\n", 100.0 * (double)correct / (double)(n ? n : 1), (long long)n,
            (long long)st.count, st.mean_us, st.p50_us, st.p99_us);
    free(logits);
    free(images);
    free(labels);
    gc_model_free(model, &err);
    return 0;
}
