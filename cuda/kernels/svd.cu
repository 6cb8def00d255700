// svd_basis's kernels on a card (see svd_launch.h): the Gram matrix of the basis side, and
// the basis picked and signed from cuSOLVER's eigenvectors.
//
// The Gram kernel is a plain shared-memory tile product, one output per thread: a refresh
// runs once per update_proj_gap (200) steps, so it is not worth a tuned GEMM, and reading a
// in its own dtype spares a converted copy of the gradient.
#include <algorithm>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/svd_launch.h"

namespace fitgrad::cuda {
namespace {

constexpr int kTile = 16;
constexpr int kPickThreads = 256;

// One (kTile, kTile) tile of gram = X X^T, X (d, len) the basis side's view of a: X = a with
// `left`, else a^T. Threads load both row panels kTile columns at a time, along a's rows.
template <class E>
__global__ void gram_kernel(const E* a, int64_t m, int64_t n, bool left, float* gram,
                            int* nonfinite) {
  __shared__ float rows_i[kTile][kTile + 1];
  __shared__ float rows_j[kTile][kTile + 1];
  const int64_t d = left ? m : n, len = left ? n : m;
  const int64_t i0 = int64_t(blockIdx.y) * kTile, j0 = int64_t(blockIdx.x) * kTile;
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  // X(row, k): with `left` a[row][k] (tx along k, coalesced), else a[k][row] (tx along row).
  auto load = [&](int64_t row0, float(*panel)[kTile + 1], int64_t k0) {
    const int r = left ? ty : tx, k = left ? tx : ty;
    const int64_t row = row0 + r, col = k0 + k;
    float v = 0;
    if (row < d && col < len) {
      v = to_f32(left ? a[row * n + col] : a[col * n + row]);
      if (!isfinite(v)) *nonfinite = 1;
    }
    panel[r][k] = v;
  };
  float acc = 0;
  for (int64_t k0 = 0; k0 < len; k0 += kTile) {
    load(i0, rows_i, k0);
    load(j0, rows_j, k0);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) acc += rows_i[ty][k] * rows_j[tx][k];
    __syncthreads();
  }
  if (i0 + ty < d && j0 + tx < d) gram[(i0 + ty) * d + j0 + tx] = acc;
}

// One block per basis vector j: the first index of largest magnitude, then the signed copy.
template <class E>
__global__ void pick_basis_kernel(const float* vectors, int64_t d, int64_t r, bool left, E* out) {
  __shared__ float best_abs[kPickThreads];
  __shared__ int64_t best_index[kPickThreads];
  const int64_t j = blockIdx.x;
  const float* v = vectors + (d - 1 - j) * d;
  float abs_max = -1;
  int64_t index = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float x = fabsf(v[i]);
    if (x > abs_max) abs_max = x, index = i;  // i grows: the first of equals stays
  }
  best_abs[threadIdx.x] = abs_max;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) {
      const float o = best_abs[threadIdx.x + half];
      const int64_t oi = best_index[threadIdx.x + half];
      if (o > best_abs[threadIdx.x] || (o == best_abs[threadIdx.x] && oi < best_index[threadIdx.x]))
        best_abs[threadIdx.x] = o, best_index[threadIdx.x] = oi;
    }
    __syncthreads();
  }
  const float sign = v[best_index[0]] < 0 ? -1.0f : 1.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
    out[left ? i * r + j : j * d + i] = from_f32<E>(sign * v[i]);
}

}  // namespace

cudaError_t launch_svd_gram(const void* a, DType dtype, int64_t m, int64_t n, bool left,
                            float* gram, int* nonfinite, cudaStream_t stream) {
  const int64_t d = left ? m : n;
  if (d == 0) return cudaSuccess;
  const unsigned tiles = unsigned((d + kTile - 1) / kTile);
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    gram_kernel<E><<<dim3(tiles, tiles), dim3(kTile, kTile), 0, stream>>>(
        static_cast<const E*>(a), m, n, left, gram, nonfinite);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_svd_pick_basis(const float* vectors, int64_t d, int64_t r, bool left, void* out,
                                  DType dtype, cudaStream_t stream) {
  if (r == 0) return cudaSuccess;
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    pick_basis_kernel<E>
        <<<unsigned(r), kPickThreads, 0, stream>>>(vectors, d, r, left, static_cast<E*>(out));
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace fitgrad::cuda
