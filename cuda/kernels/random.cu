// The cuda kernels of dropout, uniform and normal_: element i takes draw offset + i of the
// Philox-4x32-10 stream of the seed (Note [Philox streams] in tensor/random/philox.h, whose
// constexpr functions run here unchanged), so a cuda run draws exactly the CPU's numbers,
// whatever the grid. Each thread computes one Philox block of four draws.
#include <cmath>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/launch.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/random/dropout_mask.h"
#include "tensor/random/philox.h"

namespace fitgrad::cuda {
namespace {

constexpr unsigned kThreads = backend::kCudaThreads;

// The Philox blocks covering draws [offset, offset + n).
struct Blocks {
  uint64_t first = 0;
  int64_t count = 0;
};
Blocks blocks_of(uint64_t offset, int64_t n) {
  const uint64_t first = offset / 4;
  return {first, int64_t((offset + uint64_t(n) - 1) / 4 - first) + 1};
}
unsigned grid_for(int64_t n) { return unsigned(backend::cuda_elementwise_blocks(n)); }

// Calls fn(i, u) for each element i of [0, n) whose draw lies in Philox block `b`.
template <class Fn>
__device__ __forceinline__ void for_block(uint64_t seed, uint64_t offset, int64_t n, Blocks bl,
                                          int64_t b, Fn&& fn) {
  const PhiloxCounter bits = philox_block(seed, bl.first + uint64_t(b));
  for (uint64_t lane = 0; lane < 4; ++lane) {
    const uint64_t draw = (bl.first + uint64_t(b)) * 4 + lane;
    if (draw < offset || draw - offset >= uint64_t(n)) continue;
    fn(int64_t(draw - offset), uniform_from_bits(bits[lane]));
  }
}

template <class E>
__global__ void dropout_kernel(const E* x, E* y, int64_t n, double p, float scale, uint64_t seed,
                               uint64_t offset, Blocks bl) {
  FG_GRID_STRIDE(b, bl.count) {
    for_block(seed, offset, n, bl, b, [&](int64_t i, float u) {
      y[i] = from_f32<E>(dropout_keeps(u, p) ? to_f32(x[i]) * scale : 0.0f);
    });
  }
}

template <class E>
__global__ void uniform_kernel(E* out, int64_t n, float lo, float width, uint64_t seed,
                               uint64_t offset, Blocks bl) {
  FG_GRID_STRIDE(b, bl.count) {
    for_block(seed, offset, n, bl, b,
              [&](int64_t i, float u) { out[i] = from_f32<E>(lo + width * u); });
  }
}

// Draws 2j and 2j + 1 give elements 2j (cosine) and 2j + 1 (sine), as the CPU's normal_.
template <class E>
__global__ void normal_kernel(E* out, int64_t n, double std, uint64_t seed, uint64_t offset) {
  const int64_t pairs = (n + 1) / 2;
  FG_GRID_STRIDE(j, pairs) {
    const uint64_t k = uint64_t(2 * j);
    const double u0 = philox_uniform(seed, offset + k);
    const double u1 = philox_uniform(seed, offset + k + 1);
    const double r = sqrt(-2.0 * log(1.0 - u0));
    const double angle = 2.0 * 3.14159265358979323846 * u1;
    out[2 * j] = from_f32<E>(float(std * r * cos(angle)));
    if (2 * j + 1 < n) out[2 * j + 1] = from_f32<E>(float(std * r * sin(angle)));
  }
}

}  // namespace

cudaError_t launch_dropout(DType dtype, const void* x, void* y, int64_t n, double p, uint64_t seed,
                           uint64_t offset, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const Blocks bl = blocks_of(offset, n);
  const float scale = dropout_scale(p);
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dropout_kernel<E><<<grid_for(bl.count), kThreads, 0, stream>>>(
        static_cast<const E*>(x), static_cast<E*>(y), n, p, scale, seed, offset, bl);
  });
  return cudaGetLastError();
}

cudaError_t launch_uniform(DType dtype, void* out, int64_t n, float lo, float width, uint64_t seed,
                           uint64_t offset, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const Blocks bl = blocks_of(offset, n);
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    uniform_kernel<E><<<grid_for(bl.count), kThreads, 0, stream>>>(static_cast<E*>(out), n, lo,
                                                                   width, seed, offset, bl);
  });
  return cudaGetLastError();
}

cudaError_t launch_normal(DType dtype, void* out, int64_t n, double std, uint64_t seed,
                          uint64_t offset, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    normal_kernel<E><<<grid_for((n + 1) / 2), kThreads, 0, stream>>>(static_cast<E*>(out), n, std,
                                                                     seed, offset);
  });
  return cudaGetLastError();
}

}  // namespace fitgrad::cuda
