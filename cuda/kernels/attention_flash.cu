// Flash attention's forward on the cuda backend, the tensor-core (mma) path, and the launcher
// that picks a path (Note [CUDA flash mma kernels] in attention_flash_mma.cuh; the backward is
// attention_flash_backward.cu).
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/attention_flash_mma.cuh"
#include "cuda/kernels/attention_softcap.cuh"
#include "cuda/kernels/mma.cuh"

namespace fitgrad::cuda {
namespace {

// ---- forward ----

template <class E, int kD>
__device__ void forward_mma(const ForwardParams& p) {
  using C = CudaFlashMmaConfig<kD>;
  constexpr int kBr = C::kBr, kBc = C::kBc, kLd = C::kLd;
  const float cap2 = float(p.mask.softcap) * kLog2e;  // base-2 units (attention_softcap.cuh)
  extern __shared__ __align__(16) unsigned char smem[];
  E* qs = reinterpret_cast<E*>(smem);  // (kBr, kLd)
  E* ks = qs + kBr * kLd;              // (2, kBc, kLd)
  E* vs = ks + 2 * kBc * kLd;          // (2, kBc, kLd)

  const int64_t q_tiles = backend::cuda_ceil_div(p.t, kBr);
  const backend::CudaFlashBlock blk =
      backend::cuda_flash_forward_block(blockIdx.x, p.batch * p.hq, q_tiles, p.mask.causal);
  const int64_t bh = blk.bh, q0 = blk.tile * kBr;
  const int64_t kvh = backend::cuda_flash_kv_head(bh, p.hq, p.hkv);
  const backend::AttentionMask mask = p.mask.row(bh / p.hq, p.t);  // Note [Packed rows]
  const E* q = static_cast<const E*>(p.q) + bh * p.t * p.d;        // (T, D)
  const E* k = static_cast<const E*>(p.k) + kvh * p.s * p.d;       // (S, D)
  const E* v = static_cast<const E*>(p.v) + kvh * p.s * p.d;       // (S, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const backend::CudaFragmentIndex x_lane = backend::cuda_ldmatrix_x(lane);
  const backend::CudaFragmentIndex y_lane = backend::cuda_ldmatrix_y(lane);
  const backend::CudaTileRange keys = backend::cuda_flash_key_tiles(p.t, p.s, mask, q0, kBr, kBc);

  load_tile<kD, kLd, kBr, C::kThreads>(qs, q, q0, p.t, p.d);
  if (keys.first < keys.end) {
    load_tile<kD, kLd, kBc, C::kThreads>(ks, k, keys.first * kBc, p.s, p.d);
    load_tile<kD, kLd, kBc, C::kThreads>(vs, v, keys.first * kBc, p.s, p.d);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  uint32_t qf[kD / 16][4];  // this warp's 16 query rows as A fragments
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
    ldmatrix_x4<false>(qf[kk], qs + (warp * 16 + x_lane.row) * kLd + kk * 16 + x_lane.col);

  float m[2] = {-kInf, -kInf};  // running max (base 2) of rows g and g + 8
  float l[2] = {0.0f, 0.0f};    // this lane's part of their running sums
  float oacc[kD / 8][4] = {};   // (16, kD)

  for (int64_t jt = keys.first; jt < keys.end; ++jt) {
    const int stage = int((jt - keys.first) % 2);
    if (jt + 1 < keys.end) {
      load_tile<kD, kLd, kBc, C::kThreads>(ks + (stage ^ 1) * kBc * kLd, k, (jt + 1) * kBc, p.s,
                                           p.d);
      load_tile<kD, kLd, kBc, C::kThreads>(vs + (stage ^ 1) * kBc * kLd, v, (jt + 1) * kBc, p.s,
                                           p.d);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile jt has landed
    __syncthreads();
    const E* kt = ks + stage * kBc * kLd;
    const E* vt = vs + stage * kBc * kLd;

    // S (16, kBc) = Q K^T
    float sacc[kBc / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4<false>(b, kt + (np * 16 + y_lane.row) * kLd + kk * 16 + y_lane.col);
        mma_16816<E>(sacc[2 * np], qf[kk], b[0], b[1]);
        mma_16816<E>(sacc[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }

    // Scaled to base 2, masked past the sequence end, the diagonal and the window.
    const int64_t j0 = jt * kBc;
    const bool masked = backend::cuda_flash_tile_masked(p.t, p.s, mask, q0, kBr, j0, kBc);
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = soft_capped(sacc[nt][e] * p.scale_log2, cap2);
        if (masked) {
          const backend::CudaFragmentIndex c = backend::cuda_mma_c_index(lane, e);
          const int64_t i = q0 + warp * 16 + c.row, j = j0 + nt * 8 + c.col;
          if (backend::cuda_flash_hidden(p.t, p.s, mask, i, j)) x = -kInf;
        }
        sacc[nt][e] = x;
      }
    }

    // The online softmax: sacc becomes p = exp2(x - m), o and l are rescaled.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = m[h];
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt)
        mx = nan_max(nan_max(mx, sacc[nt][2 * h]), sacc[nt][2 * h + 1]);
      mx = nan_max(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = nan_max(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float base = mx == -kInf ? 0.0f : mx;  // no visible key yet: p and alpha are 0
      const float alpha = exp2f(m[h] - base);
      m[h] = mx;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          sacc[nt][e] = exp2f(sacc[nt][e] - base);
          sum += sacc[nt][e];
        }
      }
      l[h] = l[h] * alpha + sum;
#pragma unroll
      for (int nt = 0; nt < kD / 8; ++nt) {
        oacc[nt][2 * h] *= alpha;
        oacc[nt][2 * h + 1] *= alpha;
      }
    }

    // Dropout: p times its factor, after the sums took the undropped p.
    if (p.drop.on()) {
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const backend::CudaFragmentIndex c = backend::cuda_mma_c_index(lane, e);
          sacc[nt][e] *= p.drop.factor(bh, q0 + warp * 16 + c.row, j0 + nt * 8 + c.col);
        }
      }
    }

    // O (16, kD) += P V
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t pa[4];
      a_from_c<E>(pa, sacc, kk);
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4<true>(b, vt + (kk * 16 + x_lane.row) * kLd + np * 16 + x_lane.col);
        mma_16816<E>(oacc[2 * np], pa, b[0], b[1]);
        mma_16816<E>(oacc[2 * np + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  E* o = static_cast<E*>(p.o) + bh * p.t * p.d;  // (T, D)
  float* lse = p.lse + bh * p.t;                 // (T)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = l[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int64_t row = q0 + warp * 16 + backend::cuda_mma_c_index(lane, 2 * h).row;
    if (row >= p.t) continue;
    const float inv = sum == 0.0f ? 0.0f : 1.0f / sum;  // 0: sees no key
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      const int col = nt * 8 + backend::cuda_mma_c_index(lane, 2 * h).col;
      if (col < p.d)
        *reinterpret_cast<uint32_t*>(o + row * p.d + col) =
            pack2<E>(oacc[nt][2 * h] * inv, oacc[nt][2 * h + 1] * inv);
    }
    if (lane % 4 == 0) lse[row] = sum == 0.0f ? -kInf : (m[h] + log2f(sum)) * kLn2;
  }
}

template <class E, int kD>
__global__ void __launch_bounds__(CudaFlashMmaConfig<kD>::kThreads)
    flash_forward_mma_kernel(ForwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // never launched: cuda_flash_path takes the mma path on sm_80 and later only
#else
  forward_mma<E, kD>(p);
#endif
}

template <class E, int kD>
cudaError_t forward_mma_launch(const AttentionSizes& x, const ForwardParams& params,
                               cudaStream_t stream) {
  using C = CudaFlashMmaConfig<kD>;
  return launch_mma(flash_forward_mma_kernel<E, kD>,
                    backend::cuda_flash_forward_blocks(x.batch * x.hq, x.t, C::kBr), C::kThreads,
                    C::kForwardSmem, params, stream);
}

}  // namespace

cudaError_t launch_flash_attention_forward(const AttentionSizes& x, DType dtype,
                                           backend::CudaFlashPath path, const void* q,
                                           const void* k, const void* v, void* o, float* lse,
                                           cudaStream_t stream) {
  if (x.batch * x.hq * x.t == 0) return cudaSuccess;
  if (path == backend::CudaFlashPath::simt)
    return launch_flash_forward_simt(x, dtype, q, k, v, o, lse, stream);
  const ForwardParams params{x.batch,          x.hq, x.hkv, x.t, x.s, x.d, x.mask,
                             x.scale * kLog2e, q,    k,     v,   o,   lse, flash_dropout(x)};
  return flash_dtype_case(dtype, [&](auto tag) -> cudaError_t {
    using E = typename decltype(tag)::type;
    if constexpr (std::is_same_v<E, float>) {
      return cudaErrorInvalidValue;  // f32 takes the simt path
    } else {
      return backend::cuda_flash_mma_head_dim(x.d) == 64
                 ? forward_mma_launch<E, 64>(x, params, stream)
                 : forward_mma_launch<E, 128>(x, params, stream);
    }
  });
}

}  // namespace fitgrad::cuda
