#version 450
#extension GL_GOOGLE_include_directive : require
// cross_entropy family with subgroup reductions (devices with subgroup basic+vote+arithmetic in compute).
// Body: cross_entropy.glsl.
#define SUBGROUP 1
#include "cross_entropy.glsl"
