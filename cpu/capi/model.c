/* libgpucore: loading a deployed model's program (see model.h, gpucore/runtime/c_program.py).
 *
 * Every number of the file is checked before it is used: counts against limits, every buffer
 * argument's reach (shape and strides) against its region (the arena or a constant), every
 * node's sizes as its Python binding checks them (cpu/python/<family>.c), so that no run can
 * read or write outside the memory the model owns.  Anything else is GC_ERR_FORMAT. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include "isa.h"
#include "model.h"
#include "stfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC 0x67637072
#define VERSION 1
static const char *kind_name(int k)
{
    static const char *const names[GC_NK_END] = {
#define GC_NODE_KIND(NAME, name, code) [code] = #name,
#include "opcodes.def"
#undef GC_NODE_KIND
    };
    return k > 0 && k < GC_NK_END && names[k] ? names[k] : "?";
}

int gc_rd_corrupt(gc_rd *r, const char *what)
{
    if (r->node >= 0)
        return gc_fail(r->err, GC_ERR_FORMAT, "gc_model_load: %s: corrupt program: node %d: %s",
                       r->path, r->node, what);
    return gc_fail(r->err, GC_ERR_FORMAT, "gc_model_load: %s: corrupt program (word %lld): %s",
                   r->path, (long long)r->i, what);
}

static int next(gc_rd *r, int64_t lo, int64_t hi, int64_t *v, const char *what)
{
    if (r->i >= r->n)
        return gc_rd_corrupt(r, "ends early");
    *v = r->w[r->i++];
    if (*v < lo || *v > hi)
        return gc_rd_corrupt(r, what);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Arguments                                                                                   */

/* A packed constant: region (a constant), byte offset, dtype, side, rows, cols, trans, swap
 * (2: a Winograd 3x3 convolution weight, conv_winograd.c);
 * its rows * cols elements from the offset lie inside the constant. */
static int read_packed(gc_rd *r, const gc_model *m, gc_marg *a)
{
    int64_t region, dt, side, trans, swap;
    if (next(r, 0, m->n_consts - 1, &region, "bad packed operand region") < 0 ||
        next(r, 0, GC_LIM, &a->off, "bad packed operand offset") < 0 ||
        next(r, GC_DTYPE_FLOAT32, GC_DTYPE_FLOAT64, &dt, "bad packed operand dtype") < 0 ||
        next(r, 0, 1, &side, "bad packed operand side") < 0 ||
        next(r, 0, GC_LIM, &a->rows, "bad packed operand rows") < 0 ||
        next(r, 0, GC_LIM, &a->cols, "bad packed operand cols") < 0 ||
        next(r, 0, 1, &trans, "bad packed operand trans") < 0 ||
        next(r, 0, 2, &swap, "bad packed operand swap") < 0)
        return -1;
    a->region = (int)region;
    a->dtype = (int)dt;
    a->side = (int)side;
    a->trans = (int)trans;
    a->swap = (int)swap;
    const int64_t isz = gc_dtype_size(a->dtype);
    if (a->cols && a->rows > GC_LIM / a->cols)
        return gc_rd_corrupt(r, "packed operand too large");
    a->numel = a->rows * a->cols;
    a->ndim = 1;
    a->shape[0] = a->numel;
    a->strides[0] = isz;
    a->contig = 1;
    if (a->off % isz || a->off + a->numel * isz > m->const_bytes[a->region])
        return gc_rd_corrupt(r, "packed operand outside its constant, or misaligned");
    return 0;
}

/* Int8 weights to pack: region (an int8 constant), byte offset, k, n, trans; the k * n bytes
 * from the offset lie inside the constant, k <= GC_QGEMM_MAX_K (qgemm_pack's limit). */
static int read_qpacked(gc_rd *r, const gc_model *m, gc_marg *a)
{
    int64_t region, trans;
    if (next(r, 0, m->n_consts - 1, &region, "bad int8 weight region") < 0 ||
        next(r, 0, GC_LIM, &a->off, "bad int8 weight offset") < 0 ||
        next(r, 0, GC_QGEMM_MAX_K, &a->rows, "bad int8 weight k (at most 65536)") < 0 ||
        next(r, 0, GC_LIM, &a->cols, "bad int8 weight n") < 0 ||
        next(r, 0, 1, &trans, "bad int8 weight trans") < 0)
        return -1;
    a->region = (int)region;
    a->dtype = GC_DTYPE_INT8;
    a->trans = (int)trans;
    if (gc_mulok(a->rows, a->cols, &a->numel) < 0)
        return gc_rd_corrupt(r, "int8 weights too large");
    a->ndim = 1;
    a->shape[0] = a->numel;
    a->strides[0] = 1;
    a->contig = 1;
    if (m->const_dtype[a->region] != GC_DTYPE_INT8)
        return gc_rd_corrupt(r, "int8 weights in a constant that is not int8");
    if (a->off + a->numel > m->const_bytes[a->region])
        return gc_rd_corrupt(r, "int8 weights outside their constant");
    a->lo = a->off;
    a->hi = a->off + a->numel;
    return 0;
}

static int read_arg(gc_rd *r, const gc_model *m, gc_marg *a)
{
    int64_t v;
    memset(a, 0, sizeof *a);
    if (next(r, GC_ARG_NONE, GC_ARG_QPACKED, &v, "unknown argument tag") < 0)
        return -1;
    a->tag = (int)v;
    if (a->tag == GC_ARG_INT)
        return next(r, -GC_LIM, GC_LIM, &a->i, "integer out of range");
    if (a->tag == GC_ARG_FLOAT) {
        if (next(r, INT64_MIN, INT64_MAX, &v, "") < 0)
            return -1;
        memcpy(&a->f, &v, sizeof a->f);
        return 0;
    }
    if (a->tag == GC_ARG_PACKED)
        return read_packed(r, m, a);
    if (a->tag == GC_ARG_QPACKED)
        return read_qpacked(r, m, a);
    if (a->tag != GC_ARG_BUF)
        return 0;
    int64_t region, dt, nd;
    if (next(r, -1, m->n_consts - 1, &region, "bad buffer region") < 0 ||
        next(r, -GC_LIM, GC_LIM, &a->off, "bad buffer offset") < 0 ||
        next(r, 0, GC_DTYPE_UINT64, &dt, "bad buffer dtype") < 0 ||
        next(r, 0, GC_MAX_NDIM, &nd, "bad buffer ndim") < 0)
        return -1;
    a->region = (int)region;
    a->dtype = (int)dt;
    a->ndim = (int)nd;
    const int64_t isz = gc_dtype_size(a->dtype);
    a->numel = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (next(r, 0, GC_LIM, &a->shape[d], "bad buffer size") < 0)
            return -1;
        a->numel = a->numel > GC_LIM / (a->shape[d] ? a->shape[d] : 1) ? GC_LIM + 1
                                                                     : a->numel * a->shape[d];
    }
    if (a->numel > GC_LIM)
        return gc_rd_corrupt(r, "buffer too large");
    for (int d = 0; d < a->ndim; d++)
        if (next(r, -GC_LIM, GC_LIM, &a->strides[d], "bad buffer stride") < 0)
            return -1;
    /* the reach: [off + lo, off + hi + itemsize) inside the region; aligned item by item */
    const int64_t size = a->region < 0 ? m->arena_bytes : m->const_bytes[a->region];
    int64_t lo = 0, hi = 0, expect = isz;
    a->contig = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        const int64_t n = a->shape[d], s = a->strides[d];
        if (n > 1 && s % isz)
            return gc_rd_corrupt(r, "buffer stride not a multiple of its item size");
        if (n > 1 && s != expect)
            a->contig = 0;
        expect *= n ? n : 1;
        if (n > 0 && s != 0) {
            if ((s > 0 ? s : -s) > GC_LIM / n)
                return gc_rd_corrupt(r, "buffer reach too large");
            if (s > 0)
                hi += (n - 1) * s;
            else
                lo += (n - 1) * s;
        }
    }
    if (a->numel > 0 && (a->off + lo < 0 || a->off + hi + isz > size || a->off % isz))
        return gc_rd_corrupt(r, "buffer outside its region, or misaligned");
    a->lo = a->numel > 0 ? a->off + lo : a->off;
    a->hi = a->numel > 0 ? a->off + hi + isz : a->off;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* The file                                                                                    */

static int read_io(gc_rd *r, gc_mio *io, char **names)
{
    int64_t dt, nd;
    if (next(r, 0, GC_DTYPE_UINT64, &dt, "bad input / output dtype") < 0 ||
        next(r, 0, GC_MAX_NDIM, &nd, "bad input / output ndim") < 0)
        return -1;
    io->dtype = (int)dt;
    io->ndim = (int)nd;
    int64_t n = 1;
    for (int d = 0; d < io->ndim; d++) {
        if (next(r, 0, GC_LIM, &io->shape[d], "bad input / output size") < 0 ||
            gc_mulok(n, io->shape[d], &n) < 0)
            return gc_rd_corrupt(r, "input / output too large");
    }
    io->nbytes = (size_t)n * (size_t)gc_dtype_size(io->dtype);
    io->name = *names;
    *names += strlen(*names) + 1;
    return 0;
}

static const st_entry *section(const st_file *f, const char *name, int dtype, const char *path,
                               gc_error *err)
{
    const st_entry *e = st_find(f, name);
    if (!e) {
        gc_fail(err, GC_ERR_FORMAT,
                "gc_model_load: %s: no C program in the file (%s missing): save the model again "
                "with this gpucore; models with steps that run in Python, or dynamic sizes "
                "without example sizes, cannot run from C",
                path, name);
        return NULL;
    }
    if (e->dtype != dtype || e->ndim != 1 ||
        (uint64_t)e->shape[0] * (uint64_t)gc_dtype_size(dtype) != e->end - e->begin) {
        gc_fail(err, GC_ERR_FORMAT, "gc_model_load: %s: %s is malformed", path, name);
        return NULL;
    }
    return e;
}

int gc_model_decode(gc_model *m, const char *path, gc_error *err)
{
    st_file f;
    int rc = st_open(path, &f, err);
    if (rc < 0)
        return rc;
    int64_t *words = NULL;
    char *names = NULL;
    gc_rd r = {NULL, 0, 0, path, -1, err};
    const st_entry *pe = section(&f, "capi.program", GC_DTYPE_INT64, path, err);
    const st_entry *ne = pe ? section(&f, "capi.names", GC_DTYPE_UINT8, path, err) : NULL;
    rc = GC_ERR_FORMAT;
    if (!ne || st_verify(&f, pe, path, err) < 0 || st_verify(&f, ne, path, err) < 0)
        goto done;
    words = malloc((size_t)(pe->end - pe->begin) + 8);
    names = malloc((size_t)(ne->end - ne->begin) + 1);
    if (!words || !names) {
        rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
        goto done;
    }
    memcpy(words, f.data + f.data_start + pe->begin, (size_t)(pe->end - pe->begin));
    memcpy(names, f.data + f.data_start + ne->begin, (size_t)(ne->end - ne->begin));
    names[ne->end - ne->begin] = 0;
    r.w = words;
    r.n = (int64_t)((pe->end - pe->begin) / 8);
    int64_t v[7];
    if (next(&r, MAGIC, MAGIC, &v[0], "not a gpucore C program") < 0 ||
        next(&r, VERSION, VERSION, &v[1], "program version not supported by this library") < 0 ||
        next(&r, 0, GC_LIM, &v[2], "bad arena size") < 0 ||
        next(&r, 0, 1 << 20, &v[3], "bad constant count") < 0 ||
        next(&r, 0, 1 << 16, &v[4], "bad input count") < 0 ||
        next(&r, 0, 1 << 16, &v[5], "bad output count") < 0 ||
        next(&r, 0, 1 << 24, &v[6], "bad node count") < 0)
        goto done;
    m->arena_bytes = v[2];
    /* the names: constants, inputs, outputs, each NUL-terminated, inside the blob */
    size_t count = 0, blob = (size_t)(ne->end - ne->begin);
    for (size_t i = 0; i < blob; i++)
        count += names[i] == 0;
    if (count < (size_t)(v[3] + v[4] + v[5]) || (blob && names[blob - 1] != 0)) {
        gc_rd_corrupt(&r, "names missing");
        goto done;
    }
    m->consts = calloc((size_t)v[3] + 1, sizeof *m->consts);
    m->const_bytes = calloc((size_t)v[3] + 1, sizeof *m->const_bytes);
    m->const_dtype = calloc((size_t)v[3] + 1, sizeof *m->const_dtype);
    m->in = calloc((size_t)v[4] + 1, sizeof *m->in);
    m->out = calloc((size_t)v[5] + 1, sizeof *m->out);
    m->nodes = calloc((size_t)v[6] + 1, sizeof *m->nodes);
    m->names = names;
    names = NULL;
    if (!m->consts || !m->const_bytes || !m->const_dtype || !m->in || !m->out || !m->nodes) {
        rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
        goto done;
    }
    char *nm = m->names;
    for (int k = 0; k < v[3]; k++, m->n_consts++) {
        int64_t dt, nb;
        if (next(&r, 0, GC_DTYPE_UINT64, &dt, "bad constant dtype") < 0 ||
            next(&r, 0, GC_LIM, &nb, "bad constant size") < 0)
            goto done;
        const st_entry *e = st_find(&f, nm);
        if (!e || e->dtype != dt || e->end - e->begin != (uint64_t)nb) {
            gc_fail(err, GC_ERR_FORMAT, "gc_model_load: %s: constant %d ('%.100s') is missing or "
                    "does not match the program", path, k, nm);
            goto done;
        }
        nm += strlen(nm) + 1;
        if (st_verify(&f, e, path, err) < 0)
            goto done;
        if (posix_memalign(&m->consts[k], 64, nb > 0 ? (size_t)nb : 64) != 0) {
            rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory for constants");
            goto done;
        }
        memcpy(m->consts[k], f.data + f.data_start + e->begin, (size_t)nb);
        m->const_bytes[k] = nb;
        m->const_dtype[k] = (int)dt;
    }
    for (int k = 0; k < v[4]; k++, m->n_in++)
        if (read_io(&r, &m->in[k], &nm) < 0)
            goto done;
    for (int k = 0; k < v[5]; k++, m->n_out++)
        if (read_io(&r, &m->out[k], &nm) < 0)
            goto done;
    for (int j = 0; j < v[6]; j++, m->n_nodes++) {
        gc_mnode *nd = &m->nodes[j];
        int64_t kind, nargs;
        r.node = -1;
        if (next(&r, 1, GC_NK_END - 1, &kind, "unknown node kind") < 0 ||
            next(&r, 0, GC_NODE_MAX_ARGS, &nargs, "too many arguments") < 0)
            goto done;
        nd->kind = (int)kind;
        nd->nargs = (int)nargs;
        for (int i = 0; i < nd->nargs; i++)
            if (read_arg(&r, m, &nd->a[i]) < 0)
                goto done;
        r.node = j;
        if (gc_mnode_check(&r, m, nd) < 0) {
            if (err)
                snprintf(err->message + strlen(err->message),
                         sizeof err->message - strlen(err->message), " (%s)",
                         kind_name(nd->kind));
            goto done;
        }
    }
    r.node = -1;
    if (r.i != r.n) {
        gc_rd_corrupt(&r, "trailing words");
        goto done;
    }
    for (int k = 0; k < m->n_out; k++) { /* every output is written by some node */
        int found = 0;
        for (int j = 0; j < m->n_nodes && !found; j++)
            found = m->nodes[j].kind == GC_NK_OUTPUT && m->nodes[j].a[0].i == k;
        if (!found) {
            gc_rd_corrupt(&r, "an output no node writes");
            goto done;
        }
    }
    rc = 0;
done:
    free(words);
    free(names);
    st_close(&f);
    if (rc < 0 && err && err->code == GC_OK)
        rc = gc_fail(err, GC_ERR_FORMAT, "gc_model_load: %s: corrupt program", path);
    else if (rc < 0 && err)
        rc = err->code;
    return rc;
}
