// The cuda kernels that work a row at a time: layer_norm and rms_norm with their backward,
// (log_)softmax with its backward, and the fused cross-entropy's log-sum-exp, summed
// negative log-likelihood and gradient. One block of cuda_row_threads(n) threads takes one
// row (Note [CUDA launch shapes]); the formulas are the CPU's (tensor/cpu/norm.cpp,
// softmax.cpp, cross_entropy.cpp): two-pass row statistics, one rounding per output, sums of
// exponentials in double. Block reductions add in an order fixed by the block size, and the
// norms' dw / db go through partition partials added in partition order (Note
// [Deterministic weight gradients]), so every result is the same on every run.
#include <cfloat>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/launch.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::cuda {
namespace {

__shared__ float g_float_scratch[32];
__shared__ double g_double_scratch[32];

template <class E>
__device__ __forceinline__ float ld(const E* p, int64_t i) {
  return to_f32(p[i]);
}

// ---- norms ----

template <class E>
__global__ void layer_norm_kernel(const E* x, const E* w, const E* b, E* y, float* mean,
                                  float* rstd, int64_t c, float eps) {
  const int64_t r = blockIdx.x;
  const E* xr = x + r * c;
  E* yr = y + r * c;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) sum += ld(xr, i);
  const float mu = block_sum(sum, g_float_scratch) / float(c);
  float sq = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float d = ld(xr, i) - mu;
    sq += d * d;
  }
  const float rs = 1.0f / sqrtf(block_sum(sq, g_float_scratch) / float(c) + eps);
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float xhat = (ld(xr, i) - mu) * rs;
    yr[i] = from_f32<E>((w ? xhat * ld(w, i) : xhat) + (b ? ld(b, i) : 0.0f));
  }
}

template <class E>
__global__ void rms_norm_kernel(const E* x, const E* w, E* y, float* rstd, int64_t c, float eps) {
  const int64_t r = blockIdx.x;
  const E* xr = x + r * c;
  E* yr = y + r * c;
  float sq = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) sq += ld(xr, i) * ld(xr, i);
  const float rs = 1.0f / sqrtf(block_sum(sq, g_float_scratch) / float(c) + eps);
  if (threadIdx.x == 0) rstd[r] = rs;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x)
    yr[i] = from_f32<E>(w ? ld(xr, i) * rs * ld(w, i) : ld(xr, i) * rs);
}

// dx of one row: rstd (g - mean(g) - xhat mean(g xhat)) for layer norm (mean == nullptr:
// RMS norm, without the mean(g) term and with xhat = x rstd), g = dy w.
template <class E>
__global__ void norm_dx_kernel(const E* dy, const E* x, const E* w, const float* mean,
                               const float* rstd, E* dx, int64_t c) {
  const int64_t r = blockIdx.x;
  const E* dyr = dy + r * c;
  const E* xr = x + r * c;
  E* dxr = dx + r * c;
  const float mu = mean ? mean[r] : 0.0f, rs = rstd[r];
  float sum_g = 0, sum_gx = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float g = w ? ld(dyr, i) * ld(w, i) : ld(dyr, i);
    sum_g += g;
    sum_gx += g * (ld(xr, i) - mu) * rs;
  }
  const float mean_g = mean ? block_sum(sum_g, g_float_scratch) / float(c) : 0.0f;
  const float mean_gx = block_sum(sum_gx, g_float_scratch) / float(c);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float xhat = (ld(xr, i) - mu) * rs;
    const float g = w ? ld(dyr, i) * ld(w, i) : ld(dyr, i);
    dxr[i] = from_f32<E>(rs * (g - mean_g - xhat * mean_gx));
  }
}

// Partition blockIdx.y of `partitions`: its rows' dy xhat (into part_w) and dy (into part_b)
// for the columns of this block, `stride` floats between partitions' rows.
template <class E>
__global__ void norm_partials_kernel(const E* dy, const E* x, const float* mean, const float* rstd,
                                     float* part_w, float* part_b, int64_t stride, int64_t rows,
                                     int64_t c, int64_t partitions) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= c) return;
  const int64_t p = blockIdx.y;
  const int64_t begin = p * rows / partitions, end = (p + 1) * rows / partitions;
  float acc_w = 0, acc_b = 0;
  for (int64_t r = begin; r < end; ++r) {
    const float d = ld(dy + r * c, col);
    const float xhat = (ld(x + r * c, col) - (mean ? mean[r] : 0.0f)) * rstd[r];
    acc_w += d * xhat;
    acc_b += d;
  }
  if (part_w) part_w[p * stride + col] = acc_w;
  if (part_b) part_b[p * stride + col] = acc_b;
}

// out[col] = the partitions' partials added in partition order.
__global__ void sum_partials_kernel(const float* partials, int64_t partitions, int64_t stride,
                                    int64_t c, float* out) {
  const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= c) return;
  float s = 0;
  for (int64_t p = 0; p < partitions; ++p) s += partials[p * stride + col];
  out[col] = s;
}

// ---- softmax ----

template <class E>
// causal_t > 0: the row keeps its first (r % causal_t) + 1 + n_all - causal_t columns and
// the rest of y is 0 (backend::SoftmaxArgs).
__global__ void softmax_kernel(const E* x, E* y, int64_t n_all, int64_t inner, bool log,
                               int64_t causal_t) {
  const int64_t r = blockIdx.x;
  const int64_t base = (r / inner) * n_all * inner + r % inner;
  const E* xr = x + base;
  E* yr = y + base;
  const int64_t n = causal_t > 0 ? r % causal_t + 1 + n_all - causal_t : n_all;
  for (int64_t i = n + threadIdx.x; i < n_all; i += blockDim.x) yr[i * inner] = from_f32<E>(0.0f);
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, ld(xr, i * inner));
  mx = block_max(mx, g_float_scratch);
  float sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(ld(xr, i * inner) - mx);
  sum = block_sum(sum, g_float_scratch);
  if (log) {
    const float log_sum = logf(sum);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      yr[i * inner] = from_f32<E>((ld(xr, i * inner) - mx) - log_sum);
  } else {
    const float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      yr[i * inner] = from_f32<E>(expf(ld(xr, i * inner) - mx) * inv);
  }
}

template <class E>
__global__ void softmax_backward_kernel(const E* dy, const E* y, E* dx, int64_t n, int64_t inner,
                                        bool log) {
  const int64_t r = blockIdx.x;
  const int64_t base = (r / inner) * n * inner + r % inner;
  const E* dyr = dy + base;
  const E* yr = y + base;
  E* dxr = dx + base;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    sum += log ? ld(dyr, i * inner) : ld(dyr, i * inner) * ld(yr, i * inner);
  sum = block_sum(sum, g_float_scratch);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float g = ld(dyr, i * inner), v = ld(yr, i * inner);
    dxr[i * inner] = from_f32<E>(log ? g - expf(v) * sum : v * (g - sum));
  }
}

// ---- cross-entropy ----

__global__ void cross_entropy_lse_kernel(const float* x, float* lse, int64_t v) {
  const float* row = x + int64_t(blockIdx.x) * v;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < v; i += blockDim.x) mx = fmaxf(mx, row[i]);
  mx = block_max(mx, g_float_scratch);
  double sum = 0;
  for (int64_t i = threadIdx.x; i < v; i += blockDim.x) sum += double(expf(row[i] - mx));
  sum = block_sum(sum, g_double_scratch);
  if (threadIdx.x == 0) lse[blockIdx.x] = mx + float(::log(sum));
}

// stats[0] += the rows' lse - x[target] and stats[1] += the rows counted, skipping ignored
// rows and recording (then skipping) a target out of range; then, when loss is not null,
// *loss = stats[0] / stats[1] (0 when none counted). One block.
__global__ void cross_entropy_nll_kernel(const float* x, const float* lse, const int64_t* targets,
                                         int64_t rows, int64_t v, int64_t ignore_index,
                                         double* stats, float* loss, DeviceErrorRecord* errors) {
  double sum = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    if (t < 0 || t >= v) {
      record_error(errors, t);
      continue;
    }
    sum += double(lse[r]) - double(x[r * v + t]);
    count += 1;
  }
  sum = block_sum(sum, g_double_scratch);
  count = block_sum(count, g_double_scratch);
  if (threadIdx.x == 0) {
    stats[0] += sum;
    stats[1] += count;
    if (loss) *loss = stats[1] > 0 ? float(stats[0] / stats[1]) : 0.0f;
  }
}

// A row whose target is ignored, or out of range (recorded by the forward), is zero.
__global__ void cross_entropy_grad_kernel(const float* x, const float* lse, const int64_t* targets,
                                          int64_t v, int64_t ignore_index, const float* dloss,
                                          const double* stats, float* dx,
                                          DeviceErrorRecord* errors) {
  const int64_t r = blockIdx.x;
  const float* row = x + r * v;
  float* drow = dx + r * v;
  const int64_t t = targets[r];
  const bool skip = t == ignore_index || t < 0 || t >= v;
  if (threadIdx.x == 0 && t != ignore_index && skip) record_error(errors, t);
  const float g = stats[1] > 0 ? float(double(*dloss) / stats[1]) : 0.0f;
  const float l = lse[r];
  for (int64_t i = threadIdx.x; i < v; i += blockDim.x)
    drow[i] = skip ? 0.0f : g * expf(row[i] - l);
  __syncthreads();
  if (threadIdx.x == 0 && !skip) drow[t] -= g;
}

unsigned row_threads(int64_t n) { return unsigned(backend::cuda_row_threads(n)); }
unsigned column_blocks(int64_t c) {
  return unsigned(backend::cuda_ceil_div(c, backend::kCudaThreads));
}

}  // namespace

cudaError_t launch_layer_norm(DType dtype, const void* x, const void* w, const void* b, void* y,
                              float* mean, float* rstd, int64_t rows, int64_t c, float eps,
                              cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    layer_norm_kernel<E><<<unsigned(rows), row_threads(c), 0, stream>>>(
        static_cast<const E*>(x), static_cast<const E*>(w), static_cast<const E*>(b),
        static_cast<E*>(y), mean, rstd, c, eps);
  });
  return cudaGetLastError();
}

cudaError_t launch_rms_norm(DType dtype, const void* x, const void* w, void* y, float* rstd,
                            int64_t rows, int64_t c, float eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    rms_norm_kernel<E><<<unsigned(rows), row_threads(c), 0, stream>>>(
        static_cast<const E*>(x), static_cast<const E*>(w), static_cast<E*>(y), rstd, c, eps);
  });
  return cudaGetLastError();
}

cudaError_t launch_norm_backward(DType dtype, const void* dy, const void* x, const void* w,
                                 const float* mean, const float* rstd, void* dx, float* dw,
                                 float* db, float* partials, int64_t partitions, int64_t rows,
                                 int64_t c, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  // Layer norm's partials are (P, 2C), dw's then db's; RMS norm's (mean null) are (P, C).
  const int64_t stride = mean ? 2 * c : c;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* dye = static_cast<const E*>(dy);
    const E* xe = static_cast<const E*>(x);
    norm_dx_kernel<E><<<unsigned(rows), row_threads(c), 0, stream>>>(
        dye, xe, static_cast<const E*>(w), mean, rstd, static_cast<E*>(dx), c);
    if (dw == nullptr && db == nullptr) return;
    float* part_w = dw ? partials : nullptr;
    float* part_b = db ? partials + c : nullptr;
    const dim3 grid(column_blocks(c), unsigned(partitions));
    norm_partials_kernel<E><<<grid, backend::kCudaThreads, 0, stream>>>(
        dye, xe, mean, rstd, part_w, part_b, stride, rows, c, partitions);
    if (dw)
      sum_partials_kernel<<<column_blocks(c), backend::kCudaThreads, 0, stream>>>(
          partials, partitions, stride, c, dw);
    if (db)
      sum_partials_kernel<<<column_blocks(c), backend::kCudaThreads, 0, stream>>>(
          partials + c, partitions, stride, c, db);
  });
  return cudaGetLastError();
}

cudaError_t launch_softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n,
                           int64_t inner, bool log, int64_t causal_t, cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    softmax_kernel<E><<<unsigned(rows), row_threads(n), 0, stream>>>(
        static_cast<const E*>(x), static_cast<E*>(y), n, inner, log, causal_t);
  });
  return cudaGetLastError();
}

cudaError_t launch_softmax_backward(DType dtype, const void* dy, const void* y, void* dx,
                                    int64_t outer, int64_t n, int64_t inner, bool log,
                                    cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || n == 0) return cudaSuccess;
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    softmax_backward_kernel<E><<<unsigned(rows), row_threads(n), 0, stream>>>(
        static_cast<const E*>(dy), static_cast<const E*>(y), static_cast<E*>(dx), n, inner, log);
  });
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy(const float* x, const int64_t* targets, float* lse, double* stats,
                                 float* loss, int64_t rows, int64_t v, int64_t ignore_index,
                                 DeviceErrorRecord* errors, cudaStream_t stream) {
  if (rows > 0) cross_entropy_lse_kernel<<<unsigned(rows), row_threads(v), 0, stream>>>(x, lse, v);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (rows > 0 || loss != nullptr)
    cross_entropy_nll_kernel<<<1, 1024, 0, stream>>>(x, lse, targets, rows, v, ignore_index, stats,
                                                     loss, errors);
  return cudaGetLastError();
}

cudaError_t launch_cross_entropy_backward(const float* x, const float* lse, const int64_t* targets,
                                          int64_t rows, int64_t v, int64_t ignore_index,
                                          const float* dloss, const double* stats, float* dx,
                                          DeviceErrorRecord* errors, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  cross_entropy_grad_kernel<<<unsigned(rows), row_threads(v), 0, stream>>>(
      x, lse, targets, v, ignore_index, dloss, stats, dx, errors);
  return cudaGetLastError();
}

}  // namespace fitgrad::cuda
