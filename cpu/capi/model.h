/* libgpucore: deployed models (model.c: reading the program of a saved file; nodes.c: checking
 * each node as its binding would, qnodes.c the int8 ones; run.c: running it, accessors,
 * statistics).  The program's
 * encoding is written by gpucore/runtime/c_program.py (its docstring is the format's
 * definition). */
#ifndef GPUCORE_CAPI_MODEL_H
#define GPUCORE_CAPI_MODEL_H

#include <pthread.h>

#include "capi.h"

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Node kinds and argument tags: opcodes.def's GC_NODE_KIND / GC_NODE_ARG (c_program.py reads the
 * same table as gpucore._cpu.OPCODES["node_kind"] / ["node_arg"]). */
enum {
#define GC_NODE_KIND(NAME, name, code) GC_NK_##NAME = code,
#include "opcodes.def"
#undef GC_NODE_KIND
    GC_NK_END /* one past the last kind */
};
enum {
#define GC_NODE_ARG(NAME, code) GC_ARG_##NAME = code,
#include "opcodes.def"
#undef GC_NODE_ARG
};

#define GC_NODE_MAX_ARGS 24 /* qconv2d: 23 */

/* One checked argument: a buffer is (region, byte offset) with region -1 the run's arena and
 * k >= 0 constant k; every element its shape and strides reach lies inside the region. */
typedef struct {
    int tag;
    int region, dtype, ndim;
    int64_t off;
    int64_t shape[GC_MAX_NDIM], strides[GC_MAX_NDIM]; /* strides in bytes */
    int64_t numel;
    int64_t lo, hi; /* the bytes its elements reach in the region: [lo, hi) (empty: lo == hi) */
    int contig;
    int64_t i; /* GC_ARG_INT */
    double f;  /* GC_ARG_FLOAT */
    /* GC_ARG_PACKED: a constant GEMM operand (a buffer of rows * cols elements) that the loader
     * packs as gemm_pack(x, side, rows, cols, trans, swap) would */
    int side, trans, swap;
    int64_t rows, cols;
    /* GC_ARG_QPACKED: int8 weights B (rows = k x cols = n; trans: stored n x k) in a constant,
     * which the loader packs as qgemm_pack(w, k, n, trans) would (trans and the reach as above) */
} gc_marg;

typedef struct {
    int kind, nargs;
    int f64;    /* float kernels: float64 */
    gc_iter it; /* binary, copy */
    int empty;  /* nothing to run */
    gc_conv cv; /* conv2d */
    gc_pool2d pl; /* max_pool2d */
    gc_attn at;   /* attention */
    int64_t gx[2]; /* gather: x's stride along the dim (elements), its size there */
    gc_elem cast[2]; /* cast: the source's and the destination's element types */
    gc_packed *pk[2]; /* gemm: a / b packed (NULL: not); conv2d: pk[0] the weight */
    gc_qargs q;       /* int8 kinds: qgemm / qconv2d's epilogue (w_scale, bias point into the
                         constants); quantize(_linear) / dequantize: a_scale, a_zp */
    gc_qpacked *qp;   /* qgemm, qconv2d: the packed weights */
    gc_marg a[GC_NODE_MAX_ARGS];
} gc_mnode;

typedef struct {
    char *name;
    int dtype, ndim;
    int64_t shape[GC_MAX_NDIM];
    size_t nbytes;
} gc_mio;

#define GC_STATS_RING 4096

struct gc_model {
    uint32_t magic;
    int64_t arena_bytes;
    int n_consts, n_in, n_out, n_nodes;
    void **consts; /* 64-byte aligned copies */
    int64_t *const_bytes;
    int *const_dtype;
    gc_mio *in, *out;
    gc_mnode *nodes;
    char *names; /* the names blob (io names point into it) */
    /* idle arenas (one per concurrent run, kept) */
    pthread_mutex_t lock;
    void **idle;
    int n_idle, cap_idle;
    /* statistics */
    pthread_mutex_t stats_lock;
    int64_t count;
    double sum_us, min_us, max_us;
    float ring[GC_STATS_RING];
};

#define GC_LIM ((int64_t)1 << 40) /* any size, stride or byte count of a program */

/* A program being read: its words, the next one, the file (for messages), the node being
 * checked (-1: none) and the caller's error. */
typedef struct {
    const int64_t *w;
    int64_t n, i;
    const char *path;
    int node;
    gc_error *err;
} gc_rd;

/* model.c: GC_ERR_FORMAT "corrupt program" at r's word or node, saying what. */
int gc_rd_corrupt(gc_rd *r, const char *what);
/* nodes.c: checks node nd (its arguments read) as its binding would, sets what a run needs
 * (iterators, geometry, f64) and packs its packed constants; 0, or < 0 with r->err set. */
int gc_mnode_check(gc_rd *r, const gc_model *m, gc_mnode *nd);
/* qnodes.c: the same for the int8 kinds (GC_NK_QUANTIZE_U8 .. GC_NK_MAX_POOL2D_U8,
 * GC_NK_QUANTIZE_LINEAR_U8, GC_NK_DYNAMIC_QUANTIZE_U8, GC_NK_DYNAMIC_QUANTIZE_TORCH_U8,
 * GC_NK_QGEMM_DYNAMIC); packs their weights into nd->qp. */
int gc_qnode_check(gc_rd *r, const gc_model *m, gc_mnode *nd);

/* a * b into *out, or -1 when it exceeds GC_LIM (a, b >= 0). */
static inline int gc_mulok(int64_t a, int64_t b, int64_t *out)
{
    if (a > 0 && b > GC_LIM / a)
        return -1;
    *out = a * b;
    return 0;
}

/* model.c: parses and checks the program of the file's C section into m (consts, io, nodes). */
int gc_model_decode(gc_model *m, const char *path, gc_error *err);
/* run.c: releases everything m holds (any state of a partly decoded model). */
void gc_model_release(gc_model *m);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUCORE_CAPI_MODEL_H */
