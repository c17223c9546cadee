#version 450
#extension GL_GOOGLE_include_directive : require
// reduce family, shared-memory workgroup reductions (every device). Body: reduce.glsl.
#define SUBGROUP 0
#include "reduce.glsl"
