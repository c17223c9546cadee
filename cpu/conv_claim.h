/* How the threads of a convolution's parallel region share its work (conv.c: gc_conv_claim_units,
 * the GEMM path's forward and backward; conv_direct_backward.c; conv_wtaps.c): units (images,
 * chunks of images) claimed one at a time from a shared counter, so that a thread that joins the
 * region late or is descheduled holds nobody up, and each unit is written by the thread that
 * claims it alone (the bits never depend on which one). */
#ifndef GC_CONV_CLAIM_H
#define GC_CONV_CLAIM_H

#include <stdatomic.h>

#include "isa.h"

typedef struct {
    /* its own cache line: the rest of a job is read by every thread */
    _Alignas(64) atomic_long next;
    atomic_int failed; /* set by a unit (or a thread's buffers) that failed */
} gc_conv_claim;

/* The next unit below n a thread claims, or -1 when none is left.  A thread whose buffers
 * failed (bad) runs none: each unit it claims marks the call failed. */
static inline long gc_conv_next(gc_conv_claim *c, long n, int bad)
{
    for (long u; (u = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed)) < n;) {
        if (!bad)
            return u;
        atomic_store(&c->failed, 1);
    }
    return -1;
}

/* body(job, slot) on at most nt threads (and no more than the n units) of a region, over c from
 * unit 0: 0, or -1 when a unit failed. */
static inline int gc_conv_run(gc_conv_claim *c, gc_body body, void *job, int nt, long n)
{
    atomic_init(&c->next, 0);
    atomic_init(&c->failed, 0);
    gc_region(body, job, nt < n ? nt : (int)n);
    return atomic_load(&c->failed) ? -1 : 0;
}

#endif
