// Shared by every compute shader: the workgroup size is specialization constant 0 and large
// 1-D problems are spread over a 2-D grid (maxComputeWorkGroupCount[0] is often 65535).
layout(local_size_x_id = 0) in;

uint global_index() {
    return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
