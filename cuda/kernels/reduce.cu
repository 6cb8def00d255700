// The cuda kernels of sum, max and max's backward. A sum walks the reduced index space of
// each kept output in row-major order, cut into `blocks` equal chunks (cuda_reduce_blocks,
// Note [CUDA launch shapes]); each chunk is summed in double, and the chunks' partials are
// added in chunk order, so a sum is the same on every run. Few outputs get one thread block
// per (output, chunk), whose threads stride the chunk and meet in a block reduction; many
// outputs get one thread per (output, chunk), which reads consecutive outputs side by side
// when the kept dims are contiguous. max keeps the first maximum and stops at the first NaN
// (Note [Max picks the first maximum]).
#include "cuda/kernels/device.cuh"
#include "cuda/kernels/launch.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::cuda {
namespace {

__shared__ double g_scratch[32];

__device__ __forceinline__ int64_t offset_of(int64_t index, const ReduceDims& d) {
  int64_t off = 0;
  for (int k = d.dims - 1; k >= 0; --k) {
    off += (index % d.sizes[k]) * d.strides[k];
    index /= d.sizes[k];
  }
  return off;
}

// The sum of elements [begin, end) of the reduced space of the output at `base`.
template <class E>
__device__ double chunk_sum(const E* a, int64_t base, const ReduceDims& red, int64_t begin,
                            int64_t end, int64_t step, int64_t first) {
  double acc = 0;
  for (int64_t i = begin + first; i < end; i += step)
    acc += double(to_f32(a[base + offset_of(i, red)]));
  return acc;
}

// Writes the total of output o: directly (one chunk) or its chunk's partial.
template <class E>
__device__ __forceinline__ void emit(double total, int64_t o, int64_t b, int64_t blocks,
                                     double divisor, E* out, double* partial) {
  if (blocks == 1)
    out[o] = from_f32<E>(float(total / divisor));
  else
    partial[o * blocks + b] = total;
}

template <class E>
__global__ void sum_by_block_kernel(const E* a, ReduceDims kept, ReduceDims red, int64_t r,
                                    int64_t blocks, double divisor, E* out, double* partial) {
  const int64_t o = blockIdx.x, b = blockIdx.y;
  const int64_t chunk = backend::cuda_ceil_div(r, blocks);
  const int64_t begin = b * chunk, end = min(r, begin + chunk);
  double acc = chunk_sum(a, offset_of(o, kept), red, begin, end, blockDim.x, threadIdx.x);
  acc = block_sum(acc, g_scratch);
  if (threadIdx.x == 0) emit(acc, o, b, blocks, divisor, out, partial);
}

template <class E>
__global__ void sum_by_thread_kernel(const E* a, ReduceDims kept, ReduceDims red, int64_t r,
                                     int64_t n_out, int64_t blocks, double divisor, E* out,
                                     double* partial) {
  const int64_t chunk = backend::cuda_ceil_div(r, blocks);
  FG_GRID_STRIDE(i, n_out * blocks) {
    const int64_t b = i / n_out, o = i % n_out;  // consecutive threads, consecutive outputs
    const int64_t begin = b * chunk, end = min(r, begin + chunk);
    emit(chunk_sum(a, offset_of(o, kept), red, begin, end, 1, 0), o, b, blocks, divisor, out,
         partial);
  }
}

template <class E>
__global__ void sum_partials_kernel(const double* partial, int64_t n_out, int64_t blocks,
                                    double divisor, E* out) {
  FG_GRID_STRIDE(o, n_out) {
    double total = 0;
    for (int64_t b = 0; b < blocks; ++b) total += partial[o * blocks + b];
    out[o] = from_f32<E>(float(total / divisor));
  }
}

template <class E>
__global__ void max_kernel(const E* a, ReduceDims kept, int64_t n_out, int64_t size, int64_t stride,
                           E* values, int64_t* indices) {
  FG_GRID_STRIDE(o, n_out) {
    const E* p = a + offset_of(o, kept);
    float best = to_f32(p[0]);
    int64_t at = 0;
    for (int64_t i = 1; i < size && !isnan(best); ++i) {
      const float v = to_f32(p[i * stride]);
      if (v > best || isnan(v)) {
        best = v;
        at = i;
      }
    }
    values[o] = p[at * stride];
    indices[o] = at;
  }
}

template <class E>
__global__ void max_backward_kernel(const E* dy, const int64_t* indices, ReduceDims kept,
                                    int64_t n_out, int64_t stride, E* dx) {
  FG_GRID_STRIDE(o, n_out) { dx[offset_of(o, kept) + indices[o] * stride] = dy[o]; }
}

constexpr int64_t kFewOutputs = 1024;  // below this, a thread block per (output, chunk)

unsigned grid_for(int64_t n) { return unsigned(backend::cuda_elementwise_blocks(n)); }

}  // namespace

cudaError_t launch_sum(DType dtype, const void* a, const ReduceDims& kept, const ReduceDims& red,
                       int64_t blocks, double divisor, void* out, double* partial,
                       cudaStream_t stream) {
  int64_t n_out = 1, r = 1;
  for (int k = 0; k < kept.dims; ++k) n_out *= kept.sizes[k];
  for (int k = 0; k < red.dims; ++k) r *= red.sizes[k];
  if (n_out == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* ae = static_cast<const E*>(a);
    E* oe = static_cast<E*>(out);
    if (n_out < kFewOutputs)
      sum_by_block_kernel<E>
          <<<dim3(unsigned(n_out), unsigned(blocks)), backend::kCudaThreads, 0, stream>>>(
              ae, kept, red, r, blocks, divisor, oe, partial);
    else
      sum_by_thread_kernel<E><<<grid_for(n_out * blocks), backend::kCudaThreads, 0, stream>>>(
          ae, kept, red, r, n_out, blocks, divisor, oe, partial);
    if (blocks > 1)
      sum_partials_kernel<E><<<grid_for(n_out), backend::kCudaThreads, 0, stream>>>(
          partial, n_out, blocks, divisor, oe);
  });
  return cudaGetLastError();
}

cudaError_t launch_max(DType dtype, const void* a, const ReduceDims& kept, int64_t size,
                       int64_t stride, void* values, int64_t* indices, cudaStream_t stream) {
  int64_t n_out = 1;
  for (int k = 0; k < kept.dims; ++k) n_out *= kept.sizes[k];
  if (n_out == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    max_kernel<E><<<grid_for(n_out), backend::kCudaThreads, 0, stream>>>(
        static_cast<const E*>(a), kept, n_out, size, stride, static_cast<E*>(values), indices);
  });
  return cudaGetLastError();
}

cudaError_t launch_max_backward(DType dtype, const void* dy, const int64_t* indices,
                                const ReduceDims& kept, int64_t stride, void* dx,
                                cudaStream_t stream) {
  int64_t n_out = 1;
  for (int k = 0; k < kept.dims; ++k) n_out *= kept.sizes[k];
  if (n_out == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    max_backward_kernel<E><<<grid_for(n_out), backend::kCudaThreads, 0, stream>>>(
        static_cast<const E*>(dy), indices, kept, n_out, stride, static_cast<E*>(dx));
  });
  return cudaGetLastError();
}

}  // namespace fitgrad::cuda
