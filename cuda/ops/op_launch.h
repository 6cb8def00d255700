// What the cuda kernel table's adapters share (cuda/ops/*.cpp): the launch context of one op
// (its device current, its compute stream), the device a raw operand lives on, and the
// strided packs of the elementwise launchers. Each adapter checks its argument struct,
// calls a launcher of cuda/kernels/launch.h inside FG_CUDA_CHECK, so a failed launch is a
// fitgrad::Error naming the launcher and its place, and returns: the kernel runs in stream
// order on the compute stream, where the caching allocator orders the reuse of its blocks
// (Note [Blocks other streams use]).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/kernels/launch.h"
#include "cuda/runtime.h"
#include "cuda/streams.h"
#include "tensor/backend/strided.h"
#include "tensor/tensor.h"

namespace fitgrad::cuda {

class OpLaunch {
 public:
  explicit OpLaunch(const Tensor& t) : OpLaunch(t.device().index) {}
  explicit OpLaunch(int device) : guard_(device), stream_(stream_of(device, kComputeStream)) {}
  cudaStream_t stream() const { return stream_; }

 private:
  DeviceGuard guard_;
  cudaStream_t stream_;
};

// The cuda device whose memory `ptr` points into; throws naming `op` for host memory.
int device_of(const void* ptr, const char* op);

// The pack of N operands (outputs first) over `shape`; throws naming `op` when the shape
// has more dims than the kernels take.
template <int N>
StridedPack<N> make_pack(const char* op, const Shape& shape,
                         const backend::StridedOperand* const (&operands)[N]) {
  FG_CHECK(shape.size() <= size_t(kMaxDims),
           "[{}] the cuda kernels take at most {} collapsed dims, got {}", op, kMaxDims,
           shape.size());
  StridedPack<N> p;
  p.dims = int(shape.size());
  for (int d = 0; d < p.dims; ++d) p.sizes[d] = shape[size_t(d)];
  for (int i = 0; i < N; ++i) {
    const backend::StridedOperand& o = *operands[i];
    p.data[i] = static_cast<char*>(o.data) + o.offset * int64_t(element_size(o.dtype));
    for (int d = 0; d < p.dims; ++d) p.strides[i][d] = o.strides[size_t(d)];
  }
  return p;
}

}  // namespace fitgrad::cuda
