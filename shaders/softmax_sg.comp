#version 450
#extension GL_GOOGLE_include_directive : require
// softmax family with subgroup reductions (devices with subgroup basic+vote+arithmetic in compute).
// Body: softmax.glsl.
#define SUBGROUP 1
#include "softmax.glsl"
