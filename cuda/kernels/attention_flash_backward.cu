// Flash attention's backward on the cuda backend: the delta kernel, which both paths share,
// then the tensor-core (mma) path's dK/dV and dQ kernels or the simt path's (Note [CUDA flash
// mma kernels] in attention_flash_mma.cuh; the forward is attention_flash.cu).
//
// Note [CUDA attention accumulation]
// The backward is deterministic: every gradient element is written once, by one block, which
// sums its terms in registers in a fixed order, so dq, dk and dv are bitwise identical run
// to run whatever order the blocks run in (as on the CPU, Note [Deterministic attention
// backward] in tensor/cpu/attention_flash.cpp; FlashAttention's deterministic mode). After
// the delta kernel, two kernels each own one side of the gradient:
//   - dK/dV: one block per (key tile, batch x kv head) walks the query heads of its group,
//     h = kv head x group .. + group, and for each the query tiles that see its keys, in
//     that order; it recomputes S^T, P^T, dP^T and dS^T per (query tile, key tile) pair,
//     adds P^T dO and dS^T Q into the dk and dv rows it keeps in registers, and writes them
//     once (dk times the scale), grouped heads or not;
//   - dQ: one block per (query tile, batch x query head), numbered as the forward's, walks
//     the key tiles its queries see in order, recomputes S, P, dP and dS, adds dS K into
//     the dq rows it keeps in registers (f32), and writes them once, times the scale.
// No sum crosses blocks, so there are no atomics and no f32 workspace (cuda_rules.cpp's
// flash_workspace is one row of no floats for the backward too). The price is the
// recomputation: per (query tile, key tile) pair the dK/dV kernel forms four tile products
// (S^T, dP^T, dV, dK) and the dQ kernel three (S, dP, dQ), seven where the atomic scheme
// took five, as the CPU's two passes do.
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/attention_flash_mma.cuh"
#include "cuda/kernels/attention_softcap.cuh"
#include "cuda/kernels/mma.cuh"

namespace fitgrad::cuda {
namespace {

// ---- backward ----

// lse of row `row` of t in base 2; +inf where the row is past the end or sees no key, so
// that its p is 0.
__device__ __forceinline__ float lse_base2(const float* lse, int64_t row, int64_t t) {
  const float value = row < t ? lse[row] : -kInf;
  return value == -kInf ? kInf : value * kLog2e;
}

// Query tile q0's q and dout rows (cp.async) and lse (base 2) and delta (plain loads) into
// one stage.
template <class E, int kD>
__device__ __forceinline__ void load_query_stage(const BackwardParams& p, const E* q, const E* dout,
                                                 const float* lse, const float* delta, int64_t q0,
                                                 E* qs, E* dos, float* lse_s, float* delta_s) {
  using C = CudaFlashMmaConfig<kD>;
  load_tile<kD, C::kLd, C::kBwdBr, C::kThreads>(qs, q, q0, p.t, p.d);
  load_tile<kD, C::kLd, C::kBwdBr, C::kThreads>(dos, dout, q0, p.t, p.d);
  for (int r = threadIdx.x; r < C::kBwdBr; r += C::kThreads) {
    lse_s[r] = lse_base2(lse, q0 + r, p.t);
    delta_s[r] = q0 + r < p.t ? delta[q0 + r] : 0.0f;
  }
}

// dK and dV of one (key tile, batch x kv head): the query heads of the group, each over
// the query tiles that see the tile, one step (head, query tile) after another in order.
template <class E, int kD>
__device__ void backward_dkdv_mma(const BackwardParams& p) {
  using C = CudaFlashMmaConfig<kD>;
  constexpr int kBr = C::kBwdBr, kBc = C::kBwdBc, kLd = C::kLd;
  const float cap2 = float(p.mask.softcap) * kLog2e;  // base-2 units (attention_softcap.cuh)
  extern __shared__ __align__(16) unsigned char smem[];
  E* ks = reinterpret_cast<E*>(smem);                            // (kBc, kLd)
  E* vs = ks + kBc * kLd;                                        // (kBc, kLd)
  E* qs = vs + kBc * kLd;                                        // (2, kBr, kLd)
  E* dos = qs + 2 * kBr * kLd;                                   // (2, kBr, kLd)
  float* lse_s = reinterpret_cast<float*>(dos + 2 * kBr * kLd);  // (2, kBr)
  float* delta_s = lse_s + 2 * kBr;                              // (2, kBr)

  const backend::CudaFlashBlock blk =
      backend::cuda_flash_backward_block(blockIdx.x, p.batch * p.hkv);
  const int64_t kvh = blk.bh, j0 = blk.tile * kBc;
  const backend::AttentionMask mask = p.mask.row(kvh / p.hkv, p.t);  // Note [Packed rows]
  const E* k = static_cast<const E*>(p.k) + kvh * p.s * p.d;         // (S, D)
  const E* v = static_cast<const E*>(p.v) + kvh * p.s * p.d;         // (S, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const backend::CudaFragmentIndex x_lane = backend::cuda_ldmatrix_x(lane);
  const backend::CudaFragmentIndex y_lane = backend::cuda_ldmatrix_y(lane);
  const backend::CudaTileRange queries =
      backend::cuda_flash_query_tiles(p.t, p.s, mask, j0, kBc, kBr);
  const int64_t first = queries.first;
  const int64_t per_head = std::max<int64_t>(queries.end - first, 0);
  const int64_t steps = p.hq / p.hkv * per_head;

  // Step n is query tile first + n % per_head of the group's head n / per_head.
  const auto load_step = [&](int64_t n, int stage) {
    const int64_t bh = backend::cuda_flash_group_head(kvh, p.hq, p.hkv, n / per_head);
    load_query_stage<E, kD>(p, static_cast<const E*>(p.q) + bh * p.t * p.d,
                            static_cast<const E*>(p.dout) + bh * p.t * p.d, p.lse + bh * p.t,
                            p.delta + bh * p.t, (first + n % per_head) * kBr,
                            qs + stage * kBr * kLd, dos + stage * kBr * kLd, lse_s + stage * kBr,
                            delta_s + stage * kBr);
  };
  load_tile<kD, kLd, kBc, C::kThreads>(ks, k, j0, p.s, p.d);
  load_tile<kD, kLd, kBc, C::kThreads>(vs, v, j0, p.s, p.d);
  if (steps > 0) load_step(0, 0);
  cp_async_commit();

  float dkacc[kD / 8][4] = {};  // (16, kD) rows of this warp's keys
  float dvacc[kD / 8][4] = {};
  for (int64_t n = 0; n < steps; ++n) {
    const int stage = int(n % 2);
    if (n + 1 < steps) load_step(n + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // step n's query tile (and the key tile) have landed
    __syncthreads();
    const int64_t q0 = (first + n % per_head) * kBr;
    const int64_t bh = backend::cuda_flash_group_head(kvh, p.hq, p.hkv, n / per_head);
    const E* qt = qs + stage * kBr * kLd;
    const E* dot = dos + stage * kBr * kLd;
    const float* lse_t = lse_s + stage * kBr;
    const float* delta_t = delta_s + stage * kBr;

    // S^T (16, kBr) = K Q^T and dP^T (16, kBr) = V dO^T for this warp's 16 keys
    float sacc[kBr / 8][4] = {};
    float dpacc[kBr / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t ka[4], va[4];
      ldmatrix_x4<false>(ka, ks + (warp * 16 + x_lane.row) * kLd + kk * 16 + x_lane.col);
      ldmatrix_x4<false>(va, vs + (warp * 16 + x_lane.row) * kLd + kk * 16 + x_lane.col);
#pragma unroll
      for (int np = 0; np < kBr / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4<false>(b, qt + (np * 16 + y_lane.row) * kLd + kk * 16 + y_lane.col);
        mma_16816<E>(sacc[2 * np], ka, b[0], b[1]);
        mma_16816<E>(sacc[2 * np + 1], ka, b[2], b[3]);
        ldmatrix_x4<false>(b, dot + (np * 16 + y_lane.row) * kLd + kk * 16 + y_lane.col);
        mma_16816<E>(dpacc[2 * np], va, b[0], b[1]);
        mma_16816<E>(dpacc[2 * np + 1], va, b[2], b[3]);
      }
    }

    // P^T = exp2(s log2(e) scale - lse) (0 where masked), dS^T = P^T (dP^T - delta); with
    // dropout factors f, dV takes Z^T = f P^T and dS^T = P^T (f dP^T - delta).
    const bool masked = backend::cuda_flash_tile_masked(p.t, p.s, mask, q0, kBr, j0, kBc);
#pragma unroll
    for (int nt = 0; nt < kBr / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const backend::CudaFragmentIndex c = backend::cuda_mma_c_index(lane, e);
        const int col = nt * 8 + c.col;  // query q0 + col
        const float x = soft_capped(sacc[nt][e] * p.scale_log2, cap2);
        float pr = exp2f(x - lse_t[col]);
        if (masked) {
          const int64_t j = j0 + warp * 16 + c.row, i = q0 + col;
          if (backend::cuda_flash_hidden(p.t, p.s, mask, i, j)) pr = 0.0f;
        }
        const float f = p.drop.on() ? p.drop.factor(bh, q0 + col, j0 + warp * 16 + c.row) : 1.0f;
        sacc[nt][e] = pr * f;
        dpacc[nt][e] = pr * (f * dpacc[nt][e] - delta_t[col]) * soft_cap_slope(x, cap2);
      }
    }

    // dV += P^T dO and dK += dS^T Q
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      uint32_t pa[4], da[4];
      a_from_c<E>(pa, sacc, kk);
      a_from_c<E>(da, dpacc, kk);
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4<true>(b, dot + (kk * 16 + x_lane.row) * kLd + np * 16 + x_lane.col);
        mma_16816<E>(dvacc[2 * np], pa, b[0], b[1]);
        mma_16816<E>(dvacc[2 * np + 1], pa, b[2], b[3]);
        ldmatrix_x4<true>(b, qt + (kk * 16 + x_lane.row) * kLd + np * 16 + x_lane.col);
        mma_16816<E>(dkacc[2 * np], da, b[0], b[1]);
        mma_16816<E>(dkacc[2 * np + 1], da, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  cp_async_wait<0>();  // with no step (T = 0) the key tile's copies are still pending

  // dk = scale dS^T Q and dv = P^T dO for this warp's keys
  E* dk = static_cast<E*>(p.dk) + kvh * p.s * p.d;  // (S, D)
  E* dv = static_cast<E*>(p.dv) + kvh * p.s * p.d;  // (S, D)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t key = j0 + warp * 16 + backend::cuda_mma_c_index(lane, 2 * h).row;
    if (key >= p.s) continue;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      const int col = nt * 8 + backend::cuda_mma_c_index(lane, 2 * h).col;
      if (col >= p.d) continue;
      *reinterpret_cast<uint32_t*>(dk + key * p.d + col) =
          pack2<E>(dkacc[nt][2 * h] * p.scale, dkacc[nt][2 * h + 1] * p.scale);
      *reinterpret_cast<uint32_t*>(dv + key * p.d + col) =
          pack2<E>(dvacc[nt][2 * h], dvacc[nt][2 * h + 1]);
    }
  }
}

// dQ of one (query tile, batch x query head), over the key tiles its queries see, in order.
template <class E, int kD>
__device__ void backward_dq_mma(const BackwardParams& p) {
  using C = CudaFlashMmaConfig<kD>;
  constexpr int kBr = C::kDqBr, kBc = C::kDqBc, kLd = C::kLd;
  const float cap2 = float(p.mask.softcap) * kLog2e;  // base-2 units (attention_softcap.cuh)
  extern __shared__ __align__(16) unsigned char smem[];
  E* qs = reinterpret_cast<E*>(smem);  // (kBr, kLd)
  E* dos = qs + kBr * kLd;             // (kBr, kLd)
  E* ks = dos + kBr * kLd;             // (2, kBc, kLd)
  E* vs = ks + 2 * kBc * kLd;          // (2, kBc, kLd)

  const int64_t q_tiles = backend::cuda_ceil_div(p.t, kBr);
  const backend::CudaFlashBlock blk =
      backend::cuda_flash_forward_block(blockIdx.x, p.batch * p.hq, q_tiles, p.mask.causal);
  const int64_t bh = blk.bh, q0 = blk.tile * kBr;
  const int64_t kvh = backend::cuda_flash_kv_head(bh, p.hq, p.hkv);
  const backend::AttentionMask mask = p.mask.row(bh / p.hq, p.t);  // Note [Packed rows]
  const E* q = static_cast<const E*>(p.q) + bh * p.t * p.d;        // (T, D)
  const E* dout = static_cast<const E*>(p.dout) + bh * p.t * p.d;  // (T, D)
  const E* k = static_cast<const E*>(p.k) + kvh * p.s * p.d;       // (S, D)
  const E* v = static_cast<const E*>(p.v) + kvh * p.s * p.d;       // (S, D)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const backend::CudaFragmentIndex x_lane = backend::cuda_ldmatrix_x(lane);
  const backend::CudaFragmentIndex y_lane = backend::cuda_ldmatrix_y(lane);
  const backend::CudaTileRange keys = backend::cuda_flash_key_tiles(p.t, p.s, mask, q0, kBr, kBc);

  load_tile<kD, kLd, kBr, C::kThreads>(qs, q, q0, p.t, p.d);
  load_tile<kD, kLd, kBr, C::kThreads>(dos, dout, q0, p.t, p.d);
  if (keys.first < keys.end) {
    load_tile<kD, kLd, kBc, C::kThreads>(ks, k, keys.first * kBc, p.s, p.d);
    load_tile<kD, kLd, kBc, C::kThreads>(vs, v, keys.first * kBc, p.s, p.d);
  }
  cp_async_commit();

  // lse (base 2) and delta of this lane's rows g and g + 8
  float lse_r[2], delta_r[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = q0 + warp * 16 + backend::cuda_mma_c_index(lane, 2 * h).row;
    lse_r[h] = lse_base2(p.lse + bh * p.t, row, p.t);
    delta_r[h] = row < p.t ? p.delta[bh * p.t + row] : 0.0f;
  }

  float dqacc[kD / 8][4] = {};  // (16, kD) this warp's query rows
  for (int64_t jt = keys.first; jt < keys.end; ++jt) {
    const int stage = int((jt - keys.first) % 2);
    if (jt + 1 < keys.end) {
      load_tile<kD, kLd, kBc, C::kThreads>(ks + (stage ^ 1) * kBc * kLd, k, (jt + 1) * kBc, p.s,
                                           p.d);
      load_tile<kD, kLd, kBc, C::kThreads>(vs + (stage ^ 1) * kBc * kLd, v, (jt + 1) * kBc, p.s,
                                           p.d);
    }
    cp_async_commit();
    cp_async_wait<1>();  // key tile jt (and q and dout) have landed
    __syncthreads();
    const E* kt = ks + stage * kBc * kLd;
    const E* vt = vs + stage * kBc * kLd;

    // S (16, kBc) = Q K^T and dP (16, kBc) = dO V^T
    float sacc[kBc / 8][4] = {};
    float dpacc[kBc / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      uint32_t qa[4], da[4];
      ldmatrix_x4<false>(qa, qs + (warp * 16 + x_lane.row) * kLd + kk * 16 + x_lane.col);
      ldmatrix_x4<false>(da, dos + (warp * 16 + x_lane.row) * kLd + kk * 16 + x_lane.col);
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4<false>(b, kt + (np * 16 + y_lane.row) * kLd + kk * 16 + y_lane.col);
        mma_16816<E>(sacc[2 * np], qa, b[0], b[1]);
        mma_16816<E>(sacc[2 * np + 1], qa, b[2], b[3]);
        ldmatrix_x4<false>(b, vt + (np * 16 + y_lane.row) * kLd + kk * 16 + y_lane.col);
        mma_16816<E>(dpacc[2 * np], da, b[0], b[1]);
        mma_16816<E>(dpacc[2 * np + 1], da, b[2], b[3]);
      }
    }

    // P = exp2(s log2(e) scale - lse) (0 where masked), dS = P (f dP - delta) with f the
    // dropout factor (1 without dropout)
    const int64_t j0 = jt * kBc;
    const bool masked = backend::cuda_flash_tile_masked(p.t, p.s, mask, q0, kBr, j0, kBc);
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const backend::CudaFragmentIndex c = backend::cuda_mma_c_index(lane, e);
        const int64_t i = q0 + warp * 16 + c.row, j = j0 + nt * 8 + c.col;
        const float x = soft_capped(sacc[nt][e] * p.scale_log2, cap2);
        float pr = exp2f(x - lse_r[e / 2]);
        if (masked && backend::cuda_flash_hidden(p.t, p.s, mask, i, j)) pr = 0.0f;
        const float f = p.drop.on() ? p.drop.factor(bh, i, j) : 1.0f;
        dpacc[nt][e] = pr * (f * dpacc[nt][e] - delta_r[e / 2]) * soft_cap_slope(x, cap2);
      }
    }

    // dQ (16, kD) += dS K, dS from registers
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      uint32_t a[4];
      a_from_c<E>(a, dpacc, kk);
#pragma unroll
      for (int np = 0; np < kD / 16; ++np) {
        uint32_t b[4];
        ldmatrix_x4<true>(b, kt + (kk * 16 + x_lane.row) * kLd + np * 16 + x_lane.col);
        mma_16816<E>(dqacc[2 * np], a, b[0], b[1]);
        mma_16816<E>(dqacc[2 * np + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }
  cp_async_wait<0>();  // with no key tile (S = 0) the q and dout copies are still pending

  E* dq = static_cast<E*>(p.dq) + bh * p.t * p.d;  // (T, D)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t row = q0 + warp * 16 + backend::cuda_mma_c_index(lane, 2 * h).row;
    if (row >= p.t) continue;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {
      const int col = nt * 8 + backend::cuda_mma_c_index(lane, 2 * h).col;
      if (col < p.d)
        *reinterpret_cast<uint32_t*>(dq + row * p.d + col) =
            pack2<E>(dqacc[nt][2 * h] * p.scale, dqacc[nt][2 * h + 1] * p.scale);
    }
  }
}

template <class E, int kD>
__global__ void __launch_bounds__(CudaFlashMmaConfig<kD>::kThreads)
    flash_backward_dkdv_mma_kernel(BackwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // never launched (see flash_forward_mma_kernel)
#else
  backward_dkdv_mma<E, kD>(p);
#endif
}

template <class E, int kD>
__global__ void __launch_bounds__(CudaFlashMmaConfig<kD>::kThreads)
    flash_backward_dq_mma_kernel(BackwardParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // never launched (see flash_forward_mma_kernel)
#else
  backward_dq_mma<E, kD>(p);
#endif
}

// delta (rows) = rowsum(dout * o) over rows of d, a warp per row.
template <class E>
__global__ void delta_kernel(const E* dout, const E* o, float* delta, int64_t rows, int64_t d) {
  const int64_t row = int64_t(blockIdx.x) * backend::kCudaFlashRowWarps + threadIdx.x / 32;
  if (row >= rows) return;
  float acc = 0.0f;
  for (int64_t x = threadIdx.x % 32; x < d; x += 32)
    acc += to_f32(dout[row * d + x]) * to_f32(o[row * d + x]);
#pragma unroll
  for (int width = 16; width >= 1; width /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, width);
  if (threadIdx.x % 32 == 0) delta[row] = acc;
}

// The dK/dV kernel, then the dQ kernel (Note [CUDA attention accumulation]).
template <class E, int kD>
cudaError_t backward_mma_launch(const AttentionSizes& x, const BackwardParams& params,
                                cudaStream_t stream) {
  using C = CudaFlashMmaConfig<kD>;
  const cudaError_t err =
      launch_mma(flash_backward_dkdv_mma_kernel<E, kD>,
                 backend::cuda_flash_backward_blocks(x.batch * x.hkv, x.s, C::kBwdBc), C::kThreads,
                 C::kBackwardSmem, params, stream);
  if (err != cudaSuccess) return err;
  return launch_mma(flash_backward_dq_mma_kernel<E, kD>,
                    backend::cuda_flash_forward_blocks(x.batch * x.hq, x.t, C::kDqBr), C::kThreads,
                    C::kDqSmem, params, stream);
}

}  // namespace

cudaError_t launch_flash_attention_backward(const AttentionSizes& x, DType dtype,
                                            backend::CudaFlashPath path, const void* dout,
                                            const void* q, const void* k, const void* v,
                                            const void* o, const float* lse, float* delta, void* dq,
                                            void* dk, void* dv, cudaStream_t stream) {
  return flash_dtype_case(dtype, [&](auto tag) -> cudaError_t {
    using E = typename decltype(tag)::type;
    const int64_t rows = x.batch * x.hq * x.t;
    if (rows > 0) {
      const int64_t blocks = backend::cuda_flash_row_blocks(rows);
      if (blocks > backend::kCudaMaxGridX) return cudaErrorInvalidConfiguration;
      delta_kernel<E><<<unsigned(blocks), 32 * backend::kCudaFlashRowWarps, 0, stream>>>(
          static_cast<const E*>(dout), static_cast<const E*>(o), delta, rows, x.d);
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) return err;
    }
    if (path == backend::CudaFlashPath::simt)
      return launch_flash_backward_simt(x, dtype, dout, q, k, v, lse, delta, dq, dk, dv, stream);
    if constexpr (std::is_same_v<E, float>) {
      return cudaErrorInvalidValue;  // f32 takes the simt path
    } else {
      const BackwardParams params{
          x.batch, x.hq, x.hkv, x.t, x.s,   x.d, x.mask, x.scale, x.scale * kLog2e, dout,
          q,       k,    v,     lse, delta, dq,  dk,     dv,      flash_dropout(x)};
      return backend::cuda_flash_mma_head_dim(x.d) == 64
                 ? backward_mma_launch<E, 64>(x, params, stream)
                 : backward_mma_launch<E, 128>(x, params, stream);
    }
  });
}

}  // namespace fitgrad::cuda
