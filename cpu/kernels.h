/* gpucore._cpu kernels: plain C functions over pointers and sizes.
 *
 * Nothing here knows about Python.  The bindings (cpu/python/) validate every argument (formats,
 * sizes, bounds, aliasing) before calling a kernel, so kernels assume valid input and never fail,
 * except the few that allocate scratch memory and return -1 when malloc fails.
 *
 * Float kernels are written once over an element type: each family file (gemm.c, unary.c, ...)
 * includes itself twice with GC_T = float / double, GC_SFX = f32 / f64 and GC_M(fn) naming the
 * matching <math.h> function (expf / exp).  GC_FN(name) appends the suffix: gc_unary_f32.
 */
#ifndef GPUCORE_KERNELS_H
#define GPUCORE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#define GC_MAX_DIMS 8

/* Op codes: cpu/opcodes.def is the only place their numbers are written.  Exported to Python as
 * UNARY_*, BINARY_*, REDUCE_* and the table OPCODES (cpu/python/module.c). */
enum {
#define GC_UNARY(NAME, name, code) GC_UNARY_##NAME = code,
#include "opcodes.def"
#undef GC_UNARY
    GC_UNARY_NONE = -1, /* no op: gemm_ex's act for "no activation" */
};
enum {
#define GC_BINARY(NAME, name, code, kind) GC_BINARY_##NAME = code,
#include "opcodes.def"
#undef GC_BINARY
};
enum {
#define GC_REDUCE(NAME, name, code) GC_REDUCE_##NAME = code,
#include "opcodes.def"
#undef GC_REDUCE
};
enum {
#define GC_SPECIAL(NAME, name, code) GC_SPECIAL_##NAME = code,
#include "opcodes.def"
#undef GC_SPECIAL
};
enum {
#define GC_SPECIAL2(NAME, name, code) GC_SPECIAL2_##NAME = code,
#include "opcodes.def"
#undef GC_SPECIAL2
};

/* The number of codes of each family (codes are 0 .. count-1). */
enum {
    GC_UNARY_COUNT = 0
#define GC_UNARY(NAME, name, code) +1
#include "opcodes.def"
#undef GC_UNARY
};
enum {
    GC_BINARY_COUNT = 0
#define GC_BINARY(NAME, name, code, kind) +1
#include "opcodes.def"
#undef GC_BINARY
};
enum {
    GC_REDUCE_COUNT = 0
#define GC_REDUCE(NAME, name, code) +1
#include "opcodes.def"
#undef GC_REDUCE
};
enum {
    GC_SPECIAL_COUNT = 0
#define GC_SPECIAL(NAME, name, code) +1
#include "opcodes.def"
#undef GC_SPECIAL
};
enum {
    GC_SPECIAL2_COUNT = 0
#define GC_SPECIAL2(NAME, name, code) +1
#include "opcodes.def"
#undef GC_SPECIAL2
};

/* Each family's codes are exactly 0 .. count-1, each once (kernels and name tables are indexed
 * by them): the set bits of the codes must be the count lowest bits. */
_Static_assert((0
#define GC_UNARY(NAME, name, code) | (1ull << (code))
#include "opcodes.def"
#undef GC_UNARY
                ) == (1ull << GC_UNARY_COUNT) - 1,
               "opcodes.def: the GC_UNARY codes must be 0 .. count-1, each once");
_Static_assert((0
#define GC_BINARY(NAME, name, code, kind) | (1ull << (code))
#include "opcodes.def"
#undef GC_BINARY
                ) == (1ull << GC_BINARY_COUNT) - 1,
               "opcodes.def: the GC_BINARY codes must be 0 .. count-1, each once");
_Static_assert((0
#define GC_REDUCE(NAME, name, code) | (1ull << (code))
#include "opcodes.def"
#undef GC_REDUCE
                ) == (1ull << GC_REDUCE_COUNT) - 1,
               "opcodes.def: the GC_REDUCE codes must be 0 .. count-1, each once");
_Static_assert((0
#define GC_SPECIAL(NAME, name, code) | (1ull << (code))
#include "opcodes.def"
#undef GC_SPECIAL
                ) == (1ull << GC_SPECIAL_COUNT) - 1,
               "opcodes.def: the GC_SPECIAL codes must be 0 .. count-1, each once");
_Static_assert((0
#define GC_SPECIAL2(NAME, name, code) | (1ull << (code))
#include "opcodes.def"
#undef GC_SPECIAL2
                ) == (1ull << GC_SPECIAL2_COUNT) - 1,
               "opcodes.def: the GC_SPECIAL2 codes must be 0 .. count-1, each once");

/* Comparisons (kind CMP) write bool bytes (0 / 1); the arithmetic ops (ARITH) the inputs' type. */
#define GC_BINARY_KIND_ARITH 0
#define GC_BINARY_KIND_CMP 1
static inline int gc_binary_writes_bool(int op)
{
    switch (op) {
#define GC_BINARY(NAME, name, code, kind) case GC_BINARY_##NAME: return GC_BINARY_KIND_##kind;
#include "opcodes.def"
#undef GC_BINARY
    default: return 0;
    }
}

/* The activations (opcodes.def's GC_ACT): the unary ops with a backward kernel and a GEMM
 * epilogue.  gc_unary_is_act is also true for GC_UNARY_NONE (gemm_ex without activation). */
static inline int gc_unary_is_act(int op)
{
    switch (op) {
#define GC_ACT(NAME, name, code) case GC_UNARY_##NAME:
#include "opcodes.def"
#undef GC_ACT
        return 1;
    default: return 0;
    }
}

static inline int gc_unary_has_backward(int op)
{
    return op != GC_UNARY_NONE && gc_unary_is_act(op);
}

/* An n-d iteration space shared by several operands, already broadcast and collapsed:
 * shape[d] >= 1 for every d < ndim (ndim >= 1), stride[o][d] is operand o's stride in ELEMENTS
 * (0 for a broadcast dimension, may be negative).  The operand order is defined per kernel. */
typedef struct {
    int ndim;
    ptrdiff_t shape[GC_MAX_DIMS];
    ptrdiff_t stride[4][GC_MAX_DIMS];
} gc_iter;
/* Drops size-1 dims and merges dims that are contiguous for every operand (every shape > 0;
 * the result has ndim >= 1).  Used by the bindings (cpu/python) and the C API (cpu/capi). */
void gc_iter_collapse(gc_iter *it, int nops);

/* Advances the multi-index idx over the outer dimensions [0, ndim-1) of it, moving the element
 * offsets off[0..nops) along; returns 0 once every outer index has been visited. */
static inline int gc_iter_next(const gc_iter *it, ptrdiff_t *idx, ptrdiff_t *off, int nops)
{
    for (int d = it->ndim - 2; d >= 0; d--) {
        if (++idx[d] < it->shape[d]) {
            for (int o = 0; o < nops; o++)
                off[o] += it->stride[o][d];
            return 1;
        }
        idx[d] = 0;
        for (int o = 0; o < nops; o++)
            off[o] -= it->stride[o][d] * (it->shape[d] - 1);
    }
    return 0;
}

/* Convolution geometry for im2col / col2im; oh, ow >= 1 computed by the caller. */
typedef struct {
    ptrdiff_t n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
} gc_conv;

/* max_pool2d geometry over [planes, h, w] -> [planes, oh, ow]; oh, ow >= 1 from the caller. */
typedef struct {
    ptrdiff_t planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
} gc_pool2d;

/* grid_sample (grid_sample.c): n images of c channels over an input of nd = 2 ([h, w], d = 1)
 * or 3 ([d, h, w]) spatial dims, sampled at p points each (grid [n, p, nd], out [n, c, p]);
 * mode and pad are PyTorch's interpolation and padding modes, align its align_corners. */
enum { GC_GRID_BILINEAR = 0, GC_GRID_NEAREST = 1, GC_GRID_BICUBIC = 2 };
enum { GC_GRID_ZEROS = 0, GC_GRID_BORDER = 1, GC_GRID_REFLECTION = 2 };
typedef struct {
    ptrdiff_t n, c, d, h, w, p;
    int nd, mode, pad, align;
} gc_grid;

/* ctc_loss (ctc.c): t time steps, n sequences, c classes, s the longest target (log_alpha /
 * log_beta rows of 2 s + 1), blank's class, zero_inf = zero_infinity. */
typedef struct {
    ptrdiff_t t, n, c, s, blank;
    int zero_inf;
} gc_ctc;

/* Scaled dot-product attention (attention.c) over 4-d views of any element strides (0 for a
 * broadcast dimension, negative allowed): q [B, H, Sq, D], k [B, H, Skv, D], v [B, H, Skv, Dv],
 * out [B, H, Sq, Dv] (its elements distinct and apart from the inputs'), and the mask broadcast
 * to [B, H, Sq, Skv] by its strides:
 *   out[b, h, i] = sum_j softmax_j(scale * q[b, h, i] . k[b, h, j] + mask(b, h, i, j)) v[b, h, j]
 * mask_kind GC_ATTN_MASK_NONE, _FLOAT (T values added to the scores) or _BOOL (bytes: 0 = masked
 * out, -inf; else kept; PyTorch SDPA's bool mask); causal: query i attends keys j <= i only (top
 * left aligned, PyTorch's is_causal), combined with the mask when both are given.  A row whose
 * scores are all -inf (every key masked, or Skv == 0) gives 0, as PyTorch's SDPA; a NaN or +inf
 * score gives NaN.  algo: GC_ATTN_AUTO, _STANDARD (a block of query rows against every key, the
 * score rows in per-thread scratch) or _TILED (online softmax over key blocks).  hg: query heads
 * per key/value head (grouped-query attention: head h reads k and v of head h / hg, whose
 * H / hg heads k and v then hold; 0 or 1 = one each). */
enum { GC_ATTN_MASK_NONE = 0, GC_ATTN_MASK_FLOAT = 1, GC_ATTN_MASK_BOOL = 2 };
enum { GC_ATTN_AUTO = 0, GC_ATTN_STANDARD = 1, GC_ATTN_TILED = 2 };
typedef struct {
    ptrdiff_t b, h, sq, skv, d, dv;
    /* element strides, dimension order [B, H, S, D] (mask: [B, H, Sq, Skv]) */
    ptrdiff_t qs[4], ks[4], vs[4], os[4], ms[4];
    int mask_kind, causal, algo;
    double scale;
    ptrdiff_t hg;
    ptrdiff_t gs[4]; /* the backward's gradient of out: element strides, like os */
} gc_attn;

/* A GEMM operand packed once (pack.c) in the layout the blocked GEMM's micro-kernel reads, so
 * that gemm and conv2d_forward skip packing it on every call.  Side A packs op(A) (m x k), side
 * B op(B) (k x n); f is the free dimension (m or n).  The panels cut f into strips of w (the
 * micro-kernel's MR when the operand feeds its rows, NR when it feeds its columns) and K into
 * the blocks gc_gemm_kc gives: element (f, p) lies at
 *     data[pc * npan * w + (f / w) * w * kb + (p - pc) * w + f % w]
 * for the K block [pc, pc + kb) holding p (npan = ceil(f / w); zero past f).  swap = 0 feeds the
 * operand to its own side of the register tile (A: rows, B: columns); swap = 1 to the other one,
 * the product then running as C^T = op(B)^T op(A)^T (what gemm does on its own when that wastes
 * less of the tile).  Packing applies no alpha. */
typedef struct {
    void *data; /* 64-byte aligned, elems elements of the kind */
    ptrdiff_t rows, cols, f, k, kc, npan, elems;
    int side;  /* 0: A, 1: B */
    int trans; /* the source's layout: trans_a / trans_b of the calls */
    int swap;
    int w;     /* panel width (mr or nr) */
    int isa;   /* gc_isa.isa at packing */
    char kind; /* 'f' or 'd' */
    /* A virtual operand (data NULL, never from gemm_pack): fill(fill_ctx, dst, pc, kb, f0, nf)
     * writes the panels of the K rows [pc, pc + kb) and free indices [f0, f0 + nf) (f0 a
     * multiple of w) to dst, panel f0/w + q at dst + q*w*kb, as packing lays them out (zero
     * past f); called by any thread, concurrently.  conv.c's columns are one. */
    void (*fill)(const void *fill_ctx, void *dst, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t f0,
                 ptrdiff_t nf);
    const void *fill_ctx;
    /* swap 2 only: the untransformed weight [o, c, 3, 3] where its owner keeps it (constant, alive
     * as long as this), set before packing; then data holds U alone and elems counts U alone.
     * NULL: a copy follows U in data (gc_winograd_raw). */
    const void *raw;
} gc_packed;

/* Fills every field of p but data (dims, panel width and K block for the ISA in use); -1 when
 * the element count overflows, -2 for a swap 2 (conv_winograd.c's transformed weight, whose
 * panels are laid out as it says) that is not float32 side A, trans 0, cols a multiple of 9.
 * rows, cols >= 0. */
int gc_gemm_pack_init(gc_packed *p, char kind, int side, ptrdiff_t rows, ptrdiff_t cols,
                      int trans, int swap);
/* rows of col gathered per step of gc_im2col_pack (im2col.c) */
#define GC_PACK_ROWS 16

/* A convolution's epilogue on C [m, ld] (rows: output channels) after its product, fused where
 * the tile is still in cache (gemm.c, conv_direct.c, conv_winograd.c):
 *   v = C[i][j] (+ rb[i]) (+ res[i*ld + j]), then v <= 0 ? 0 : v when relu,
 * each operation rounded on its own: the bits of conv (+ bias), then an add node, then a relu
 * node.  rb, res: NULL for none, the C's type; res apart from C. */
typedef struct {
    const void *rb, *res;
    int relu;
} gc_epi;


/* The source of a virtual packed col (gc_im2col_fill_*): one image x (its type's), its geometry
 * (n ignored) and the panel width. */
typedef struct {
    const void *x;
    const gc_conv *p;
    int w;
} gc_im2col_src;

/* conv.c's per-thread buffers (slot < GC_CONV_SCRATCH_SLOTS; apart from gc_scratch, which the
 * GEMM called on the same thread uses): slot i is at least `bytes` (64-byte aligned) until the
 * next call with slot i on this thread; NULL if malloc fails.  Slots: 0 columns, 1 column
 * gradients, 2 weight-gradient partials (calling thread), 3 the padded image (conv_direct.c)
 * or padded input rows (conv_winograd.c), 4 conv_direct.c's packed weight and 5 its offset
 * tables (calling thread), 6 conv_winograd.c's transformed
 * weight, 7 its weight unpacked from another layout and 8 its transformed tiles (calling thread). */
#define GC_CONV_SCRATCH_SLOTS 9
void *gc_conv_scratch(int i, size_t bytes);
/* conv.c: the forward drivers' parallel loop.  Units 0 .. nunits-1 are claimed from a shared
 * counter by up to nt threads of a region (gc_region); each thread first takes its scratch,
 * gc_conv_scratch(slot, bytes) (slot < 0: none, NULL), then runs unit(job, scratch, u, prev) per
 * unit it claims, prev the unit it ran before on that scratch (-1 for its first: a unit may reuse
 * what the previous one left there, as conv_direct.c's padded image).  A thread whose scratch
 * allocation fails runs none of its units; then -1, else 0.  Each unit writes its own outputs,
 * so the bits never depend on which thread claims it. */
typedef void (*gc_conv_unit_fn)(void *job, void *scratch, long u, long prev);
int gc_conv_claim_units(void *job, long nunits, int nt, int slot, size_t bytes,
                        gc_conv_unit_fn unit);
/* conv_direct.c: 1 when float32 conv2d_forward of this geometry takes the direct path (the rule;
 * GPUCORE_CONV=im2col / direct forces a path where both apply), and the direct path itself
 * (w, or pw when w is NULL: the weight [o, c, kh, kw] or its gemm_pack; bias may be NULL); -1
 * when a scratch allocation fails. */
int gc_conv2d_direct_use(const gc_conv *p, ptrdiff_t o);
/* 1 when s, less surrounding white space, is word in any case (GPUCORE_CONV's values, as
 * gpucore/config.py reads them; conv_direct.c) */
int gc_env_is(const char *s, const char *word);
/* conv_winograd.c: whether the geometry is Winograd F(4x4, 3x3)'s (3x3, stride 1, dilation 1);
 * whether float32 conv2d_forward takes it (the rule, of the geometry alone; GPUCORE_CONV=winograd
 * forces it where it fits, im2col / direct force it off); the path itself (a weight pw packed with swap 2 is read in place,
 * another packed layout or w is transformed per call; -1 when a scratch allocation fails);
 * the transformed weight's size (-1: overflow) and the transform of w [o, c, 3, 3]. */
int gc_conv2d_winograd_fits(const gc_conv *p, ptrdiff_t o);
int gc_conv2d_winograd_use(const gc_conv *p, ptrdiff_t o);
int gc_conv2d_winograd_f32(const float *x, const float *w, const gc_packed *pw,
                           const float *bias, const gc_epi *e, float *out, const gc_conv *p,
                           ptrdiff_t o);
ptrdiff_t gc_winograd_weight_elems(ptrdiff_t o, ptrdiff_t c);
/* packing: 0 per call (U in cache for the GEMMs), 1 packed with the raw weight copied after U,
 * 2 packed without it (pw->raw); packed, U is written with non-temporal stores */
void gc_winograd_weight(const float *w, float *U, ptrdiff_t o, ptrdiff_t c, int packing);
/* the untransformed weight [o, c, 3, 3] of a swap 2 pack (pw->raw, else the copy after U; a pack
 * with raw set holds U's elements alone: gc_winograd_weight_elems less o*c*9); whether x[0..n) holds no
 * inf or NaN (Winograd's transforms would spread one over a whole tile: conv.c checks) */
const float *gc_winograd_raw(const gc_packed *pw);
int gc_conv_input_finite(const float *x, ptrdiff_t n);
int gc_conv2d_direct_f32(const float *x, const float *w, const gc_packed *pw, const float *bias,
                         const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o);
/* gemm.c's small-m path (B read where it lies, not packed) takes products of up to this many
 * rows of A with a B stored k x n (measured beside gemm_dispatch.h's GC_GEMV_MAX_M_T);
 * conv_pw.c leaves 1x1 convolutions of that many output channels or fewer to it (1.3 - 3x
 * faster than the pointwise tile: 64 -> 1 .. 24 channels at 56 x 56, 256 -> 8 at 14 x 14, one
 * thread). */
#define GC_GEMV_MAX_M_N 24
/* conv_pw.c: 1 when float32 conv2d_forward of this geometry takes the pointwise path (a 1x1
 * convolution without padding, any stride, on an ISA with a pointwise micro-kernel, more than
 * GC_GEMV_MAX_M_N output channels; GPUCORE_CONV=im2col / direct force it off, pointwise on), 2
 * when it takes it through its pixels x channels tiles (pointwise_t forces those), and the path
 * itself (w, or pw when w is NULL: its gemm_pack side A, swap 0, or swap 1 for the pixels x
 * channels tiles; a pw packed otherwise returns 1 untouched: the caller's other paths take it);
 * -1 when a scratch allocation fails. */
/* conv_direct_lanes.c: 1 when float32 conv2d_forward of this geometry, on the direct path,
 * runs the pixels x channels tile along output rows (few input channels; GPUCORE_CONV=direct_t
 * forces it where the ISA has the tile), and that path (w, or pw: gemm_pack side A, swap 1, the
 * direct path's layout; another returns 1 untouched); -1 when a scratch allocation fails. */
int gc_conv2d_dlanes_use(const gc_conv *p, ptrdiff_t o);
int gc_conv2d_dlanes_f32(const float *x, const float *w, const gc_packed *pw, const float *bias,
                         const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o);
/* conv_c1.c: 1 when float32 conv2d_forward of this geometry (w unpacked) runs the few input
 * channels direct path (pixels along the vector lanes; GPUCORE_CONV=direct_c1 forces it where
 * it applies), and that path; -1 when a scratch allocation fails. */
int gc_conv2d_c1_use(const gc_conv *p, ptrdiff_t o);
int gc_conv2d_c1_f32(const float *x, const float *w, const float *bias, const gc_epi *e,
                     float *out, const gc_conv *p, ptrdiff_t o);
/* ... and with relu (relu != 0) and max_pool2d's pass over each image's o planes (pool: the
 * geometry over one image's planes, h = oh, w = ow of p; planes ignored) into vals and idx
 * (NULL: values alone), the output kept in the thread's buffer: 1 where the path does not apply
 * or declines (fewer images than threads, an image's buffer beyond half the L2: conv_c1.c;
 * nothing written), -1 when a scratch allocation fails, else 0. */
int gc_conv2d_c1_pool_f32(const float *x, const float *w, const float *bias, int relu,
                          float *vals, int64_t *idx, const gc_conv *p, ptrdiff_t o,
                          const gc_pool2d *pool);
int gc_conv2d_pw_use(const gc_conv *p, ptrdiff_t o);
int gc_conv2d_pw_f32(const float *x, const float *w, const gc_packed *pw, const float *bias,
                     const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o);
/* The backward's direct path (weight gradient; input gradient at stride 1, enough channels):
 * for each gradient that gc_conv2d_direct_backward_use says so of (gx_rule 0: the weight and
 * bias gradients, 1: the input gradient), conv.c's gc_conv2d_backward_f32 calls it with its
 * chunking and its partials buffer (part: nchunks gw partials [o, c*kh*kw], then nchunks gb
 * partials [o]; gw, gb here only say which are wanted, gb only with gw); gx is written whole.
 * The others go through conv.c's GEMM path. */
int gc_conv2d_direct_backward_use(const gc_conv *p, ptrdiff_t o, int gx_rule);
/* conv_wtaps.c: 1 when float32 conv2d_backward's weight (and bias) gradient of this geometry
 * takes the few-taps path (stride 1, c*kh*kw <= 16, or <= 27 with few output channels, an ISA
 * with its kernel; the rule is there; GPUCORE_CONV=im2col forces it off), and that path: the partials at part as gc_conv2d_direct_backward_f32's (gb
 * NULL: no bias gradient; gw unused); -1 when a scratch allocation fails. */
int gc_conv2d_wtaps_use(const gc_conv *p, ptrdiff_t o);
int gc_conv2d_wtaps_f32(const float *x, const float *g, float *gw, float *gb, const gc_conv *p,
                        ptrdiff_t o, ptrdiff_t chunk, ptrdiff_t nchunks, float *part);
int gc_conv2d_direct_backward_f32(const float *x, const float *w, const float *g, float *gx,
                                  float *gw, float *gb, const gc_conv *p, ptrdiff_t o,
                                  ptrdiff_t chunk, ptrdiff_t nchunks, float *part);

/* Recurrent layers (recurrent.c): one layer, one direction, the whole sequence in one call.
 * mode: GC_RNN_TANH / GC_RNN_RELU (1 gate), GC_RNN_LSTM (4 gates i, f, g, o), GC_RNN_GRU (3
 * gates r, z, n), PyTorch's gate order.  xg [T, B, G*H] is the input projection of every step
 * (x W_ih^T + b_ih, one GEMM by the caller); the kernel adds h W_hh^T (+ b_hh) per step.  bs
 * (NULL = B every step) gives the rows active at each step (a packed sequence: non-increasing
 * in t, each in [0, B]); inactive rows keep their state and output 0.  reverse runs t from
 * T - 1 down to 0. */
enum { GC_RNN_TANH = 0, GC_RNN_RELU = 1, GC_RNN_LSTM = 2, GC_RNN_GRU = 3 };
typedef struct {
    int mode, reverse;
    ptrdiff_t t, b, h;
    const int64_t *bs;
} gc_rnn;
/* gates per mode (1, 1, 4, 3) and the width per row of the kernel's extra record (LSTM: c_prev
 * and tanh(c_t), 2H; GRU: h W_hn^T + b_hn, H; RNN: none) */
int gc_rnn_gates(int mode);
ptrdiff_t gc_rnn_extra(int mode, ptrdiff_t h);

#define GC_CAT_(a, b) a##_##b
#define GC_CAT(a, b) GC_CAT_(a, b)
#define GC_FN(name) GC_CAT(name, GC_SFX)

#define GC_DECLARE_FLOAT_KERNELS(T, S)                                                             \
    /* C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch; returns -1 if scratch malloc fails */ \
    int gc_gemm_##S(const T *a, const T *b, T *c, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n,       \
                    ptrdiff_t k, int trans_a, int trans_b, T alpha, T beta, ptrdiff_t sa,          \
                    ptrdiff_t sb, ptrdiff_t sc);                                                   \
    /* gemm with a fused epilogue: C_i = act(alpha op(A_i) op(B_i) + beta C_i + bias) where bias   \
     * (NULL or n values) adds per column and act is -1 or GC_UNARY_RELU / SIGMOID / TANH / GELU / \
     * GELU_TANH; returns -1 if scratch malloc fails */                                            \
    int gc_gemm_ex_##S(const T *a, const T *b, T *c, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n,    \
                       ptrdiff_t k, int trans_a, int trans_b, T alpha, T beta, ptrdiff_t sa,       \
                       ptrdiff_t sb, ptrdiff_t sc, const T *bias, int act);                        \
    /* gemm_ex with pre-packed operands: pa / pb NULL (a / b read as in gemm_ex) or packed for  \
     * side A / B of this call (dims, trans and ISA checked by the caller; a / b are then unused  \
     * and their batch stride is 0).  Bitwise the result of gemm_ex on the unpacked operands. */ \
    int gc_gemm_px_##S(const T *a, const gc_packed *pa, const T *b, const gc_packed *pb, T *c,    \
                       ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a,       \
                       int trans_b, T alpha, T beta, ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc,    \
                       const T *bias, int act);                                                   \
    /* the convolutions' GEMM: gemm_px (batch 1, alpha 1) followed by the epilogue e on C (NULL: \
     * none; see gc_epi), never on the narrow-N path (the direct kernels give the blocked bits) */ \
    int gc_gemm_pxe_##S(const T *a, const gc_packed *pa, const T *b, const gc_packed *pb, T *c,   \
                        ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, T beta,  \
                        const gc_epi *e);                                                         \
    /* pack.c: p->data := x (stored as p->trans says) packed */                                 \
    void gc_gemm_pack_##S(const T *x, const gc_packed *p);                                        \
    /* out may equal x exactly */                                                                  \
    void gc_unary_##S(int op, const T *x, T *out, ptrdiff_t n);                                    \
    void gc_unary_backward_##S(int op, const T *grad, const T *saved, T *out, ptrdiff_t n);        \
    /* relu_backward of grad [m, n] (saved s) and its rows summed into bsum [n], one pass */    \
    void gc_relu_backward_bias_##S(const T *grad, const T *s, T *out, T *bsum, ptrdiff_t m,      \
                                   ptrdiff_t n);                                                  \
    /* operands of it: 0 = a, 1 = b, 2 = out (C-contiguous: innermost stride 1); out is T for      \
     * arithmetic ops, unsigned char (0 / 1) for comparisons */                                    \
    void gc_binary_##S(int op, const gc_iter *it, const T *a, const T *b, void *out);              \
    /* out is T [outer, inner] for SUM/MEAN/MAX/MIN, int64_t for ARGMAX/ARGMIN; n >= 1 except      \
     * for SUM and MEAN */                                                                         \
    int gc_reduce_##S(int op, const T *x, void *out, ptrdiff_t outer, ptrdiff_t n,                 \
                      ptrdiff_t inner); /* -1 if scratch malloc fails */                           \
    void gc_softmax_##S(const T *x, T *out, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner,         \
                        int log_softmax);                                                          \
    void gc_softmax_backward_##S(const T *grad, const T *y, T *out, ptrdiff_t outer, ptrdiff_t n,  \
                                 ptrdiff_t inner, int log_softmax);                                \
    /* targets already validated: each is ignore_index or in [0, c) */                             \
    void gc_cross_entropy_forward_##S(const T *logits, const int64_t *target, T *loss, T *lse,     \
                                      ptrdiff_t n, ptrdiff_t c, int64_t ignore_index);             \
    void gc_cross_entropy_backward_##S(const T *logits, const int64_t *target, const T *lse,       \
                                       const T *grad_loss, T *out, ptrdiff_t n, ptrdiff_t c,       \
                                       int64_t ignore_index);                                      \
    void gc_im2col_##S(const T *x, T *col, const gc_conv *p);                                      \
    void gc_col2im_##S(const T *col, T *x, const gc_conv *p);                                      \
    /* one image's (p->n ignored) col as the panels of P (side B of c*kh*kw x oh*ow, trans 0,    \
     * any swap; P->data written); rows: GC_PACK_ROWS * oh*ow elements of scratch */              \
    void gc_im2col_pack_##S(const T *x, const gc_packed *P, T *rows, const gc_conv *p);            \
    /* gc_packed's fill for one image's col: ctx is a gc_im2col_src (T = this type) */            \
    void gc_im2col_fill_##S(const void *ctx, void *dst, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t f0, \
                            ptrdiff_t nf);                                                        \
    /* fused conv2d, groups 1, w [o, c, kh, kw] (conv.c); bias, gx, gw, gb may be NULL; -1 if   \
     * scratch malloc fails */                                                                     \
    int gc_conv2d_forward_##S(const T *x, const T *w, const T *bias, T *out, const gc_conv *p,     \
                              ptrdiff_t o);                                                        \
    /* the same with the weight packed (side A, rows o, cols c*kh*kw, trans 0) when pw != NULL */ \
    int gc_conv2d_forward_px_##S(const T *x, const T *w, const gc_packed *pw, const T *bias,      \
                                 T *out, const gc_conv *p, ptrdiff_t o);                          \
    /* the same followed by a residual add (res: out's shape, apart from out; NULL: none) and    \
     * relu (the bits of conv2d_forward, then an add, then a relu) */                           \
    int gc_conv2d_forward_ex_##S(const T *x, const T *w, const gc_packed *pw, const T *bias,      \
                                 const T *res, int relu, T *out, const gc_conv *p, ptrdiff_t o);  \
    int gc_conv2d_backward_##S(const T *x, const T *w, const T *g, T *gx, T *gw, T *gb,            \
                               const gc_conv *p, ptrdiff_t o);                                     \
    /* maxpool.c; the backward returns -1 when an index lies outside its plane */                  \
    void gc_max_pool2d_##S(const T *x, T *vals, int64_t *idx, const gc_pool2d *p);                 \
    int gc_max_pool2d_backward_##S(const T *g, const int64_t *idx, T *gx, const gc_pool2d *p);   \
    /* the same with g masked by vals > 0 (the pooled values of a relu: relu_backward fused; \
     * vals NULL: none); -2: out of memory */                                                     \
    int gc_max_pool2d_relu_backward_##S(const T *g, const int64_t *idx, const T *vals, T *gx,     \
                                        const gc_pool2d *p);                                      \
    /* grid_sample.c: out [n, c, p] sampled from x [n, c, *in] at grid [n, p, nd]; backward: \
     * gx (x's shape, or NULL) and ggrid (grid's shape, or NULL) from g [n, c, p] */              \
    void gc_grid_sample_##S(const T *x, const T *grid, T *out, const gc_grid *p);                 \
    void gc_grid_sample_backward_##S(const T *g, const T *x, const T *grid, T *gx, T *ggrid,      \
                                     const gc_grid *p);                                           \
    /* ctc.c: nll [n] and log_alpha [n, t, 2 s + 1] of log_probs [t, n, c]; the backward's   \
     * grad [t, n, c] (log_beta: [n, t, 2 s + 1] of scratch), times gout [n] */                    \
    void gc_ctc_loss_##S(const T *lp, const int64_t *tg, const int64_t *off, const int64_t *il,   \
                         const int64_t *tl, T *nll, T *la, const gc_ctc *p);                       \
    void gc_ctc_loss_backward_##S(const T *gout, const T *lp, const int64_t *tg,                 \
                                  const int64_t *off, const int64_t *il, const int64_t *tl,      \
                                  const T *nll, const T *la, T *lb, T *grad, const gc_ctc *p);    \
    /* avgpool.c: avg_pool2d of x [planes, h, w] into y [planes, oh, ow] (dilation 1; divisor > 0 \
     * overrides PyTorch's window count, include_pad = count_include_pad), and its backward      \
     * gx [planes, h, w] from g [planes, oh, ow] */                                              \
    void gc_avg_pool2d_##S(const T *x, T *y, const gc_pool2d *p, int include_pad,                \
                           ptrdiff_t divisor);                                                    \
    void gc_avg_pool2d_backward_##S(const T *g, T *gx, const gc_pool2d *p, int include_pad,      \
                                    ptrdiff_t divisor);                                           \
    /* norm.c: layer_norm over the rows of contiguous [rows, n]: out = (x - mean) /             \
     * sqrt(var + eps) * weight + bias (biased variance); weight, bias NULL or n values; out may \
     * equal x exactly */                                                                          \
    void gc_layer_norm_##S(const T *x, const T *weight, const T *bias, T *out, ptrdiff_t rows,    \
                           ptrdiff_t n, double eps);                                               \
    /* norm.c, eager row norms (layer_norm, rms_norm, group_norm) over contiguous [rows,       \
     * cg * inner], row r's channel block starting at (r % groups) * cg (weight / bias index), \
     * rms: no centering; the row statistics mean / rstd (rows values each, or NULL); backward: \
     * gx (or NULL), gw / gb (groups * cg values each, or NULL: then part unused) with part >=  \
     * ceil(rows / chunk) * 2 * groups * cg doubles of scratch for the per-block sums */        \
    void gc_norm_rows_fwd_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,        \
                              ptrdiff_t rows, ptrdiff_t groups, ptrdiff_t cg, ptrdiff_t inner,   \
                              double eps, int rms);                                              \
    void gc_norm_rows_bwd_##S(const T *x, const T *w, const T *mean, const T *rstd, const T *g,  \
                              T *gx, T *gw, T *gb, double *part, ptrdiff_t rows,                 \
                              ptrdiff_t groups, ptrdiff_t cg, ptrdiff_t inner, ptrdiff_t chunk,  \
                              int rms);                                                          \
    /* norm_batch.c: batch_norm over dim 1 of contiguous [n, c, inner]: training (batch stats,  \
     * rmean / rvar updated in place when not NULL) or eval (rmean / rvar read); mean / rstd    \
     * (c values) written for the backward, which gives gx / gw / gb (each may be NULL) */      \
    void gc_batch_norm_fwd_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,       \
                               T *rmean, T *rvar, ptrdiff_t n, ptrdiff_t c, ptrdiff_t inner,     \
                               double eps, double momentum, int training);                       \
    void gc_batch_norm_bwd_##S(const T *x, const T *w, const T *mean, const T *rstd, const T *g, \
                               T *gx, T *gw, T *gb, ptrdiff_t n, ptrdiff_t c, ptrdiff_t inner,   \
                               int training);                                                    \
    /* attention.c: out = softmax(q k^T * scale + mask [causal]) v over strided 4-d views (see     \
     * gc_attn); -1 if scratch malloc fails */                                                     \
    int gc_attention_##S(const T *q, const T *k, const T *v, const void *mask, T *out,             \
                         const gc_attn *p);                                                        \
    /* the same, also writing each row's logsumexp of its scaled, masked scores to lse            \
     * (contiguous [B, H, Sq]; +inf for a row with every score -inf, NaN for a NaN row): what the \
     * backward recomputes the probabilities from */                                               \
    int gc_attention_lse_##S(const T *q, const T *k, const T *v, const void *mask, T *out,         \
                             T *lse, const gc_attn *p);                                            \
    /* attention_backward.c: dq, dk, dv (contiguous [B, H, Sq, D], [B, H / hg, Skv, D],           \
     * [B, H / hg, Skv, Dv], overwritten) of out = attention(q, k, v) for the gradient g of out   \
     * (any element strides, unit stride along D / Dv for q, k, v, out and g) from the forward's  \
     * out and lse (FlashAttention-2: the probabilities recomputed per tile); -1 if scratch       \
     * malloc fails */                                                                             \
    int gc_attention_backward_##S(const T *q, const T *k, const T *v, const void *mask,          \
                                  const T *out, const T *g, const T *lse, T *dq, T *dk, T *dv,    \
                                  const gc_attn *p);                                        \
    /* recurrent.c: y [T + 1 (+ 1 for LSTM), B, H] = the outputs, then h_n (then c_n); gates     \
     * [T, B, G*H] (activated), hprev [T, B, H] (the state each step read), extra [T, B, E] saved \
     * for the backward; bhh, c0 may be NULL (c0 LSTM only); -1 if scratch malloc fails */        \
    int gc_rnn_forward_##S(const T *xg, const T *whh, const T *bhh, const T *h0, const T *c0,      \
                           T *y, T *gates, T *hprev, T *extra, const gc_rnn *p);                  \
    /* gy like y; dxg like xg; dwhh [G*H, H]; dbhh [G*H] or NULL; dh0, dc0 [B, H] (dc0 LSTM) */   \
    int gc_rnn_backward_##S(const T *gy, const T *gates, const T *hprev, const T *extra,           \
                            const T *whh, T *dxg, T *dwhh, T *dbhh, T *dh0, T *dc0,                \
                            const gc_rnn *p);

/* histogram.c's ways of finding a coordinate's bin (see there) */
enum { GC_HIST_SEARCH = 0, GC_HIST_LINEAR = 1, GC_HIST_HISTC = 2 };

#define GC_DECLARE_SOLVE_KERNELS(T, S)                                                            \
    /* trsm.c: op(A_i) X_i = B_i in place in x (batch items of m x n at i*m*n, holding B_i on      \
     * entry) for A_i m x m at element i*sa of a (row-major; its upper or lower triangle read;     \
     * op(A) = A^T when trans; unit: the diagonal taken as ones); -1 if scratch malloc fails */    \
    int gc_trsm_##S(const T *a, T *x, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n, ptrdiff_t sa,    \
                    int upper, int trans, int unit);                                              \
    /* trsm.c: P A = L U of each n x n matrix of a in place (L unit lower, U upper), perm (NULL \
     * or n per matrix: row i of P A is row perm[i] of A) and LAPACK getrf's info (0 or the       \
     * 1-based column of the first zero pivot); -1 if malloc fails */                            \
    int gc_getrf_##S(T *a, int32_t *perm, int32_t *info, ptrdiff_t batch, ptrdiff_t n);         \
    /* histogram.c: hist (prod(nedges[d] - 1) bins, row-major over the dims) of npts points of    \
     * dims coordinates each (x row-major), edges[d] (nedges[d] >= 2 increasing values) stored one \
     * dim after the other in edges, w NULL or npts weights; mode GC_HIST_*; -1 if malloc fails */ \
    int gc_histogram_##S(const T *x, ptrdiff_t npts, ptrdiff_t dims, const T *edges,              \
                         const int64_t *nedges, const T *w, T *hist, int mode);

GC_DECLARE_SOLVE_KERNELS(float, f32)
GC_DECLARE_SOLVE_KERNELS(double, f64)

GC_DECLARE_FLOAT_KERNELS(float, f32)
GC_DECLARE_FLOAT_KERNELS(double, f64)

/* where: operands of it: 0 = cond (bytes), 1 = a, 2 = b, 3 = out (C-contiguous); items of
 * itemsize 1, 2, 4 or 8 bytes. */
void gc_where(const gc_iter *it, const unsigned char *cond, const void *a, const void *b, void *out,
              size_t itemsize);

/* copy: operands of it: 0 = src, 1 = dst; itemsize 1, 2, 4 or 8; src and dst must not overlap
 * unless they are the same elements. */
void gc_copy(const gc_iter *it, const void *src, void *dst, size_t itemsize);

/* Element types of cast, isin and igemm: a binding maps its buffers' formats onto them
 * (fmt_elem), libgpucore its gc_dtype codes. */
typedef enum {
    GC_ELEM_BOOL,
    GC_ELEM_U8,
    GC_ELEM_I8,
    GC_ELEM_I32,
    GC_ELEM_I64,
    GC_ELEM_F32,
    GC_ELEM_F64,
    GC_ELEM_I16,
    GC_ELEM_COUNT
} gc_elem;

/* cast (Tensor.to(dtype)): operands of it: 0 = src of type st, 1 = dst of type dt; src and dst
 * must not overlap.  numpy's unsafe cast as on x86-64: float to int truncates toward zero, and a
 * float outside int32's range (int64's for an int64 dst), NaN or inf gives that type's minimum
 * (which narrower integers then wrap); integers wrap; anything to bool is value != 0. */
void gc_cast(const gc_iter *it, const void *src, gc_elem st, void *dst, gc_elem dt);

/* isin (torch.isin): out[i] = (x[i] is one of test[0..m)) != invert, for n contiguous x of type
 * t (any but BOOL) and m contiguous test elements; scratch holds m elements of t (the sorted
 * test elements; apart from x, test and out).  NaN is never a member, -0.0 equals 0.0.  0, or -1
 * for an unsupported t. */
int gc_isin(gc_elem t, const void *x, ptrdiff_t n, const void *test, ptrdiff_t m, void *scratch,
            unsigned char *out, int invert);

/* igemm: for each batch item i, C_i = A_i @ B_i with A_i (m x k) at element i*sa of a, B_i
 * (k x n) at i*sb of b, C_i (m x n) at i*sc of c, all row-major and contiguous; t one of U8, I8,
 * I16, I32, I64.  Wraps as PyTorch's CPU integer matmul (the exact sum truncated to t); C_i must
 * not overlap A, B or each other.  0, or -1 for an unsupported t. */
int gc_igemm(gc_elem t, const void *a, const void *b, void *c, ptrdiff_t batch, ptrdiff_t m,
             ptrdiff_t n, ptrdiff_t k, ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc);

/* special: out[i] = f(x[i]) for the GC_SPECIAL function op (special.c), n contiguous float32
 * (f64 = 0) or float64 (f64 = 1) elements, computed in double; out may be x itself. */
void gc_special(int op, int f64, const void *x, void *out, ptrdiff_t n);

/* special2: out[i] = f(a[i * sa], b[i * sb]) for the GC_SPECIAL2 function op (special.c), sa and
 * sb 0 (one value broadcast) or 1, n float32 (f64 = 0) or float64 (f64 = 1) outputs; zeta and
 * igamma computed in double, the polynomials in the element type (special_poly.c); out may be a
 * or b itself. */
void gc_special2(int op, int f64, const void *a, ptrdiff_t sa, const void *b, ptrdiff_t sb,
                 void *out, ptrdiff_t n);

/* gather (torch.gather): operands of it (index's shape): 0 = x with stride 0 along the gathered
 * dim, 1 = index (int64), 2 = out; x's element at index k along that dim is k * xd further, for
 * k in [0, nx).  0, or -1 with *bad the first index outside [0, nx) (out partly written). */
int gc_gather(const gc_iter *it, const void *x, ptrdiff_t xd, ptrdiff_t nx, const int64_t *index,
              void *out, size_t itemsize, int64_t *bad);

/* out [n, inner] += rows of src [m, inner] at rows index[i] (negative: from the end), in order
 * of i.  0, or -1 with *bad the first index outside [-n, n) (the rows before it added). */
int gc_index_add_rows_f32(float *out, ptrdiff_t n, ptrdiff_t inner, const int64_t *index,
                          ptrdiff_t m, const float *src, int64_t *bad);
int gc_index_add_rows_f64(double *out, ptrdiff_t n, ptrdiff_t inner, const int64_t *index,
                          ptrdiff_t m, const double *src, int64_t *bad);

/* Philox4x32-10 (Random123): one block. */
void gc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* out[i] = word i % 4 of the block at 64-bit counter offset + i / 4, key = seed. */
void gc_philox_fill(uint64_t seed, uint64_t offset, uint32_t *out, ptrdiff_t n);
void gc_uniform_f32(uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float low, float high);
void gc_normal_f32(uint64_t seed, uint64_t offset, float *out, ptrdiff_t n, float mean, float std);

/* Fused optimizer updates (optim.c): hyper-parameters of one update, as PyTorch names them.
 * Each kernel updates param and its state buffers in place, element by element; the buffers are
 * n elements each and must not overlap one another. */
typedef struct {
    double lr, weight_decay;
    double momentum, dampening; /* SGD; momentum also RMSprop */
    double beta1, beta2;        /* Adam */
    double alpha;               /* RMSprop */
    double eps;                 /* Adam, RMSprop */
    int64_t step;               /* Adam: the step count after this update (>= 1) */
    int nesterov, first;        /* SGD: first = the momentum buffer starts as the gradient */
    int decoupled;              /* Adam: AdamW's decoupled weight decay */
    int maximize;
} gc_optim_hp;

#define GC_DECLARE_OPTIM_KERNELS(T, S)                                                             \
    /* buf: NULL when momentum == 0 */                                                             \
    void gc_sgd_step_##S(T *param, const T *grad, T *buf, ptrdiff_t n, const gc_optim_hp *h);      \
    /* max_exp_avg_sq: NULL unless amsgrad */                                                      \
    void gc_adam_step_##S(T *param, const T *grad, T *exp_avg, T *exp_avg_sq,                      \
                          T *max_exp_avg_sq, ptrdiff_t n, const gc_optim_hp *h);                   \
    /* grad_avg: NULL unless centered; momentum_buffer: NULL when momentum == 0 */                 \
    void gc_rmsprop_step_##S(T *param, const T *grad, T *square_avg, T *grad_avg,                  \
                             T *momentum_buffer, ptrdiff_t n, const gc_optim_hp *h);

GC_DECLARE_OPTIM_KERNELS(float, f32)
GC_DECLARE_OPTIM_KERNELS(double, f64)

/* Multi-tensor ("foreach") updates: one call updates many parameters of one optimizer.  Each item
 * is one parameter's update exactly as the single-tensor kernel's arguments: p (written), g
 * (read), s1..s3 the state buffers in that kernel's order (NULL when absent), n elements, and its
 * own hyper-parameters (the shared ones copied; Adam's step and SGD's first differ per
 * parameter).  `off` is scratch for the driver.  The buffers of all items must be pairwise
 * disjoint, except that gradients may share memory with one another. */
typedef struct {
    void *p;
    const void *g;
    void *s1, *s2, *s3;
    ptrdiff_t n, off;
    gc_optim_hp h;
} gc_optim_item;

enum { GC_OPTIM_SGD, GC_OPTIM_ADAM, GC_OPTIM_RMSPROP };

/* Runs the update `opt` (GC_OPTIM_*) of items[0..k), float32 when f64 == 0 else float64, as one
 * parallel region over the concatenated elements; the same bits as one single-tensor kernel call
 * per item, whatever the thread count. */
void gc_optim_step_multi(int opt, int f64, gc_optim_item *items, ptrdiff_t k);

/* ---- int8 GEMM (qgemm.c) ------------------------------------------------------------------ */

/* Output forms of gc_qgemm, with c = sum_k (a[i, k] - a_zp) * b[k, j] (exact, int32):
 *   I32: c;  F32: v = (float)c * scale[j] (+ bias[j]), relu: v < 0 ? 0 : v;
 *   U8 / S8: q = clamp(rint((float)c * scale[j] (+ bias[j])) + out_zp, lo, hi) in float, then
 *   converted (rint: round half to even); relu raises lo to out_zp.  Each float operation is
 *   rounded on its own (no fused multiply-add), so every ISA gives the same bits. */
enum { GC_QOUT_I32 = 0, GC_QOUT_F32 = 1, GC_QOUT_U8 = 2, GC_QOUT_S8 = 3 };

/* The epilogue of one call: zp = a_zp - the kernel's shift (what its sums must lose per unit of
 * colsum), the per-column scale and bias (NULL: none) already combined by the driver. */
typedef struct {
    int mode, relu;
    int32_t zp;
    const int32_t *colsum;
    const float *scale, *bias;
    float out_zp, lo, hi;
} gc_qepi;

/* Int8 weights B (k x n, int8) packed once for the ISA in use: K padded to a multiple of 8 (kp)
 * and cut into blocks of kc (a multiple of 8; the last block may be shorter), N into panels of
 * nr columns (zero past n); block [pc, pc + kb) holds its npan panels one after the other, nr *
 * kb bytes each, B[p, j] of panel q at data[pc * npan * nr + q * nr * kb + ((p - pc) / ku) * nr *
 * ku + (j % nr) * ku + (p - pc) % ku].  colsum[j] = sum_p B[p, j] follows the panels (at data +
 * panel_bytes, 64-byte aligned).  full: some weight is -128. */
typedef struct {
    int8_t *data;
    int32_t *colsum;
    ptrdiff_t k, n, kp, kc, npan, panel_bytes, bytes;
    int nr, ku, isa, trans, full;
} gc_qpacked;

/* The activation and output arguments of one call (see GC_QOUT_*): a_scale, w_scale[n] and
 * out_scale are finite and > 0 (w_scale unused for I32), bias NULL or n finite values; out_zp and
 * a_zp inside their types' ranges.  ibias (NULL or n values, ONNX's int32 bias of QLinearConv /
 * QGemm): added to the exact int32 sums before anything else (wrapping as int32, as ONNX
 * Runtime's requantization does), so float32(c + ibias[j]) is what the epilogue scales. */
typedef struct {
    int mode, relu, a_signed;
    int32_t a_zp, out_zp;
    float a_scale, out_scale;
    const float *w_scale, *bias;
    const int32_t *ibias;
} gc_qargs;

/* Fills the fields of p but data / colsum for B of k x n (trans: B stored n x k, nn.Linear's
 * weight; else k x n); -1 when the size overflows. */
int gc_qgemm_pack_init(gc_qpacked *p, ptrdiff_t k, ptrdiff_t n, int trans);
/* p->data (p->bytes, 64-byte aligned) := the panels and column sums of w; sets p->full. */
void gc_qgemm_pack(const int8_t *w, gc_qpacked *p);
/* out[i, j] (row stride ldo elements of the mode's type) for i < m, j < B->n from A (m x k bytes,
 * uint8 or int8 as q->a_signed says, row stride lda >= k; m * lda bytes readable, the last row
 * k) and B packed for the ISA in use; k <= GC_QGEMM_MAX_K keeps the int32 sums exact.  -1 when
 * scratch allocation fails. */
#define GC_QGEMM_MAX_K 65536
int gc_qgemm(const uint8_t *a, ptrdiff_t m, ptrdiff_t lda, const gc_qpacked *B, void *out,
             ptrdiff_t ldo, const gc_qargs *q);

/* ---- quantized inference around the int8 GEMM (qconv.c) ----------------------------------- */

/* Per-tensor uint8 quantize / dequantize of n values (PyTorch's roundings; scale finite > 0). */
void gc_quantize_u8(const float *x, uint8_t *out, ptrdiff_t n, float scale, int32_t zp);
void gc_dequantize_u8(const uint8_t *q, float *out, ptrdiff_t n, float scale, int32_t zp);
/* ONNX QuantizeLinear to uint8: clamp(round_half_even(x / scale) + zp, 0, 255) (a float32
 * division, as ONNX Runtime; NaN -> 0, as its clamp-then-convert). */
void gc_quantize_linear_u8(const float *x, uint8_t *out, ptrdiff_t n, float scale, int32_t zp);
/* ONNX DynamicQuantizeLinear (qdynamic.c; onnx.reference's float32 arithmetic): scale = (hi -
 * lo) / 255 over the range [lo, hi] of x with 0 in it (1 / 255 when hi == lo, also for n == 0),
 * zp = rint(clamp(-lo / scale, 0, 255)); NaN in x: scale NaN, zp 255.  gc_dynamic_quantize_u8
 * also writes y = gc_quantize_linear_u8(x, scale, zp) unless y is NULL (scale / zp: NULL or where
 * to store them).  Both passes split over threads for large n (the same bits). */
void gc_dynamic_qparams_u8(const float *x, ptrdiff_t n, float *scale, uint8_t *zp);
void gc_dynamic_quantize_u8(const float *x, ptrdiff_t n, uint8_t *y, float *scale, uint8_t *zp);
/* PyTorch's quantize_dynamic activation parameters over the same range (qdynamic.c): scale =
 * max((hi - lo) / 255, FLT_EPSILON), zp = clamp(-rint(lo / scale), 0, 255), y =
 * gc_quantize_u8(x, scale, zp); a range with inf or NaN: scale NaN, zp 0.  y / scale / zp as
 * gc_dynamic_quantize_u8's. */
void gc_dynamic_quantize_torch_u8(const float *x, ptrdiff_t n, uint8_t *y, float *scale,
                                  uint8_t *zp);
/* rows [n*oh*ow, c*kh*kw] (+ 8 bytes of slack) of uint8 x [n, c, h, w]; outside the image reads
 * zp (pad: n*c*(h + 2ph)*(w + 2pw) + 8 bytes for the padded copy). */
void gc_qim2col_u8(const uint8_t *x, uint8_t *rows, uint8_t *pad, const gc_conv *p, uint8_t zp);
/* Bytes of gc_qconv2d's work buffer: the rows, the [n, oh*ow, o] GEMM result (esz bytes per
 * item: 1 for uint8 / int8 out, 4 for float32 / int32), the padded copy of x, with slack. */
ptrdiff_t gc_qconv2d_work_bytes(const gc_conv *p, ptrdiff_t o, int esz);
/* out [n, o, oh, ow] (q->mode's type) = the int8 convolution of uint8 x [n, c, h, w] (zero point
 * q->a_zp, also the padding's value) with the weights B (k = c*kh*kw x o, packed from [o, k]);
 * work: gc_qconv2d_work_bytes bytes.  -1 when the GEMM's scratch allocation fails. */
int gc_qconv2d(const uint8_t *x, const gc_qpacked *B, void *out, uint8_t *work, const gc_conv *p,
               const gc_qargs *q);
/* Max pooling of uint8 planes (n*c of h x w) into [n*c, oh, ow]; the padding never wins. */
void gc_max_pool2d_u8(const uint8_t *x, uint8_t *out, const gc_conv *p);

#endif /* GPUCORE_KERNELS_H */
