// The tensor-core (mma) path of flash attention on the cuda backend, shared by its forward
// (attention_flash.cu) and backward (attention_flash_backward.cu) kernels: their parameters,
// the base-2 constants, the launch of one kernel and the dtype dispatch (Note [CUDA flash
// attention] in tensor/backend/cuda_flash_launch.h; the simt path is attention_flash_simt.cu).
// The arithmetic is the CPU kernels' (tensor/cpu/attention_flash.cpp): lse is the natural-log
// log-sum-exp of the scaled scores, a query that sees no key gets o = 0 and lse = -inf and
// passes on no gradient, and a NaN score reaches o and lse. Scores are kept in the base-2
// domain (scale log2(e), then exp2), as FlashAttention-2 does, and lse is converted back.
//
// Note [CUDA flash mma kernels]
// Each warp owns 16 rows of its block's tile (query rows in the forward and the dQ kernel,
// key rows in the dK/dV kernel) and computes with mma.sync.m16n8k16 (Note [mma fragments]
// in cuda_flash_launch.h); operands reach registers through ldmatrix from shared tiles that
// cp.async fills, 16 bytes at a time, with zeros past the sequence and head dim ends.
// Forward: q stays in registers as A fragments; S = Q K^T, the online softmax on the C
// fragments (the row max and sum across the four lanes of a row with two shuffles; each
// lane keeps a partial sum until the end), and P, rounded to the operand dtype, is the A
// operand of O += P V without leaving registers. Backward dK/dV (FlashAttention-2's): S^T =
// K Q^T and dP^T = V dO^T per warp, P^T and dS^T on the fragments, dV += P^T dO and dK +=
// dS^T Q with both A operands from registers; the query tiles (with their lse and delta)
// are double-buffered across the steps (query head, query tile). Backward dQ: the forward's
// layout with q and dout kept in shared memory, S = Q K^T and dP = dO V^T per warp, P and
// dS on the fragments, and dQ += dS K with dS from registers; key and value tiles are
// double-buffered. With dropout (attention_dropout.cuh) the forward scales P by its factors
// after the online softmax has summed it, before P V, and the backward kernels take
// Z = f P for dV and dS = P (f dP - delta) (Note [Dropout inside flash attention] in
// tensor/ops/attention.h).
#pragma once

#include <cstdint>
#include <limits>

#include "cuda/kernels/attention_dropout.cuh"
#include "cuda/kernels/attention_launch.h"
#include "cuda/kernels/device.cuh"
#include "tensor/backend/cuda_flash_launch.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::cuda {

using backend::CudaFlashMmaConfig;

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

struct ForwardParams {
  int64_t batch, hq, hkv, t, s, d;
  backend::AttentionMask mask;
  float scale_log2;  // scale * log2(e)
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  FlashDropout drop;
};

struct BackwardParams {
  int64_t batch, hq, hkv, t, s, d;
  backend::AttentionMask mask;
  float scale, scale_log2;
  const void* dout;
  const void* q;
  const void* k;
  const void* v;
  const float* lse;
  const float* delta;
  void* dq;  // (B, Hq, T, D)
  void* dk;  // (B, Hkv, S, D)
  void* dv;
  FlashDropout drop;
};

template <class Kernel, class Params>
cudaError_t launch_mma(Kernel kernel, int64_t blocks, int threads, int64_t smem,
                       const Params& params, cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  if (blocks > backend::kCudaMaxGridX) return cudaErrorInvalidConfiguration;
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  kernel<<<unsigned(blocks), threads, size_t(smem), stream>>>(params);
  return cudaGetLastError();
}

template <class Fn>
cudaError_t flash_dtype_case(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(ElementTag<float>{});
    case DType::bf16: return fn(ElementTag<bf16>{});
    case DType::f16: return fn(ElementTag<f16>{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace fitgrad::cuda
