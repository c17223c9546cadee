/* Bindings of philox.c: the Philox4x32-10 streams philox, uniform, normal, philox_block. */
#include "args.h"
#include "bindings.h"

/* seed, offset and out (C-contiguous, writable, kind k) for philox / uniform / normal. */
static Py_buffer *rng_common(const char *fn, PyObject *const *args, bufset *bs, char k,
                             uint64_t *seed, uint64_t *offset)
{
    if (get_unsigned(fn, "seed", args[0], 64, seed) < 0 ||
        get_unsigned(fn, "offset", args[1], 64, offset) < 0)
        return NULL;
    Py_buffer *out = get_buf(bs, fn, "out", args[2], 1);
    if (!out || need_kind(fn, "out", out, k) < 0 || need_contig(fn, "out", out) < 0)
        return NULL;
    return out;
}

/* uniform / normal: fill(seed, offset, out, a, b) with the float32 parameters a and b named an
 * and bn (args 3 and 4). */
static PyObject *rng_f32(const char *fn, const char *an, const char *bn,
                         void (*fill)(uint64_t, uint64_t, float *, ptrdiff_t, float, float),
                         PyObject *const *args, Py_ssize_t nargs)
{
    bufset bs = {.n = 0};
    uint64_t seed, offset;
    double a, b;
    if (check_nargs(fn, nargs, 5) < 0 || get_double(fn, an, args[3], &a) < 0 ||
        get_double(fn, bn, args[4], &b) < 0)
        return NULL;
    Py_buffer *out = rng_common(fn, args, &bs, 'f', &seed, &offset);
    if (!out)
        goto fail;
    const Py_ssize_t n = buf_nelem(out);
    Py_BEGIN_ALLOW_THREADS
    fill(seed, offset, (float *)out->buf, n, (float)a, (float)b);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(philox,
             "philox(seed, offset, out, /)\n--\n\n"
             "out uint32 [L]: out[i] = word i % 4 of Philox4x32-10 at counter offset + i // 4 "
             "(c0 = low, c1 = high 32 bits, c2 = c3 = 0), key (seed & 0xffffffff, seed >> 32).");

PyObject *gc_py_philox(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "philox";
    bufset bs = {.n = 0};
    uint64_t seed, offset;
    if (check_nargs(fn, nargs, 3) < 0)
        return NULL;
    Py_buffer *out = rng_common(fn, args, &bs, 'I', &seed, &offset);
    if (!out)
        goto fail;
    const Py_ssize_t n = buf_nelem(out);
    Py_BEGIN_ALLOW_THREADS
    gc_philox_fill(seed, offset, (uint32_t *)out->buf, n);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(uniform, "uniform(seed, offset, out, low, high, /)\n--\n\n"
                          "out float32: low + (high - low) * u, u = (word_i >> 8) * 2**-24 with "
                          "word_i the i-th word of the philox stream.");

PyObject *gc_py_uniform(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return rng_f32("uniform", "low", "high", gc_uniform_f32, args, nargs);
}

GC_DOC(normal,
             "normal(seed, offset, out, mean, std, /)\n--\n\n"
             "out float32, Box-Muller over word pairs (2p, 2p+1) of the philox stream, in float32 "
             "arithmetic; consumes 2 * ceil(L / 2) words.");

PyObject *gc_py_normal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return rng_f32("normal", "mean", "std", gc_normal_f32, args, nargs);
}

GC_DOC(philox_block,
             "philox_block(c0, c1, c2, c3, k0, k1, /)\n--\n\n"
             "One Philox4x32-10 block for counter (c0..c3) and key (k0, k1), each a uint32; "
             "returns a 4-tuple of ints (for known-answer tests).");

PyObject *gc_py_philox_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char *const names[6] = {"c0", "c1", "c2", "c3", "k0", "k1"};
    uint64_t v[6];
    if (check_nargs("philox_block", nargs, 6) < 0)
        return NULL;
    for (int i = 0; i < 6; i++)
        if (get_unsigned("philox_block", names[i], args[i], 32, &v[i]) < 0)
            return NULL;
    const uint32_t ctr[4] = {(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3]};
    const uint32_t key[2] = {(uint32_t)v[4], (uint32_t)v[5]};
    uint32_t out[4];
    gc_philox4x32_10(ctr, key, out);
    return Py_BuildValue("(kkkk)", (unsigned long)out[0], (unsigned long)out[1],
                         (unsigned long)out[2], (unsigned long)out[3]);
}
