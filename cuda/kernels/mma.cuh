// The tensor-core primitives of the mma kernels (cuda/kernels/attention_flash.cu and
// attention_flash_backward.cu), as inline PTX for sm_80 and later: cp.async copies into
// shared memory, ldmatrix, the m16n8k16 mma with f32 accumulators, and the register moves
// between its fragments (Note
// [mma fragments] in tensor/backend/cuda_flash_launch.h gives the layouts).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/kernels/device.cuh"
#include "tensor/backend/cuda_flash_launch.h"

namespace fitgrad::cuda {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global src to shared dst without waiting; zeros when !valid (src unread).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 16-bit matrices; p is this lane's row address (Note [mma fragments]).
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(p)));
}

// c (16x8 f32) += a (16x16) b (16x8), operands of E (bf16 or f16).
template <class E>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (std::is_same_v<E, bf16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to E, lo in the low half.
template <class E>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t bits;
  if constexpr (std::is_same_v<E, bf16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &v, 4);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&bits, &v, 4);
  }
  return bits;
}

// The A fragment of k-block kk of the product whose A operand is the (16, 8 n) f32 C tile c.
template <class E, int N>
__device__ __forceinline__ void a_from_c(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const backend::CudaAFromC src = backend::cuda_mma_a_from_c(r);
    a[r] = pack2<E>(c[2 * kk + src.tile][2 * src.pair], c[2 * kk + src.tile][2 * src.pair + 1]);
  }
}

// Rows [row0, row0 + kRows) of a (n, d) matrix into a (kRows, kLd) shared tile, kD columns,
// with zeros for rows >= n and columns >= d (d is a multiple of 8), asynchronously.
template <int kD, int kLd, int kRows, int kThreads, class E>
__device__ __forceinline__ void load_tile(E* dst, const E* src, int64_t row0, int64_t n,
                                          int64_t d) {
  constexpr int kChunks = kD / 8;
  for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, col = c % kChunks * 8;
    const bool valid = row0 + r < n && col < d;
    cp_async_16(dst + r * kLd + col, valid ? src + (row0 + r) * d + col : src, valid);
  }
}

}  // namespace fitgrad::cuda
