// Compiled with -gencode arch=compute_86,code=sm_86: SASS only, no PTX, so
// softgpu must refuse it with CUDA_ERROR_NOT_SUPPORTED and a message.
extern "C" __global__ void sass_only(int *p) { *p = 1; }
