// The cuda kernels of copy, fill and the elementwise ops (arithmetic, the activations and
// their backward), over strided operands (launch.h's StridedPack). The formulas are the CPU's
// (tensor/cpu/elementwise.h): gelu is x sigmoid(2u) (Note [gelu through sigmoid]), and
// conversions follow tensor/convert.h: half <-> float exactly or rounded to nearest even,
// integers to a half through a float rounded to odd (Note [Integer to half rounding]),
// floats to integers truncated and saturated with NaN to 0 (Note [Float to integer
// saturation]), integers to integers wrapping.
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/launch.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::cuda {
namespace {

// ---- conversions ----

template <class T>
inline constexpr bool kHalfLike = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// |x| as a float rounded to odd at 24 significant bits, with x's sign.
__device__ float round_to_odd_float(uint64_t magnitude, bool negative) {
  int shift = 0;
  for (uint64_t m = magnitude; m >= (uint64_t(1) << 24); m >>= 1) ++shift;
  if (shift > 0) {
    const bool inexact = (magnitude & ((uint64_t(1) << shift) - 1)) != 0;
    magnitude = (magnitude >> shift) | uint64_t(inexact);
  }
  const float f = ldexpf(float(magnitude), shift);
  return negative ? -f : f;
}

template <class I>
__device__ I saturate(float x) {
  if (isnan(x)) return 0;
  const double upper = ldexp(1.0, sizeof(I) * 8 - (std::is_signed_v<I> ? 1 : 0));
  const double lower = std::is_signed_v<I> ? -upper : 0.0;
  const double v = double(x);
  if (v >= upper) return std::is_signed_v<I> ? I((uint64_t(upper) - 1)) : I(~I(0));
  if (v <= lower) return std::is_signed_v<I> ? I(int64_t(lower)) : I(0);
  return I(v);
}

template <class D, class S>
__device__ __forceinline__ D convert_element(S x) {
  if constexpr (std::is_same_v<D, S>) {
    return x;
  } else if constexpr (kHalfLike<S>) {
    return convert_element<D>(to_f32(x));
  } else if constexpr (kHalfLike<D>) {
    if constexpr (std::is_same_v<S, float>) {
      return from_f32<D>(x);
    } else {
      const bool negative = std::is_signed_v<S> && x < 0;
      const uint64_t magnitude = negative ? uint64_t(0) - uint64_t(int64_t(x)) : uint64_t(x);
      return from_f32<D>(round_to_odd_float(magnitude, negative));
    }
  } else if constexpr (std::is_same_v<D, float>) {
    return float(x);
  } else if constexpr (std::is_same_v<S, float>) {
    return saturate<D>(x);
  } else {
    return D(x);
  }
}

// Calls fn with the tag of a storage dtype's device type.
template <class Fn>
void dispatch_storage(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::f32: return fn(ElementTag<float>{});
    case DType::f16: return fn(ElementTag<f16>{});
    case DType::bf16: return fn(ElementTag<bf16>{});
    case DType::i32: return fn(ElementTag<int32_t>{});
    case DType::i64: return fn(ElementTag<int64_t>{});
    case DType::u8: return fn(ElementTag<uint8_t>{});
    case DType::i8: return fn(ElementTag<int8_t>{});
  }
}

// The element offsets of linear index `linear` in every operand of p.
template <int N>
__device__ __forceinline__ void offsets_of(const StridedPack<N>& p, int64_t linear, int64_t* off) {
  for (int i = 0; i < N; ++i) off[i] = 0;
  for (int d = p.dims - 1; d >= 0; --d) {
    const int64_t size = p.sizes[d];
    const int64_t idx = linear % size;
    linear /= size;
    for (int i = 0; i < N; ++i) off[i] += idx * p.strides[i][d];
  }
}

template <class T, int N>
__device__ __forceinline__ T* at(const StridedPack<N>& p, int i, int64_t off) {
  return reinterpret_cast<T*>(p.data[i]) + off;
}

// ---- copy and fill ----

template <class D, class S>
__global__ void copy_kernel(StridedPack<2> p, int64_t n) {
  FG_GRID_STRIDE(i, n) {
    int64_t off[2];
    offsets_of(p, i, off);
    *at<D>(p, 0, off[0]) = convert_element<D>(*at<S>(p, 1, off[1]));
  }
}

template <class D>
__global__ void fill_kernel(StridedPack<1> p, int64_t n, D value) {
  FG_GRID_STRIDE(i, n) {
    int64_t off[1];
    offsets_of(p, i, off);
    *at<D>(p, 0, off[0]) = value;
  }
}

unsigned blocks_for(int64_t n) { return unsigned(backend::cuda_elementwise_blocks(n)); }
constexpr unsigned kThreads = backend::kCudaThreads;

// ---- the f32 elementwise ops ----

constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

using Op = Elementwise;

template <Op K>
__device__ __forceinline__ float apply(float x, float y, float param) {
  if constexpr (K == Op::neg) return -x;
  if constexpr (K == Op::exp) return expf(x);
  if constexpr (K == Op::tanh) return tanhf(x);
  if constexpr (K == Op::log) return logf(x);
  if constexpr (K == Op::sqrt) return sqrtf(x);
  if constexpr (K == Op::rsqrt) return 1.0f / sqrtf(x);
  if constexpr (K == Op::pow) return powf(x, param);
  if constexpr (K == Op::scale) return x * param;
  if constexpr (K == Op::add_scalar) return x + param;
  if constexpr (K == Op::gelu) return x * sigmoid(2.0f * kGeluK * (x + kGeluC * x * x * x));
  if constexpr (K == Op::silu) return x * sigmoid(x);
  if constexpr (K == Op::add) return x + y;
  if constexpr (K == Op::sub) return x - y;
  if constexpr (K == Op::mul) return x * y;
  if constexpr (K == Op::div) return x / y;
  if constexpr (K == Op::gelu_backward) {  // x is dy, y is the input
    const float s = sigmoid(2.0f * kGeluK * (y + kGeluC * y * y * y));
    return x * (s + 2.0f * y * s * (1.0f - s) * kGeluK * (1.0f + 3.0f * kGeluC * y * y));
  }
  if constexpr (K == Op::silu_backward) return x * silu_grad(y);
  if constexpr (K == Op::swiglu) return x * sigmoid(x) * y;  // x is the gate, y is up
  return 0.0f;
}

template <Op K, int N>
__global__ void elementwise_kernel(StridedPack<N> p, int64_t n, float param) {
  FG_GRID_STRIDE(i, n) {
    int64_t off[N];
    offsets_of(p, i, off);
    const float x = *at<float>(p, 1, off[1]);
    const float y = N > 2 ? *at<float>(p, N - 1, off[N - 1]) : 0.0f;
    *at<float>(p, 0, off[0]) = apply<K>(x, y, param);
  }
}

// Note [Vectorised elementwise]
// The front-ends collapse contiguous operands to one dim of stride 1; when every operand is
// so, 16-byte aligned and n a multiple of 4, each thread moves a float4 per operand (one
// 128-bit load or store), which is what reaching the memory bandwidth takes.
template <int N>
bool vectorisable(const StridedPack<N>& p, int64_t n) {
  if (p.dims != 1 || n % 4 != 0) return false;
  for (int i = 0; i < N; ++i)
    if (p.strides[i][0] != 1 || reinterpret_cast<uintptr_t>(p.data[i]) % 16 != 0) return false;
  return true;
}

template <Op K, int N>
__global__ void elementwise_vec4_kernel(StridedPack<N> p, int64_t n4, float param) {
  FG_GRID_STRIDE(i, n4) {
    const float4 x = reinterpret_cast<const float4*>(p.data[1])[i];
    const float4 y = N > 2 ? reinterpret_cast<const float4*>(p.data[N - 1])[i] : float4{};
    reinterpret_cast<float4*>(p.data[0])[i] =
        float4{apply<K>(x.x, y.x, param), apply<K>(x.y, y.y, param), apply<K>(x.z, y.z, param),
               apply<K>(x.w, y.w, param)};
  }
}

template <Op K, int N>
cudaError_t run(const StridedPack<N>& p, int64_t n, float param, cudaStream_t stream) {
  if (vectorisable(p, n))
    elementwise_vec4_kernel<K, N><<<blocks_for(n), kThreads, 0, stream>>>(p, n / 4, param);
  else
    elementwise_kernel<K, N><<<blocks_for(n), kThreads, 0, stream>>>(p, n, param);
  return cudaGetLastError();
}

__global__ void swiglu_backward_kernel(StridedPack<5> p, int64_t n) {
  FG_GRID_STRIDE(i, n) {
    int64_t off[5];
    offsets_of(p, i, off);
    const float dy = *at<float>(p, 2, off[2]), g = *at<float>(p, 3, off[3]),
                u = *at<float>(p, 4, off[4]);
    const float s = sigmoid(g);
    *at<float>(p, 0, off[0]) = dy * u * s * (1.0f + g * (1.0f - s));
    *at<float>(p, 1, off[1]) = dy * g * s;
  }
}

}  // namespace

cudaError_t launch_copy(const StridedPack<2>& p, int64_t n, DType dst, DType src,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dst == src && p.dims == 1 && p.strides[0][0] == 1 && p.strides[1][0] == 1)
    return cudaMemcpyAsync(p.data[0], p.data[1], size_t(n) * element_size(dst),
                           cudaMemcpyDeviceToDevice, stream);
  dispatch_storage(dst, [&](auto d) {
    dispatch_storage(src, [&](auto s) {
      using D = typename decltype(d)::type;
      using S = typename decltype(s)::type;
      copy_kernel<D, S><<<blocks_for(n), kThreads, 0, stream>>>(p, n);
    });
  });
  return cudaGetLastError();
}

cudaError_t launch_fill(const StridedPack<1>& p, int64_t n, DType dtype, uint64_t bits,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  dispatch_storage(dtype, [&](auto d) {
    using D = typename decltype(d)::type;
    D value;
    memcpy(static_cast<void*>(&value), &bits, sizeof(D));
    fill_kernel<D><<<blocks_for(n), kThreads, 0, stream>>>(p, n, value);
  });
  return cudaGetLastError();
}

cudaError_t launch_unary(Elementwise op, const StridedPack<2>& p, int64_t n, float param,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case Op::neg: return run<Op::neg>(p, n, param, stream);
    case Op::exp: return run<Op::exp>(p, n, param, stream);
    case Op::tanh: return run<Op::tanh>(p, n, param, stream);
    case Op::log: return run<Op::log>(p, n, param, stream);
    case Op::sqrt: return run<Op::sqrt>(p, n, param, stream);
    case Op::rsqrt: return run<Op::rsqrt>(p, n, param, stream);
    case Op::pow: return run<Op::pow>(p, n, param, stream);
    case Op::scale: return run<Op::scale>(p, n, param, stream);
    case Op::add_scalar: return run<Op::add_scalar>(p, n, param, stream);
    case Op::gelu: return run<Op::gelu>(p, n, param, stream);
    case Op::silu: return run<Op::silu>(p, n, param, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_binary(Elementwise op, const StridedPack<3>& p, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case Op::add: return run<Op::add>(p, n, 0.0f, stream);
    case Op::sub: return run<Op::sub>(p, n, 0.0f, stream);
    case Op::mul: return run<Op::mul>(p, n, 0.0f, stream);
    case Op::div: return run<Op::div>(p, n, 0.0f, stream);
    case Op::gelu_backward: return run<Op::gelu_backward>(p, n, 0.0f, stream);
    case Op::silu_backward: return run<Op::silu_backward>(p, n, 0.0f, stream);
    case Op::swiglu: return run<Op::swiglu>(p, n, 0.0f, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_swiglu_backward(const StridedPack<5>& p, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  swiglu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, n);
  return cudaGetLastError();
}

}  // namespace fitgrad::cuda
