/* ISA detection (CPUID + XGETBV on x86; NEON on arm64), cache detection (CPUID leaf 4 /
 * 0x8000001D, else sysconf) and the GEMM cache blocking derived from them.  Compiled with the
 * baseline flags: nothing here may execute an instruction the CPU could lack. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isa.h"

#if GC_X86
#include <cpuid.h>
#endif

gc_isa_kernels gc_isa;
gc_blocking gc_blk_f32, gc_blk_f64;
gc_caches gc_cache_info;

const char *const gc_isa_names[GC_ISA_COUNT] = {"scalar", "sse2", "avx2", "avx512", "neon"};

#if GC_X86
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4])
{
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

/* XCR0: the register state the OS saves and restores (needs OSXSAVE). */
static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ __volatile__(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
#endif

int gc_isa_supported_mask(void)
{
    int mask = 1 << GC_ISA_SCALAR;
#if GC_NEON
    /* AdvSIMD is mandatory in the arm64 Linux / macOS ABIs (the compiler already uses the vector
     * registers for plain floating point), so there is nothing to probe */
    mask |= 1 << GC_ISA_NEON;
#endif
#if GC_X86
    unsigned r[4];
    cpuid(0, 0, r);
    const unsigned max_leaf = r[0];
    if (max_leaf < 1)
        return mask;
    cpuid(1, 0, r);
    const unsigned ecx1 = r[2], edx1 = r[3];
    if (edx1 & (1u << 26))
        mask |= 1 << GC_ISA_SSE2;
    const int osxsave = (ecx1 >> 27) & 1, avx = (ecx1 >> 28) & 1, fma = (ecx1 >> 12) & 1;
    if (!osxsave || !avx || max_leaf < 7)
        return mask;
    const unsigned long long xcr0 = xgetbv0();
    const int ymm_os = (xcr0 & 0x6) == 0x6;    /* XMM and YMM state */
    const int zmm_os = (xcr0 & 0xe6) == 0xe6;  /* + opmask, ZMM_Hi256, Hi16_ZMM */
    cpuid(7, 0, r);
    const unsigned ebx7 = r[1];
    const int avx2 = (ebx7 >> 5) & 1, avx512f = (ebx7 >> 16) & 1;
    if (ymm_os && avx2 && fma)
        mask |= 1 << GC_ISA_AVX2;
    if ((mask & (1 << GC_ISA_AVX2)) && zmm_os && avx512f)
        mask |= 1 << GC_ISA_AVX512;
#endif
    return mask;
}

/* ---- caches ------------------------------------------------------------------------------- */

#if GC_X86
/* Deterministic cache parameters: leaf 4 (Intel) or 0x8000001D (AMD), same layout.  Sizes are
 * per cache instance; L1d and L2 are per core on every CPU we target. */
static int caches_cpuid(gc_caches *c)
{
    unsigned r[4];
    cpuid(0, 0, r);
    const unsigned max_leaf = r[0];
    char vendor[13];
    memcpy(vendor, &r[1], 4);
    memcpy(vendor + 4, &r[3], 4);
    memcpy(vendor + 8, &r[2], 4);
    vendor[12] = '\0';
    unsigned leaf = 4;
    if (strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0) {
        cpuid(0x80000000u, 0, r);
        if (r[0] < 0x8000001Du)
            return -1;
        cpuid(0x80000001u, 0, r);
        if (!((r[2] >> 22) & 1)) /* TopologyExtensions */
            return -1;
        leaf = 0x8000001Du;
    } else if (max_leaf < 4) {
        return -1;
    }
    int found = 0;
    for (unsigned sub = 0; sub < 16; sub++) {
        cpuid(leaf, sub, r);
        const unsigned type = r[0] & 0x1f, level = (r[0] >> 5) & 0x7;
        if (type == 0)
            break;
        if (type != 1 && type != 3) /* data or unified */
            continue;
        const long ways = ((r[1] >> 22) & 0x3ff) + 1, parts = ((r[1] >> 12) & 0x3ff) + 1;
        const long line = (r[1] & 0xfff) + 1, sets = (long)r[2] + 1;
        const long size = ways * parts * line * sets;
        if (level == 1)
            c->l1d = size;
        else if (level == 2)
            c->l2 = size;
        else if (level == 3)
            c->l3 = size;
        found = 1;
    }
    return found && c->l1d > 0 ? 0 : -1;
}
#endif

static void detect_caches(gc_caches *c)
{
    memset(c, 0, sizeof *c);
#if GC_X86
    if (caches_cpuid(c) == 0) {
        c->source = "cpuid";
        goto done;
    }
    memset(c, 0, sizeof *c);
#endif
#if defined(_SC_LEVEL1_DCACHE_SIZE)
    c->l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    c->l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    c->l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (c->l1d > 0) {
        c->source = "sysconf";
        goto done;
    }
#endif
    c->l1d = 0;
    c->source = "default";
done:
    if (c->l1d < 16 * 1024 || c->l1d > 1024 * 1024)
        c->l1d = 32 * 1024;
    if (c->l2 < 128 * 1024 || c->l2 > 64L * 1024 * 1024)
        c->l2 = 512 * 1024;
    if (c->l3 < c->l2)
        c->l3 = 0; /* none: the A block then lives in L2 as well */
}

/* ---- blocking ----------------------------------------------------------------------------- */

static ptrdiff_t clampz(ptrdiff_t v, ptrdiff_t lo, ptrdiff_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

/* kc: the A micro-panel (mr x kc) takes about half of L1 (the B stream and C use the rest).
 * nc: the B block (kc x nc) takes about half of L2.
 * mc: the A block (mc x kc), shared by all threads, takes about a quarter of L3 (or half of L2
 *     when there is no L3).  Rounded to multiples of the register tile. */
static void set_blocking(gc_blocking *b, int mr, int nr, size_t elem, const gc_caches *c)
{
    b->mr = mr;
    b->nr = nr;
    ptrdiff_t kc = (ptrdiff_t)((size_t)c->l1d / 2 / ((size_t)mr * elem));
    kc = clampz(kc & ~(ptrdiff_t)7, 64, 1024);
    ptrdiff_t nc = (ptrdiff_t)((size_t)c->l2 / 2 / ((size_t)kc * elem));
    nc = clampz(nc / nr * nr, nr, 8192 / nr * nr);
    const size_t l3 = c->l3 > 0 ? (size_t)c->l3 / 4 : (size_t)c->l2 / 2;
    ptrdiff_t mc = (ptrdiff_t)(l3 / ((size_t)kc * elem));
    mc = clampz(mc / mr * mr, mr, 8192 / mr * mr);
    b->kc = kc;
    b->nc = nc;
    b->mc = mc;
}

int gc_cpu_init(const char *forced, char *err, size_t errlen)
{
    const int mask = gc_isa_supported_mask();
    int isa = GC_ISA_SCALAR;
    if (forced && *forced) {
        int want = -1;
        for (int i = 0; i < GC_ISA_COUNT; i++)
            if (strcmp(forced, gc_isa_names[i]) == 0)
                want = i;
        char avail[128] = "";
        for (int i = GC_ISA_COUNT - 1; i >= 0; i--) {
            if (mask & (1 << i)) {
                strncat(avail, avail[0] ? ", " : "", sizeof avail - strlen(avail) - 1);
                strncat(avail, gc_isa_names[i], sizeof avail - strlen(avail) - 1);
            }
        }
        if (want < 0) {
            char known[128] = "";
            for (int i = GC_ISA_COUNT - 1; i >= 0; i--) {
                strncat(known, known[0] ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, gc_isa_names[i], sizeof known - strlen(known) - 1);
            }
            snprintf(err, errlen,
                     "GPUCORE_CPU_ISA=%s is not a known instruction set; use one of %s (this "
                     "CPU supports: %s), or unset it to pick the best",
                     forced, known, avail);
            return -1;
        }
        if (!(mask & (1 << want))) {
            snprintf(err, errlen,
                     "GPUCORE_CPU_ISA=%s: this CPU/OS (or this build) does not support %s; it "
                     "supports: %s.  Unset GPUCORE_CPU_ISA or pick one of those",
                     forced, gc_isa_names[want], avail);
            return -1;
        }
        isa = want;
    } else {
        for (int i = GC_ISA_COUNT - 1; i >= 0; i--) {
            if (mask & (1 << i)) {
                isa = i;
                break;
            }
        }
    }
    memset(&gc_isa, 0, sizeof gc_isa);
    gc_isa_fill_scalar(&gc_isa);
    if (isa == GC_ISA_SCALAR) /* the direct convolution's tile must be the GEMM's */
        gc_conv_fill_scalar(&gc_isa);
#if GC_X86
    switch (isa) {
    case GC_ISA_SSE2:
        gc_isa_fill_sse2(&gc_isa);
        gc_conv_fill_sse2(&gc_isa);
        gc_conv_c1_fill_sse2(&gc_isa);
        break;
    case GC_ISA_AVX2:
        gc_isa_fill_avx2(&gc_isa);
        gc_conv_fill_avx2(&gc_isa);
        gc_conv_bwd_fill_avx2(&gc_isa);
        gc_conv_c1_fill_avx2(&gc_isa);
        break;
    case GC_ISA_AVX512:
        gc_isa_fill_avx512(&gc_isa);
        gc_conv_bwd_fill_avx512(&gc_isa);
        gc_conv_c1_fill_avx512(&gc_isa);
        break;
    default: break;
    }
#endif
#if GC_NEON
    if (isa == GC_ISA_NEON)
        gc_isa_fill_neon(&gc_isa);
#endif
    gc_isa.isa = isa;
    gc_isa.name = gc_isa_names[isa];
    detect_caches(&gc_cache_info);
    set_blocking(&gc_blk_f32, gc_isa.mr_f32, gc_isa.nr_f32, sizeof(float), &gc_cache_info);
    set_blocking(&gc_blk_f64, gc_isa.mr_f64, gc_isa.nr_f64, sizeof(double), &gc_cache_info);
    /* tuning knob: GPUCORE_GEMM_BLOCKING="mc,kc,nc" (float32 elements; float64 gets half kc, nc) */
    const char *ov = getenv("GPUCORE_GEMM_BLOCKING");
    long mc, kc, nc;
    if (ov && sscanf(ov, "%ld,%ld,%ld", &mc, &kc, &nc) == 3 && mc > 0 && kc > 0 && nc > 0) {
        gc_blk_f32.mc = clampz(mc / gc_blk_f32.mr * gc_blk_f32.mr, gc_blk_f32.mr, 1 << 16);
        gc_blk_f32.kc = clampz(kc & ~7L, 8, 1 << 14);
        gc_blk_f32.nc = clampz(nc / gc_blk_f32.nr * gc_blk_f32.nr, gc_blk_f32.nr, 1 << 16);
        gc_blk_f64.mc = clampz(mc / gc_blk_f64.mr * gc_blk_f64.mr, gc_blk_f64.mr, 1 << 16);
        gc_blk_f64.kc = clampz((kc / 2) & ~7L, 8, 1 << 14);
        gc_blk_f64.nc = clampz(nc / 2 / gc_blk_f64.nr * gc_blk_f64.nr, gc_blk_f64.nr, 1 << 16);
    }
    return 0;
}
