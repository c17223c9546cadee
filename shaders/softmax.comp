#version 450
#extension GL_GOOGLE_include_directive : require
// softmax family, shared-memory workgroup reductions (every device). Body: softmax.glsl.
#define SUBGROUP 0
#include "softmax.glsl"
