// The adapters' shared helpers (see cuda/ops/op_launch.h).
#include "cuda/ops/op_launch.h"

namespace fitgrad::cuda {

int device_of(const void* ptr, const char* op) {
  cudaPointerAttributes attributes{};
  FG_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  FG_CHECK(attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged,
           "[{}] a cuda kernel's operand is not device memory", op);
  return attributes.device;
}

}  // namespace fitgrad::cuda
