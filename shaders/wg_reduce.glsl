// Workgroup reductions shared by reduce.comp, softmax.comp and cross_entropy.comp (include-only).
//
// The includer defines SUBGROUP (1: use GL_KHR_shader_subgroup_{basic,vote,arithmetic}, enabled
// by the includer before any code; 0: shared-memory tree only) and includes common.glsl first.
// Each wg_* function must be called by every invocation of the workgroup in uniform control
// flow; every invocation gets the result. WG (constant 0, the workgroup size) is a power of two.
//
// NaN semantics follow the CPU kernels (cpu/reduce.c): max/min propagate NaN; arg-reductions
// give the first NaN if there is one, else the first extreme. NaN tests use the bit pattern, so
// no compiler's fast-math assumptions can fold them away.

layout(constant_id = 0) const uint WG = 64;

shared float red_v[WG];
shared uint red_i[WG];

const uint NO_INDEX = 0xffffffffu;

float f_inf() { return uintBitsToFloat(0x7f800000u); }
float f_nan() { return uintBitsToFloat(0x7fc00000u); }
bool is_nan(float v) { return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u; }
bool is_inf(float v) { return (floatBitsToUint(v) & 0x7fffffffu) == 0x7f800000u; }

// Kahan-compensated running sum: the true sum is s - c. An infinite partial sum resets the
// compensation (inf - inf would otherwise turn a sum of [inf, 1] into NaN).
void kahan_add(inout float s, inout float c, float v) {
    precise float y = v - c;
    precise float t = s + y;
    precise float d = (t - s) - y;
    c = is_inf(t) ? 0.0 : d;
    s = t;
}

float comb_ext(float a, float b, bool mx) {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return mx ? max(a, b) : min(a, b);
}

// (a, ia) <- the better of (a, ia) and (b, ib): a NaN wins (the lower index among NaNs), then
// the larger (mx) or smaller value, then the lower index. NO_INDEX marks "no element yet".
void comb_arg(inout float a, inout uint ia, float b, uint ib, bool mx) {
    bool an = is_nan(a), bn = is_nan(b);
    if (an || bn) {
        if (bn && (!an || ib < ia)) {
            a = b;
            ia = ib;
        }
        return;
    }
    if (mx ? b > a : b < a) {
        a = b;
        ia = ib;
    } else if (b == a && ib < ia) {
        ia = ib;
    }
}

float wg_sum(float v) {
#if SUBGROUP
    v = subgroupAdd(v);
    barrier();
    if (subgroupElect()) red_v[gl_SubgroupID] = v;
    barrier();
    float s = 0.0;
    for (uint k = gl_SubgroupInvocationID; k < gl_NumSubgroups; k += gl_SubgroupSize) s += red_v[k];
    return subgroupAdd(s);
#else
    uint t = gl_LocalInvocationID.x;
    barrier();
    red_v[t] = v;
    barrier();
    for (uint h = WG >> 1; h > 0u; h >>= 1) {
        if (t < h) red_v[t] += red_v[t + h];
        barrier();
    }
    return red_v[0];
#endif
}

// NaN-propagating max (mx) or min over the workgroup.
float wg_ext(float v, bool mx) {
#if SUBGROUP
    bool vn = is_nan(v);
    bool any_nan = subgroupAny(vn);
    float w = vn ? (mx ? -f_inf() : f_inf()) : v;
    w = mx ? subgroupMax(w) : subgroupMin(w);
    if (any_nan) w = f_nan();
    barrier();
    if (subgroupElect()) red_v[gl_SubgroupID] = w;
    barrier();
    float r = red_v[0];
    for (uint k = 1u; k < gl_NumSubgroups; ++k) r = comb_ext(r, red_v[k], mx);
    return r;
#else
    uint t = gl_LocalInvocationID.x;
    barrier();
    red_v[t] = v;
    barrier();
    for (uint h = WG >> 1; h > 0u; h >>= 1) {
        if (t < h) red_v[t] = comb_ext(red_v[t], red_v[t + h], mx);
        barrier();
    }
    return red_v[0];
#endif
}

// Arg-max (mx) / arg-min over the workgroup of per-invocation bests (v, i).
void wg_arg(inout float v, inout uint i, bool mx) {
#if SUBGROUP
    bool vn = is_nan(v);
    bool any_nan = subgroupAny(vn);
    float w = vn ? (mx ? -f_inf() : f_inf()) : v;
    float best = mx ? subgroupMax(w) : subgroupMin(w);
    uint cand = any_nan ? (vn ? i : NO_INDEX) : (w == best ? i : NO_INDEX);
    uint bi = subgroupMin(cand);
    if (any_nan) best = f_nan();
    barrier();
    if (subgroupElect()) {
        red_v[gl_SubgroupID] = best;
        red_i[gl_SubgroupID] = bi;
    }
    barrier();
    v = red_v[0];
    i = red_i[0];
    for (uint k = 1u; k < gl_NumSubgroups; ++k) comb_arg(v, i, red_v[k], red_i[k], mx);
#else
    uint t = gl_LocalInvocationID.x;
    barrier();
    red_v[t] = v;
    red_i[t] = i;
    barrier();
    for (uint h = WG >> 1; h > 0u; h >>= 1) {
        if (t < h) {
            float a = red_v[t];
            uint ia = red_i[t];
            comb_arg(a, ia, red_v[t + h], red_i[t + h], mx);
            red_v[t] = a;
            red_i[t] = ia;
        }
        barrier();
    }
    v = red_v[0];
    i = red_i[0];
#endif
}
