// Flash attention on the cuda backend, the simt path: f32 operands, and bf16/f16 operands
// that the tensor-core path does not take (head dims over 128 or not a multiple of 8,
// operands not 16-byte aligned, cards before sm_80); Note [CUDA flash attention] in
// tensor/backend/cuda_flash_launch.h. Tiles are widened to f32 in shared memory and the
// products are plain FMA; the deterministic backward's two kernels and the masking are the
// mma path's (Note [CUDA attention accumulation] in attention_flash_backward.cu), in
// natural-log units as on the CPU.
//
// Note [CUDA flash simt kernels]
// A lane is a key of the tile (kBc = 32) for the scores, and a column (x = lane + 32 u, u <
// U) for the products with v, dout, q and k; U, the head dim's 32-column chunks, is a
// template parameter, so every accumulator array is registers. Forward: each warp owns
// kRows query rows, computes its kRows scores against its key, does the online softmax
// with butterfly shuffles (a fixed order), and takes p_j from lane j by a shuffle for
// O += P V. Backward dK/dV: for each (query head, query tile) of its walk, each warp
// computes S and dP for kRows query rows and writes P and dS to shared memory, and after a
// barrier adds P^T dO and dS^T Q to the dk and dv of its kKeysPerWarp keys, kept in
// registers. Backward dQ: the forward's layout; each warp computes S, dP, P and dS of its
// kRows rows against key `lane` and takes ds_j from lane j by a shuffle for dQ += dS K.
// With dropout (attention_dropout.cuh) the forward scales p_j by its factor after the
// online softmax has summed it, and the backward kernels take Z = f P for dV and
// dS = P (f dP - delta) (Note [Dropout inside flash attention] in tensor/ops/attention.h).
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/kernels/attention_dropout.cuh"
#include "cuda/kernels/attention_launch.h"
#include "cuda/kernels/attention_softcap.cuh"
#include "cuda/kernels/device.cuh"
#include "tensor/backend/cuda_flash_launch.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::cuda {
namespace {

using Simt = backend::CudaFlashSimtConfig;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Params {
  int64_t batch, hq, hkv, t, s, d;
  backend::AttentionMask mask;
  float scale;
  const void* dout;  // backward only
  const void* q;
  const void* k;
  const void* v;
  void* o;           // forward only
  float* lse_out;    // forward only
  const float* lse;  // backward only
  const float* delta;
  void* dq;  // (B, Hq, T, D)
  void* dk;  // (B, Hkv, S, D)
  void* dv;
  FlashDropout drop;
};

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int width = 16; width >= 1; width /= 2)
    x = nan_max(x, __shfl_xor_sync(0xffffffffu, x, width));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int width = 16; width >= 1; width /= 2) x += __shfl_xor_sync(0xffffffffu, x, width);
  return x;
}

// Rows [row0, row0 + rows) of a (n, d) matrix of E into a (rows, ld) f32 tile, zeros past n.
template <class E>
__device__ __forceinline__ void widen_rows(float* dst, int64_t ld, const E* src, int64_t row0,
                                           int64_t rows, int64_t n, int64_t d) {
  for (int64_t i = threadIdx.x; i < rows * d; i += Simt::kThreads) {
    const int64_t r = i / d, x = i % d;
    dst[r * ld + x] = row0 + r < n ? to_f32(src[(row0 + r) * d + x]) : 0.0f;
  }
}

template <class E, int U>
__global__ void __launch_bounds__(Simt::kThreads) simt_forward_kernel(Params p) {
  constexpr int kRows = Simt::kRows, kBr = Simt::kBr, kBc = Simt::kBc;
  const float cap = float(p.mask.softcap);  // natural units (attention_softcap.cuh)
  extern __shared__ float smem[];
  const int64_t d = p.d;
  float* qs = smem;                // (kBr, d)
  float* ks = qs + kBr * d;        // (kBc, d + 1)
  float* vs = ks + kBc * (d + 1);  // (kBc, d)

  const int64_t q_tiles = backend::cuda_ceil_div(p.t, kBr);
  const backend::CudaFlashBlock blk =
      backend::cuda_flash_forward_block(blockIdx.x, p.batch * p.hq, q_tiles, p.mask.causal);
  const int64_t bh = blk.bh, q0 = blk.tile * kBr;
  const int64_t kvh = backend::cuda_flash_kv_head(bh, p.hq, p.hkv);
  const backend::AttentionMask mask = p.mask.row(bh / p.hq, p.t);  // Note [Packed rows]
  const E* q = static_cast<const E*>(p.q) + bh * p.t * d;          // (T, D)
  const E* k = static_cast<const E*>(p.k) + kvh * p.s * d;         // (S, D)
  const E* v = static_cast<const E*>(p.v) + kvh * p.s * d;         // (S, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const backend::CudaTileRange keys = backend::cuda_flash_key_tiles(p.t, p.s, mask, q0, kBr, kBc);
  const float* qw = qs + warp * kRows * d;  // (kRows, d) this warp's rows

  widen_rows(qs, d, q, q0, kBr, p.t, d);
  float m[kRows], l[kRows], o[kRows][U];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -kInf;
    l[r] = 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u) o[r][u] = 0.0f;
  }

  for (int64_t jt = keys.first; jt < keys.end; ++jt) {
    const int64_t j0 = jt * kBc;
    __syncthreads();  // the previous tile is consumed
    widen_rows(ks, d + 1, k, j0, kBc, p.s, d);
    widen_rows(vs, d, v, j0, kBc, p.s, d);
    __syncthreads();

    float s[kRows] = {};
    const float* krow = ks + lane * (d + 1);
    for (int64_t x = 0; x < d; ++x) {
      const float kx = krow[x];
#pragma unroll
      for (int r = 0; r < kRows; ++r) s[r] += qw[r * d + x] * kx;
    }
    const int64_t j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = q0 + warp * kRows + r;
      float x = soft_capped(s[r] * p.scale, cap);
      if (backend::cuda_flash_hidden(p.t, p.s, mask, i, j)) x = -kInf;
      const float mx = nan_max(m[r], warp_max(x));
      const float base = mx == -kInf ? 0.0f : mx;  // no visible key yet: p and alpha are 0
      const float alpha = expf(m[r] - base);
      s[r] = expf(x - base);
      l[r] = l[r] * alpha + warp_sum(s[r]);  // the undropped probabilities
      m[r] = mx;
      if (p.drop.on()) s[r] *= p.drop.factor(bh, i, j);
#pragma unroll
      for (int u = 0; u < U; ++u) o[r][u] *= alpha;
    }
    for (int jj = 0; jj < kBc; ++jj) {
      const float* vrow = vs + jj * d;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float pj = __shfl_sync(0xffffffffu, s[r], jj);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t x = lane + 32 * u;
          if (x < d) o[r][u] += pj * vrow[x];
        }
      }
    }
  }

  E* out = static_cast<E*>(p.o) + bh * p.t * d;  // (T, D)
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = q0 + warp * kRows + r;
    if (i >= p.t) continue;
    const float inv = l[r] == 0.0f ? 0.0f : 1.0f / l[r];  // 0: sees no key
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t x = lane + 32 * u;
      if (x < d) out[i * d + x] = from_f32<E>(o[r][u] * inv);
    }
    if (lane == 0) p.lse_out[bh * p.t + i] = l[r] == 0.0f ? -kInf : m[r] + logf(l[r]);
  }
}

// dK and dV of one (key tile, batch x kv head): the query heads of the group in order, each
// over the query tiles that see the tile in order.
template <class E, int U>
__global__ void __launch_bounds__(Simt::kThreads) simt_backward_dkdv_kernel(Params p) {
  constexpr int kRows = Simt::kRows, kBr = Simt::kBr, kBc = Simt::kBc;
  constexpr int kKeys = Simt::kKeysPerWarp, kPld = kBc + 1;
  const float cap = float(p.mask.softcap);  // natural units (attention_softcap.cuh)
  extern __shared__ float smem[];
  const int64_t d = p.d;
  float* ks = smem;                 // (kBc, d + 1)
  float* vs = ks + kBc * (d + 1);   // (kBc, d + 1)
  float* qs = vs + kBc * (d + 1);   // (kBr, d)
  float* dos = qs + kBr * d;        // (kBr, d)
  float* ps = dos + kBr * d;        // (kBr, kPld) P
  float* dss = ps + kBr * kPld;     // (kBr, kPld) dS
  float* lse_s = dss + kBr * kPld;  // (kBr) lse, +inf where p is 0
  float* delta_s = lse_s + kBr;     // (kBr)

  const backend::CudaFlashBlock blk =
      backend::cuda_flash_backward_block(blockIdx.x, p.batch * p.hkv);
  const int64_t kvh = blk.bh, j0 = blk.tile * kBc;
  const backend::AttentionMask mask = p.mask.row(kvh / p.hkv, p.t);  // Note [Packed rows]
  const E* k = static_cast<const E*>(p.k) + kvh * p.s * d;           // (S, D)
  const E* v = static_cast<const E*>(p.v) + kvh * p.s * d;           // (S, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const backend::CudaTileRange queries =
      backend::cuda_flash_query_tiles(p.t, p.s, mask, j0, kBc, kBr);

  widen_rows(ks, d + 1, k, j0, kBc, p.s, d);
  widen_rows(vs, d + 1, v, j0, kBc, p.s, d);
  float dk[kKeys][U] = {}, dv[kKeys][U] = {};  // this warp's keys

  for (int64_t h = 0; h < p.hq / p.hkv; ++h) {
    const int64_t bh = backend::cuda_flash_group_head(kvh, p.hq, p.hkv, h);
    const E* q = static_cast<const E*>(p.q) + bh * p.t * d;        // (T, D)
    const E* dout = static_cast<const E*>(p.dout) + bh * p.t * d;  // (T, D)
    const float* lse = p.lse + bh * p.t;                           // (T)
    const float* delta = p.delta + bh * p.t;                       // (T)
    for (int64_t it = queries.first; it < queries.end; ++it) {
      const int64_t q0 = it * kBr;
      __syncthreads();  // the previous tile is consumed
      widen_rows(qs, d, q, q0, kBr, p.t, d);
      widen_rows(dos, d, dout, q0, kBr, p.t, d);
      for (int r = threadIdx.x; r < kBr; r += Simt::kThreads) {
        const bool inside = q0 + r < p.t;
        const float value = inside ? lse[q0 + r] : -kInf;
        lse_s[r] = value == -kInf ? kInf : value;
        delta_s[r] = inside ? delta[q0 + r] : 0.0f;
      }
      __syncthreads();

      // S and dP of this warp's rows against key `lane`; P and dS to shared memory
      const int row0 = warp * kRows;
      float s[kRows] = {}, dp[kRows] = {};
      const float* krow = ks + lane * (d + 1);
      const float* vrow = vs + lane * (d + 1);
      for (int64_t x = 0; x < d; ++x) {
        const float kx = krow[x], vx = vrow[x];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          s[r] += qs[(row0 + r) * d + x] * kx;
          dp[r] += dos[(row0 + r) * d + x] * vx;
        }
      }
      const int64_t j = j0 + lane;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t i = q0 + row0 + r;
        const float x = soft_capped(s[r] * p.scale, cap);
        float pr = expf(x - lse_s[row0 + r]);
        if (backend::cuda_flash_hidden(p.t, p.s, mask, i, j)) pr = 0.0f;
        const float f = p.drop.on() ? p.drop.factor(bh, i, j) : 1.0f;  // dP = f dZ, Z = f P
        ps[(row0 + r) * kPld + lane] = pr * f;
        dss[(row0 + r) * kPld + lane] =
            pr * (f * dp[r] - delta_s[row0 + r]) * soft_cap_slope(x, cap);
      }
      __syncthreads();  // P and dS of every warp are complete

      // dV += P^T dO and dK += dS^T Q for this warp's keys
      for (int r = 0; r < kBr; ++r) {
#pragma unroll
        for (int c = 0; c < kKeys; ++c) {
          const float pv = ps[r * kPld + warp * kKeys + c];
          const float dsv = dss[r * kPld + warp * kKeys + c];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const int64_t x = lane + 32 * u;
            if (x < d) {
              dv[c][u] += pv * dos[r * d + x];
              dk[c][u] += dsv * qs[r * d + x];
            }
          }
        }
      }
    }
  }

  E* dk_out = static_cast<E*>(p.dk) + kvh * p.s * d;  // (S, D)
  E* dv_out = static_cast<E*>(p.dv) + kvh * p.s * d;  // (S, D)
#pragma unroll
  for (int c = 0; c < kKeys; ++c) {
    const int64_t key = j0 + warp * kKeys + c;
    if (key >= p.s) continue;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t x = lane + 32 * u;
      if (x >= d) continue;
      dk_out[key * d + x] = from_f32<E>(dk[c][u] * p.scale);
      dv_out[key * d + x] = from_f32<E>(dv[c][u]);
    }
  }
}

// dQ of one (query tile, batch x query head), over the key tiles its queries see in order.
template <class E, int U>
__global__ void __launch_bounds__(Simt::kThreads) simt_backward_dq_kernel(Params p) {
  constexpr int kRows = Simt::kRows, kBr = Simt::kBr, kBc = Simt::kBc;
  const float cap = float(p.mask.softcap);  // natural units (attention_softcap.cuh)
  extern __shared__ float smem[];
  const int64_t d = p.d;
  float* qs = smem;                // (kBr, d)
  float* dos = qs + kBr * d;       // (kBr, d)
  float* ks = dos + kBr * d;       // (kBc, d + 1)
  float* vs = ks + kBc * (d + 1);  // (kBc, d + 1)

  const int64_t q_tiles = backend::cuda_ceil_div(p.t, kBr);
  const backend::CudaFlashBlock blk =
      backend::cuda_flash_forward_block(blockIdx.x, p.batch * p.hq, q_tiles, p.mask.causal);
  const int64_t bh = blk.bh, q0 = blk.tile * kBr;
  const int64_t kvh = backend::cuda_flash_kv_head(bh, p.hq, p.hkv);
  const backend::AttentionMask mask = p.mask.row(bh / p.hq, p.t);  // Note [Packed rows]
  const E* q = static_cast<const E*>(p.q) + bh * p.t * d;          // (T, D)
  const E* dout = static_cast<const E*>(p.dout) + bh * p.t * d;    // (T, D)
  const E* k = static_cast<const E*>(p.k) + kvh * p.s * d;         // (S, D)
  const E* v = static_cast<const E*>(p.v) + kvh * p.s * d;         // (S, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const backend::CudaTileRange keys = backend::cuda_flash_key_tiles(p.t, p.s, mask, q0, kBr, kBc);
  const int row0 = warp * kRows;
  const float* qw = qs + row0 * d;    // (kRows, d) this warp's rows
  const float* dow = dos + row0 * d;  // (kRows, d)

  widen_rows(qs, d, q, q0, kBr, p.t, d);
  widen_rows(dos, d, dout, q0, kBr, p.t, d);
  float lse_r[kRows], delta_r[kRows], dq[kRows][U];  // lse +inf where p is 0
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = q0 + row0 + r;
    const float value = i < p.t ? p.lse[bh * p.t + i] : -kInf;
    lse_r[r] = value == -kInf ? kInf : value;
    delta_r[r] = i < p.t ? p.delta[bh * p.t + i] : 0.0f;
#pragma unroll
    for (int u = 0; u < U; ++u) dq[r][u] = 0.0f;
  }

  for (int64_t jt = keys.first; jt < keys.end; ++jt) {
    const int64_t j0 = jt * kBc;
    __syncthreads();  // the previous tile is consumed
    widen_rows(ks, d + 1, k, j0, kBc, p.s, d);
    widen_rows(vs, d + 1, v, j0, kBc, p.s, d);
    __syncthreads();

    // S and dP of this warp's rows against key `lane`, then P and dS
    float s[kRows] = {}, dp[kRows] = {};
    const float* krow = ks + lane * (d + 1);
    const float* vrow = vs + lane * (d + 1);
    for (int64_t x = 0; x < d; ++x) {
      const float kx = krow[x], vx = vrow[x];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        s[r] += qw[r * d + x] * kx;
        dp[r] += dow[r * d + x] * vx;
      }
    }
    const int64_t j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t i = q0 + row0 + r;
      const float x = soft_capped(s[r] * p.scale, cap);
      float pr = expf(x - lse_r[r]);
      if (backend::cuda_flash_hidden(p.t, p.s, mask, i, j)) pr = 0.0f;
      const float f = p.drop.on() ? p.drop.factor(bh, i, j) : 1.0f;
      dp[r] = pr * (f * dp[r] - delta_r[r]) * soft_cap_slope(x, cap);  // dS
    }

    // dQ rows of this warp += dS K, ds_j from lane j
    for (int jj = 0; jj < kBc; ++jj) {
      const float* kcol = ks + jj * (d + 1);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float dsj = __shfl_sync(0xffffffffu, dp[r], jj);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t x = lane + 32 * u;
          if (x < d) dq[r][u] += dsj * kcol[x];
        }
      }
    }
  }

  E* out = static_cast<E*>(p.dq) + bh * p.t * d;  // (T, D)
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = q0 + row0 + r;
    if (i >= p.t) continue;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t x = lane + 32 * u;
      if (x < d) out[i * d + x] = from_f32<E>(dq[r][u] * p.scale);
    }
  }
}

template <class Kernel>
cudaError_t launch_simt(Kernel kernel, int64_t blocks, int64_t smem, const Params& params,
                        cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  if (blocks > backend::kCudaMaxGridX) return cudaErrorInvalidConfiguration;
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (err != cudaSuccess) return err;
  kernel<<<unsigned(blocks), Simt::kThreads, size_t(smem), stream>>>(params);
  return cudaGetLastError();
}

// Calls fn with the element tag of a floating dtype and the column chunks of head dim d.
template <class Fn>
cudaError_t simt_dtype_case(DType dtype, int64_t d, Fn&& fn) {
  const auto chunks = [&](auto tag) -> cudaError_t {
    switch (backend::cuda_flash_simt_chunks(d)) {
      case 1: return fn(tag, std::integral_constant<int, 1>{});
      case 2: return fn(tag, std::integral_constant<int, 2>{});
      case 4: return fn(tag, std::integral_constant<int, 4>{});
      default: return fn(tag, std::integral_constant<int, 8>{});
    }
  };
  switch (dtype) {
    case DType::f32: return chunks(ElementTag<float>{});
    case DType::bf16: return chunks(ElementTag<bf16>{});
    case DType::f16: return chunks(ElementTag<f16>{});
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_flash_forward_simt(const AttentionSizes& x, DType dtype, const void* q,
                                      const void* k, const void* v, void* o, float* lse,
                                      cudaStream_t stream) {
  const Params params{
      x.batch, x.hq, x.hkv, x.t, x.s,     x.d,     x.mask,  x.scale, nullptr, q,
      k,       v,    o,     lse, nullptr, nullptr, nullptr, nullptr, nullptr, flash_dropout(x)};
  return simt_dtype_case(dtype, x.d, [&](auto tag, auto chunks) {
    using E = typename decltype(tag)::type;
    return launch_simt(simt_forward_kernel<E, decltype(chunks)::value>,
                       backend::cuda_flash_forward_blocks(x.batch * x.hq, x.t, Simt::kBr),
                       backend::cuda_flash_simt_forward_smem(x.d), params, stream);
  });
}

cudaError_t launch_flash_backward_simt(const AttentionSizes& x, DType dtype, const void* dout,
                                       const void* q, const void* k, const void* v,
                                       const float* lse, const float* delta, void* dq, void* dk,
                                       void* dv, cudaStream_t stream) {
  const Params params{
      x.batch, x.hq, x.hkv,   x.t,     x.s, x.d,   x.mask, x.scale, dout, q,
      k,       v,    nullptr, nullptr, lse, delta, dq,     dk,      dv,   flash_dropout(x)};
  return simt_dtype_case(dtype, x.d, [&](auto tag, auto chunks) {
    using E = typename decltype(tag)::type;
    constexpr int U = decltype(chunks)::value;
    const cudaError_t err =
        launch_simt(simt_backward_dkdv_kernel<E, U>,
                    backend::cuda_flash_backward_blocks(x.batch * x.hkv, x.s, Simt::kBc),
                    backend::cuda_flash_simt_backward_smem(x.d), params, stream);
    if (err != cudaSuccess) return err;
    return launch_simt(simt_backward_dq_kernel<E, U>,
                       backend::cuda_flash_forward_blocks(x.batch * x.hq, x.t, Simt::kBr),
                       backend::cuda_flash_simt_dq_smem(x.d), params, stream);
  });
}

}  // namespace fitgrad::cuda
