#version 450
#extension GL_GOOGLE_include_directive : require
// cross_entropy family, shared-memory workgroup reductions (every device). Body: cross_entropy.glsl.
#define SUBGROUP 0
#include "cross_entropy.glsl"
