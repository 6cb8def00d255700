// Naive attention on the cuda backend, the reference path (Note [CUDA naive attention] in
// tensor/backend/cuda_flash_launch.h): the (B, Hq, T, S) probabilities, and in the backward
// their gradient, are materialised in f32 and multiplied by one strided batched SIMT GEMM,
// operands read in their dtype and widened to f32, outputs rounded once. The formulas and
// the masking are tensor/cpu/attention_naive.cpp's: softmax rows over the visible keys
// (Note [Causal alignment] in tensor/cpu/attention_flash.cpp), zeros past them and for a
// row that sees no key; dscores = p (dp - rowsum(p dp)). A kv head's dk and dv sum its
// group's query heads as one product over (head, query), because the group's heads are
// contiguous in probs, dprobs, q and dout.
#include <cstdint>
#include <limits>

#include "cuda/kernels/attention_launch.h"
#include "cuda/kernels/device.cuh"
#include "tensor/backend/cuda_flash_launch.h"

namespace fitgrad::cuda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kTile = backend::kCudaNaiveTile;
constexpr int kRowWarps = backend::kCudaFlashRowWarps;

// Operand X of batch b: element (i, j) at data + (b / batch_div) batch_stride + i row_stride
// + j col_stride.
struct Operand {
  const void* data = nullptr;
  int64_t batch_stride = 0;
  int64_t batch_div = 1;
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

// c (batch, m, n) = alpha a (batch, m, kdim) b (batch, kdim, n), c rows contiguous.
template <class TA, class TB, class TC>
__global__ void gemm_kernel(int64_t m, int64_t n, int64_t kdim, float alpha, Operand a, Operand b,
                            TC* c) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const backend::CudaNaiveBlock blk = backend::cuda_naive_gemm_block(blockIdx.x, m, n);
  const int ty = threadIdx.x / kTile, tx = threadIdx.x % kTile;
  const int64_t row = blk.row_tile * kTile + ty, col = blk.col_tile * kTile + tx;
  const TA* ab = static_cast<const TA*>(a.data) + blk.batch / a.batch_div * a.batch_stride;
  const TB* bb = static_cast<const TB*>(b.data) + blk.batch / b.batch_div * b.batch_stride;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < kdim; k0 += kTile) {
    as[ty][tx] = row < m && k0 + tx < kdim
                     ? to_f32(ab[row * a.row_stride + (k0 + tx) * a.col_stride])
                     : 0.0f;
    bs[ty][tx] = k0 + ty < kdim && col < n
                     ? to_f32(bb[(k0 + ty) * b.row_stride + col * b.col_stride])
                     : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTile; ++kk) acc += as[ty][kk] * bs[kk][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[(blk.batch * m + row) * n + col] = from_f32<TC>(alpha * acc);
}

template <class TA, class TB, class TC>
cudaError_t naive_gemm(int64_t batch, int64_t m, int64_t n, int64_t kdim, float alpha,
                       const Operand& a, const Operand& b, void* c, cudaStream_t stream) {
  const int64_t blocks = backend::cuda_naive_gemm_blocks(batch, m, n);
  if (blocks == 0) return cudaSuccess;
  if (blocks > backend::kCudaMaxGridX) return cudaErrorInvalidConfiguration;
  gemm_kernel<TA, TB, TC><<<unsigned(blocks), kTile * kTile, 0, stream>>>(m, n, kdim, alpha, a, b,
                                                                          static_cast<TC*>(c));
  return cudaGetLastError();
}

// probs rows (rows, s) := softmax over the keys row % t sees, 0 elsewhere; hq heads a batch row.
__global__ void softmax_rows_kernel(float* probs, int64_t rows, int64_t hq, int64_t t, int64_t s,
                                    backend::AttentionMask mask) {
  const int64_t row = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  float* p = probs + row * s;
  const backend::CudaTileRange seen = backend::cuda_naive_visible(t, s, mask.row(row / (hq * t), t),
                                                                  row % t);  // Note [Packed rows]
  float mx = -kInf;
  for (int64_t j = seen.first + lane; j < seen.end; j += 32) mx = nan_max(mx, p[j]);
#pragma unroll
  for (int width = 16; width >= 1; width /= 2)
    mx = nan_max(mx, __shfl_xor_sync(0xffffffffu, mx, width));
  float sum = 0.0f;
  for (int64_t j = seen.first + lane; j < seen.end; j += 32) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
#pragma unroll
  for (int width = 16; width >= 1; width /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, width);
  const float inv = 1.0f / sum;
  for (int64_t j = seen.first + lane; j < seen.end; j += 32) p[j] *= inv;
  for (int64_t j = lane; j < seen.first; j += 32) p[j] = 0.0f;
  for (int64_t j = seen.end + lane; j < s; j += 32) p[j] = 0.0f;
}

// dprobs rows (rows, s) := p (dp - rowsum(p dp)).
__global__ void softmax_grad_rows_kernel(const float* probs, float* dprobs, int64_t rows,
                                         int64_t s) {
  const int64_t row = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* p = probs + row * s;
  float* dp = dprobs + row * s;
  float dot = 0.0f;
  for (int64_t j = lane; j < s; j += 32) dot += p[j] * dp[j];
#pragma unroll
  for (int width = 16; width >= 1; width /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, width);
  for (int64_t j = lane; j < s; j += 32) dp[j] = p[j] * (dp[j] - dot);
}

cudaError_t row_launch_check(int64_t rows) {
  return backend::cuda_flash_row_blocks(rows) > backend::kCudaMaxGridX
             ? cudaErrorInvalidConfiguration
             : cudaSuccess;
}

// probs (B Hq, T, S) = softmax(scale q k^T) with the mask.
template <class E>
cudaError_t naive_probabilities(const AttentionSizes& x, const void* q, const void* k, float* probs,
                                cudaStream_t stream) {
  const int64_t bh = x.batch * x.hq, group = x.hq / x.hkv, rows = bh * x.t;
  cudaError_t err = naive_gemm<E, E, float>(bh, x.t, x.s, x.d, x.scale, {q, x.t * x.d, 1, x.d, 1},
                                            {k, x.s * x.d, group, 1, x.d}, probs, stream);
  if (err != cudaSuccess || rows == 0 || x.s == 0) return err;
  if ((err = row_launch_check(rows)) != cudaSuccess) return err;
  softmax_rows_kernel<<<unsigned(backend::cuda_flash_row_blocks(rows)), 32 * kRowWarps, 0,
                        stream>>>(probs, rows, x.hq, x.t, x.s, x.mask);
  return cudaGetLastError();
}

template <class Fn>
cudaError_t naive_dtype_case(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(ElementTag<float>{});
    case DType::bf16: return fn(ElementTag<bf16>{});
    case DType::f16: return fn(ElementTag<f16>{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_naive_attention_forward(const AttentionSizes& x, DType dtype, const void* q,
                                           const void* k, const void* v, float* probs, void* o,
                                           cudaStream_t stream) {
  return naive_dtype_case(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const int64_t bh = x.batch * x.hq, group = x.hq / x.hkv;
    const cudaError_t err = naive_probabilities<E>(x, q, k, probs, stream);
    if (err != cudaSuccess) return err;
    // o (B Hq, T, D) = probs v
    return naive_gemm<float, E, E>(bh, x.t, x.d, x.s, 1.0f, {probs, x.t * x.s, 1, x.s, 1},
                                   {v, x.s * x.d, group, x.d, 1}, o, stream);
  });
}

cudaError_t launch_naive_attention_backward(const AttentionSizes& x, DType dtype, const void* dout,
                                            const void* q, const void* k, const void* v,
                                            float* probs, float* dprobs, void* dq, void* dk,
                                            void* dv, cudaStream_t stream) {
  return naive_dtype_case(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const int64_t bh = x.batch * x.hq, bkv = x.batch * x.hkv, group = x.hq / x.hkv;
    const int64_t rows = bh * x.t;
    cudaError_t err = naive_probabilities<E>(x, q, k, probs, stream);
    if (err != cudaSuccess) return err;
    // dprobs (B Hq, T, S) = dout v^T, then dscores = p (dp - rowsum(p dp)) over it
    err = naive_gemm<E, E, float>(bh, x.t, x.s, x.d, 1.0f, {dout, x.t * x.d, 1, x.d, 1},
                                  {v, x.s * x.d, group, 1, x.d}, dprobs, stream);
    if (err != cudaSuccess) return err;
    if (rows > 0 && x.s > 0) {
      if ((err = row_launch_check(rows)) != cudaSuccess) return err;
      softmax_grad_rows_kernel<<<unsigned(backend::cuda_flash_row_blocks(rows)), 32 * kRowWarps, 0,
                                 stream>>>(probs, dprobs, rows, x.s);
      if ((err = cudaGetLastError()) != cudaSuccess) return err;
    }
    // dq (B Hq, T, D) = scale dscores k
    err = naive_gemm<float, E, E>(bh, x.t, x.d, x.s, x.scale, {dprobs, x.t * x.s, 1, x.s, 1},
                                  {k, x.s * x.d, group, x.d, 1}, dq, stream);
    if (err != cudaSuccess) return err;
    // dk (B Hkv, S, D) = scale sum over the group's (head, query) of dscores^T q, and
    // dv likewise of probs^T dout
    const int64_t gt = group * x.t;
    err = naive_gemm<float, E, E>(bkv, x.s, x.d, gt, x.scale, {dprobs, gt * x.s, 1, 1, x.s},
                                  {q, gt * x.d, 1, x.d, 1}, dk, stream);
    if (err != cudaSuccess) return err;
    return naive_gemm<float, E, E>(bkv, x.s, x.d, gt, 1.0f, {probs, gt * x.s, 1, 1, x.s},
                                   {dout, gt * x.d, 1, x.d, 1}, dv, stream);
  });
}

}  // namespace fitgrad::cuda
