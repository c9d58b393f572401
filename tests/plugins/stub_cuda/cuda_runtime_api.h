// Stub for building the TensorRT-free plugin core without the CUDA toolkit: the kernel headers
// need only the cudaStream_t typedef from it. Never used when the real headers are found.
#pragma once
typedef struct CUstream_st* cudaStream_t;
