#version 450
#extension GL_GOOGLE_include_directive : require
// reduce family with subgroup reductions (devices with subgroup basic+vote+arithmetic in compute).
// Body: reduce.glsl.
#define SUBGROUP 1
#include "reduce.glsl"
