// The launchers of the cuda attention kernels (attention_flash.cu,
// attention_flash_backward.cu, attention_flash_simt.cu, attention_naive.cu): plain functions
// of values, pointers and the stream, so that the adapters in cuda/ops/attention.cpp call
// them without the kernels seeing fitgrad's headers (Note [No fmt in .cu files] in
// device.cuh). Each returns the first failing cudaError_t of
// its launches. The operands are contiguous in the (batch, head, position, dim) layout of
// tensor/cpu/attention.h and of one floating dtype (f32, bf16 or f16), named by `dtype`;
// lse, delta, probs and dprobs are f32. The caller has checked the shapes, the head dim
// (<= kCudaFlashMaxHeadDim) and, for the flash kernels, that the path (cuda_flash_path) and
// its shared memory (cuda_flash_smem_bytes) suit the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/backend/attention_mask.h"
#include "tensor/backend/cuda_flash_launch.h"
#include "tensor/dtype.h"

namespace fitgrad::cuda {

struct AttentionSizes {
  int64_t batch = 0;
  int64_t hq = 0;   // query heads
  int64_t hkv = 0;  // key/value heads, divides hq
  int64_t t = 0;    // queries
  int64_t s = 0;    // keys
  int64_t d = 0;    // head dim
  backend::AttentionMask mask;
  float scale = 1;
  // Dropout on the probabilities, element (b, h, i, j) taking Philox draw dropout_offset +
  // its flat index of dropout_seed; dropout_p = 0 is none (Note [Dropout inside flash
  // attention] in tensor/ops/attention.h, attention_dropout.cuh).
  double dropout_p = 0;
  uint64_t dropout_seed = 0, dropout_offset = 0;
};

// o (B, Hq, T, D) and lse (B, Hq, T) from q (B, Hq, T, D), k and v (B, Hkv, S, D).
cudaError_t launch_flash_attention_forward(const AttentionSizes& x, DType dtype,
                                           backend::CudaFlashPath path, const void* q,
                                           const void* k, const void* v, void* o, float* lse,
                                           cudaStream_t stream);

// dq (B, Hq, T, D), dk and dv (B, Hkv, S, D) from dout, q, o, k, v and lse. delta (B, Hq, T)
// is scratch; no other workspace (Note [CUDA attention accumulation] in
// attention_flash_backward.cu).
cudaError_t launch_flash_attention_backward(const AttentionSizes& x, DType dtype,
                                            backend::CudaFlashPath path, const void* dout,
                                            const void* q, const void* k, const void* v,
                                            const void* o, const float* lse, float* delta, void* dq,
                                            void* dk, void* dv, cudaStream_t stream);

// o through the materialised probabilities probs (B, Hq, T, S).
cudaError_t launch_naive_attention_forward(const AttentionSizes& x, DType dtype, const void* q,
                                           const void* k, const void* v, float* probs, void* o,
                                           cudaStream_t stream);
// dq, dk, dv through probs and dprobs (B, Hq, T, S), both scratch.
cudaError_t launch_naive_attention_backward(const AttentionSizes& x, DType dtype, const void* dout,
                                            const void* q, const void* k, const void* v,
                                            float* probs, float* dprobs, void* dq, void* dk,
                                            void* dv, cudaStream_t stream);

// ---- shared by the flash launchers (attention_flash*.cu) ----

// The simt path's forward, and its backward after delta: the dK/dV kernel, then the dQ
// kernel (Note [CUDA attention accumulation]).
cudaError_t launch_flash_forward_simt(const AttentionSizes& x, DType dtype, const void* q,
                                      const void* k, const void* v, void* o, float* lse,
                                      cudaStream_t stream);
cudaError_t launch_flash_backward_simt(const AttentionSizes& x, DType dtype, const void* dout,
                                       const void* q, const void* k, const void* v,
                                       const float* lse, const float* delta, void* dq, void* dk,
                                       void* dv, cudaStream_t stream);

}  // namespace fitgrad::cuda
