// What the optimizer kernels share on the device (cuda/kernels/optim.cu, apollo.cu): f32
// arithmetic with one rounding per operation (Note [One rounding per operation] in optim.cu),
// the parameter write with its stochastic rounding (tensor/cpu/param_store.h), the dispatch
// over the parameter's and the gradient's dtypes, and the elementwise grid.
#pragma once

#include <type_traits>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/optim_launch.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/random/philox.h"

namespace fitgrad::cuda {

// Returns the launch error, if any, from the enclosing launcher.
#define FG_RETURN_ON_LAUNCH_ERROR()                 \
  do {                                              \
    const cudaError_t fg_err_ = cudaGetLastError(); \
    if (fg_err_ != cudaSuccess) return fg_err_;     \
  } while (0)

// ---- f32 arithmetic (Note [One rounding per operation]) ----

__device__ __forceinline__ float rn_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float rn_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float rn_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float rn_div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float rn_sqrt(float a) { return __fsqrt_rn(a); }

// std::max(a, b): b only when a < b, so a NaN `a` wins and a NaN `b` loses, as on the CPU.
template <class T>
__device__ __forceinline__ T max_of(T a, T b) {
  return a < b ? b : a;
}

// ---- parameter writes (tensor/cpu/param_store.h) ----

// The 32 random bits of Philox draw `draw` of `seed` (Note [Philox streams]).
__device__ __forceinline__ uint32_t philox_bits(uint64_t seed, uint64_t draw) {
  const PhiloxCounter block = philox_block(seed, draw / 4);
  const uint32_t lane = uint32_t(draw % 4);
  return lane == 0 ? block[0] : lane == 1 ? block[1] : lane == 2 ? block[2] : block[3];
}

// x as element i of the parameter: bf16 with stochastic rounding adds 16 random bits to the
// 16 it drops and truncates (finite x only); everything else rounds to nearest even.
template <class P>
__device__ __forceinline__ P round_param(float x, int64_t i, const UpdateOperands& u) {
  if constexpr (std::is_same_v<P, bf16>) {
    if (u.stochastic && isfinite(x)) {
      const uint32_t bits = philox_bits(u.seed, u.offset + uint64_t(i));
      return __ushort_as_bfloat16((unsigned short)((__float_as_uint(x) + (bits & 0xFFFFu)) >> 16));
    }
  }
  return from_f32<P>(x);
}

// ---- dispatch ----

// fn(ElementTag<P>{}, ElementTag<G>{}) for the operands' param and grad types, returning its
// error; cudaErrorInvalidValue when either dtype is not floating.
template <class Fn>
cudaError_t with_param_and_grad(const UpdateOperands& u, Fn&& fn) {
  cudaError_t err = cudaErrorInvalidValue;
  dispatch_floating(u.param_dtype, [&](auto p) {
    dispatch_floating(u.grad_dtype, [&](auto g) { err = fn(p, g); });
  });
  return err;
}

inline unsigned elementwise_blocks(int64_t n) {
  return unsigned(backend::cuda_elementwise_blocks(n));
}

}  // namespace fitgrad::cuda
