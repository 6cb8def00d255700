// The cuda kernels of APOLLO's update of a projected matrix (backend::ApolloArgs gives the
// arithmetic; tensor/cpu/apollo.cpp is the reference). Per element the arithmetic is the
// CPU's, one rounding per operation (Note [One rounding per operation] in optim.cu), so given
// the same scales and coefficient an element's moments and parameter are the CPU's bit for
// bit; the sums are in double in a fixed order per shape (block sums), not the CPU's order,
// so the scales may differ from it in the last bits. The phases, in stream order, with the
// workspace of Note [APOLLO's workspace]:
//   1. moments: the low-rank Adam step and each channel's sums of N^2 and R^2: one block
//      per channel when the channels are low's rows (cuda_row_threads(rank) threads), else
//      one thread per channel (a column of low) walking the rank rows;
//   2. scales: each channel's f32 scale (one thread each), or the tensor-wise one (one block);
//   3. row sums of (g s)^2: one block per row of the parameter;
//   4. the limiter: one block adds the row sums, and its first thread computes the limiter,
//      writes the norm state and the coefficient step / l;
//   5. the update: the elementwise grid, each thread reading the coefficient.
#include "cuda/kernels/device.cuh"
#include "cuda/kernels/optim_device.cuh"
#include "cuda/kernels/optim_launch.h"
#include "tensor/backend/apollo_workspace.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/backend/cuda_optim_launch.h"

namespace fitgrad::cuda {
namespace {

using backend::ApolloWorkspace;
using backend::kCudaThreads;

// What every kernel reads: the constants, the shapes, the low-rank operands and the
// workspace.
template <class G>
struct Apollo {
  ApolloConstants k;
  int64_t rows, cols, rank;
  const G* low;
  float* m;
  float* v;
  double* w;
  ApolloWorkspace l;

  // The Adam step of low value j: updates m[j] and v[j], returns N = m / (sqrt(v) + eps).
  __device__ float adam_value(int64_t j, float r) const {
    const float mj = rn_add(rn_mul(m[j], k.beta1), rn_mul(k.one_minus_beta1, r));
    const float vj = rn_add(rn_mul(v[j], k.beta2), rn_mul(rn_mul(k.one_minus_beta2, r), r));
    m[j] = mj;
    v[j] = vj;
    return rn_div(mj, rn_add(rn_sqrt(vj), k.eps));
  }
  // The f32 scale of parameter element (r, c).
  __device__ float scale_at(int64_t r, int64_t c) const {
    if (k.tensor_wise) return float(w[l.scale]);
    return float(w[l.update_sums + (k.right ? r : c)]);
  }
};

// A channel's scale from its sums of N^2 and R^2, rounded to f32.
__device__ __forceinline__ double channel_scale(double update_sq, double low_sq) {
  return double(float(__ddiv_rn(__dsqrt_rn(update_sq), __dadd_rn(__dsqrt_rn(low_sq), 1e-8))));
}

// Phase 1, channels are low's rows (rows, rank): one block per channel.
template <class G>
__global__ void __launch_bounds__(1024) moments_rows_kernel(Apollo<G> a) {
  __shared__ double scratch[32];
  for (int64_t c = blockIdx.x; c < a.rows; c += gridDim.x) {
    double sn = 0.0, sr = 0.0;
    for (int64_t j = c * a.rank + threadIdx.x; j < (c + 1) * a.rank; j += blockDim.x) {
      const float r = to_f32(a.low[j]);
      const double u = double(a.adam_value(j, r));
      sn += u * u;
      sr += double(r) * double(r);
    }
    sn = block_sum(sn, scratch);
    sr = block_sum(sr, scratch);
    if (threadIdx.x == 0) {
      a.w[a.l.update_sums + c] = sn;
      a.w[a.l.low_sums + c] = sr;
    }
  }
}

// Phase 1, channels are low's columns (rank, cols): one thread per channel, the rank rows in
// order.
template <class G>
__global__ void moments_cols_kernel(Apollo<G> a) {
  FG_GRID_STRIDE(c, a.cols) {
    double sn = 0.0, sr = 0.0;
    for (int64_t i = 0; i < a.rank; ++i) {
      const int64_t j = i * a.cols + c;
      const float r = to_f32(a.low[j]);
      const double u = double(a.adam_value(j, r));
      sn += u * u;
      sr += double(r) * double(r);
    }
    a.w[a.l.update_sums + c] = sn;
    a.w[a.l.low_sums + c] = sr;
  }
}

// Phase 2, channel-wise: each channel's scale in place of its sum of N^2.
__global__ void channel_scales_kernel(double* w, ApolloWorkspace l, int64_t channels) {
  FG_GRID_STRIDE(c, channels) {
    w[l.update_sums + c] = channel_scale(w[l.update_sums + c], w[l.low_sums + c]);
  }
}

// Phase 2, tensor-wise: one block adds the channels' sums.
__global__ void tensor_scale_kernel(double* w, ApolloWorkspace l, int64_t channels) {
  __shared__ double scratch[32];
  double sn = 0.0, sr = 0.0;
  for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    sn += w[l.update_sums + c];
    sr += w[l.low_sums + c];
  }
  sn = block_sum(sn, scratch);
  sr = block_sum(sr, scratch);
  if (threadIdx.x == 0) w[l.scale] = channel_scale(sn, sr);
}

// Phase 3: row r's sum of (g s)^2, one block per row.
template <class G>
__global__ void __launch_bounds__(1024) row_sums_kernel(Apollo<G> a, const G* g) {
  __shared__ double scratch[32];
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
      const double x = double(to_f32(g[r * a.cols + c])) * double(a.scale_at(r, c));
      acc += x * x;
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) a.w[a.l.row_sums + r] = acc;
  }
}

// Phase 4: the norm n of the scaled gradient, the limiter l (1 at the first step, else
// max(n / (norm + 1e-8), growth) / growth), norm = n / l, and the coefficient step / l.
__global__ void limiter_kernel(ApolloConstants k, double* w, ApolloWorkspace l, int64_t rows,
                               float* norm) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) acc += w[l.row_sums + r];
  acc = block_sum(acc, scratch);
  if (threadIdx.x != 0) return;
  const double n = __dsqrt_rn(acc);
  const double limiter =
      k.first ? 1.0 : max_of(__ddiv_rn(n, __dadd_rn(double(*norm), 1e-8)), k.growth) / k.growth;
  *norm = float(__ddiv_rn(n, limiter));
  w[l.coef] = double(float(__ddiv_rn(k.step, limiter)));
}

// Phase 5: p = p - coef (s g), then p * decay.
template <class P, class G>
__global__ void apply_kernel(Apollo<G> a, UpdateOperands u) {
  P* p = static_cast<P*>(u.param);
  const G* g = static_cast<const G*>(u.grad);
  const float coef = float(a.w[a.l.coef]);
  FG_GRID_STRIDE(i, u.n) {
    const float s = a.scale_at(i / a.cols, i % a.cols);
    const float x = rn_sub(to_f32(p[i]), rn_mul(coef, rn_mul(s, to_f32(g[i]))));
    p[i] = round_param<P>(a.k.weight_decay ? rn_mul(x, a.k.decay) : x, i, u);
  }
}

}  // namespace

cudaError_t launch_apollo(const ApolloConstants& k, const UpdateOperands& u, const void* low,
                          int64_t rows, int64_t cols, int64_t rank, float* exp_avg,
                          float* exp_avg_sq, float* norm, double* workspace, cudaStream_t stream) {
  if (u.n == 0 || rank == 0) return cudaSuccess;
  return with_param_and_grad(u, [&](auto p_tag, auto g_tag) {
    using P = typename decltype(p_tag)::type;
    using G = typename decltype(g_tag)::type;
    const ApolloWorkspace l = backend::apollo_workspace(rows, cols, k.right);
    const Apollo<G> a{k,       rows,       cols,      rank, static_cast<const G*>(low),
                      exp_avg, exp_avg_sq, workspace, l};
    const int64_t channels = k.right ? rows : cols;
    const unsigned row_grid = unsigned(backend::cuda_line_blocks(rows));
    if (k.right)
      moments_rows_kernel<<<row_grid, unsigned(backend::cuda_row_threads(rank)), 0, stream>>>(a);
    else
      moments_cols_kernel<<<elementwise_blocks(cols), kCudaThreads, 0, stream>>>(a);
    FG_RETURN_ON_LAUNCH_ERROR();
    if (k.tensor_wise)
      tensor_scale_kernel<<<1, kCudaThreads, 0, stream>>>(workspace, l, channels);
    else
      channel_scales_kernel<<<elementwise_blocks(channels), kCudaThreads, 0, stream>>>(workspace, l,
                                                                                       channels);
    FG_RETURN_ON_LAUNCH_ERROR();
    row_sums_kernel<<<row_grid, unsigned(backend::cuda_row_threads(cols)), 0, stream>>>(
        a, static_cast<const G*>(u.grad));
    FG_RETURN_ON_LAUNCH_ERROR();
    limiter_kernel<<<1, kCudaThreads, 0, stream>>>(k, workspace, l, rows, norm);
    FG_RETURN_ON_LAUNCH_ERROR();
    apply_kernel<P, G><<<elementwise_blocks(u.n), kCudaThreads, 0, stream>>>(a, u);
    return cudaGetLastError();
  });
}

}  // namespace fitgrad::cuda
