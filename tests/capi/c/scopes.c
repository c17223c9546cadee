/* Scopes of gpucore.h: release on end, escape (to the caller or the enclosing scope), nesting,
 * misuse (out of order, twice, another thread's scope), tensors freed early, and 8 threads with
 * their own scope stacks sharing one read-only tensor.  Prints "ok <n>" or FAIL lines. */
#include <gpucore.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int checks, failures;
#define CHECK(cond)                                                                             \
    do {                                                                                        \
        checks++;                                                                               \
        if (!(cond)) {                                                                          \
            failures++;                                                                         \
            printf("FAIL %d: %s\n", __LINE__, #cond);                                           \
        }                                                                                       \
    } while (0)

static const int64_t S23[] = {2, 3};

static int live(const gc_tensor *t)
{
    gc_error e;
    return gc_tensor_numel(t, &e) >= 0;
}

static int deleted;
static void deleter(void *data, void *ctx)
{
    (void)data;
    (void)ctx;
    deleted++;
}

/* ---- threads ---------------------------------------------------------------------------- */
static gc_tensor *shared;        /* read by every thread */
static gc_scope *main_scope;     /* a scope of the main thread */
static int thread_errors[8];

static void *worker(void *arg)
{
    const int id = (int)(size_t)arg;
    gc_error err;
    /* another thread's scope cannot be ended here */
    if (gc_scope_end(main_scope, &err) != GC_ERR_INVALID_ARGUMENT ||
        !strstr(err.message, "another thread"))
        thread_errors[id]++;
    for (int it = 0; it < 200; it++) {
        gc_scope *s = gc_scope_begin();
        if (!s || gc_scope_depth() != 1) {
            thread_errors[id]++;
            break;
        }
        gc_tensor *x = gc_tensor_full(S23, 2, (double)id, GC_DTYPE_FLOAT32, GC_DEVICE_CPU, &err);
        gc_tensor *y = gc_add(x, shared, &err);
        gc_tensor *z = gc_mul(y, y, &err); /* (id + 1)^2 */
        gc_tensor *keep = gc_tensor_clone(z, &err);
        if (!gc_scope_escape(s, keep, &err))
            thread_errors[id]++;
        if (gc_scope_end(s, &err) < 0 || gc_scope_depth() != 0)
            thread_errors[id]++;
        float out[6];
        if (gc_tensor_copy_to_buffer(keep, out, sizeof out, &err) < 0 ||
            out[5] != (float)((id + 1) * (id + 1)) || live(x) || live(z))
            thread_errors[id]++;
        gc_tensor_free(keep, &err);
    }
    return NULL;
}

int main(void)
{
    gc_error err;
    const int F = GC_DTYPE_FLOAT32, CPU = GC_DEVICE_CPU;

    /* end releases; escape hands back to the caller */
    CHECK(gc_scope_depth() == 0);
    gc_scope *s = gc_scope_begin();
    CHECK(s && gc_scope_depth() == 1);
    gc_tensor *a = gc_tensor_ones(S23, 2, F, CPU, &err), *b = gc_tensor_ones(S23, 2, F, CPU, &err);
    gc_tensor *c = gc_add(a, b, &err), *v = gc_tensor_transpose(c, 0, 1, &err);
    CHECK(gc_scope_escape(s, c, &err) == c && !gc_error_occurred(&err));
    CHECK(gc_scope_escape(s, c, &err) == NULL && err.code == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "not owned by this scope"));
    CHECK(gc_scope_end(s, &err) == 0 && gc_scope_depth() == 0);
    CHECK(!live(a) && !live(b) && !live(v) && live(c));
    CHECK(gc_scope_end(s, &err) == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "already ended"));
    CHECK(gc_scope_end(NULL, &err) == GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_scope_escape(NULL, c, &err) == NULL && err.code == GC_ERR_INVALID_ARGUMENT);
    CHECK(gc_scope_escape(s, NULL, &err) == NULL && strstr(err.message, "t is NULL"));
    CHECK(gc_tensor_free(c, &err) == 0);

    /* nesting: escape from the inner scope lands in the outer one */
    gc_scope *s1 = gc_scope_begin();
    gc_tensor *t1 = gc_tensor_zeros(S23, 2, F, CPU, &err);
    gc_scope *s2 = gc_scope_begin();
    CHECK(gc_scope_depth() == 2);
    gc_tensor *t2 = gc_tensor_zeros(S23, 2, F, CPU, &err);
    gc_tensor *t3 = gc_tensor_zeros(S23, 2, F, CPU, &err);
    CHECK(gc_scope_escape(s2, t2, &err) == t2);
    CHECK(gc_scope_escape(s1, t3, &err) == NULL); /* t3 belongs to s2 */
    /* out of order */
    CHECK(gc_scope_end(s1, &err) == GC_ERR_INVALID_ARGUMENT &&
          strstr(err.message, "not the innermost"));
    CHECK(live(t1) && live(t2) && live(t3));
    CHECK(gc_scope_end(s2, &err) == 0);
    CHECK(live(t1) && live(t2) && !live(t3));
    /* a scoped tensor freed early is not freed again at the end */
    CHECK(gc_tensor_free(t1, &err) == 0);
    float buf[6] = {0};
    gc_tensor *zc = gc_tensor_from_buffer(buf, sizeof buf, S23, 2, F, GC_BUFFER_ZERO_COPY,
                                          deleter, NULL, &err);
    CHECK(zc != NULL && deleted == 0);
    CHECK(gc_scope_end(s1, &err) == 0);
    CHECK(!live(t2) && deleted == 1 && gc_scope_depth() == 0);
    CHECK(gc_tensor_free(t1, &err) == GC_ERR_INVALID_ARGUMENT);

    /* threads: each its own stack; one shared read-only tensor */
    shared = gc_tensor_ones(S23, 2, F, CPU, &err);
    main_scope = gc_scope_begin();
    pthread_t th[8];
    for (size_t i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++)
        CHECK(thread_errors[i] == 0);
    CHECK(gc_scope_depth() == 1);
    CHECK(gc_scope_end(main_scope, &err) == 0);
    CHECK(live(shared)); /* made before the scope */
    CHECK(gc_tensor_free(shared, &err) == 0);

    /* create / free churn: the handle registry stays small (tombstones are dropped) */
    for (int i = 0; i < 50000; i++) {
        gc_tensor *t = gc_tensor_empty(NULL, 0, F, CPU, &err);
        if (!t || gc_tensor_free(t, &err) != 0) {
            CHECK(0);
            break;
        }
    }

    printf(failures ? "FAILED %d of %d\n" : "ok %d\n", failures ? failures : checks, checks);
    return failures ? 1 : 0;
}
