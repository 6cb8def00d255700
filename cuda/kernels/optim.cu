// The cuda kernels of the optimizer updates (AdamW, SGD, Adam8bit, Adafactor), the sum of
// squares that gradient clipping reads, and the in-place scale. The CPU kernels are the
// reference (tensor/cpu/optim_update.cpp, adam8bit.cpp, adafactor.cpp): every element is
// computed by their formulas, in their order, in f32 with one rounding per operation (Note
// [One rounding per operation]), and written back through tensor/cpu/param_store.h's
// rounding, stochastic rounding included. Launch shapes: Note [CUDA optimizer launch
// shapes] in tensor/backend/cuda_optim_launch.h.
//
// Note [One rounding per operation]
// nvcc fuses a * b + c into one multiply-add by default (--fmad=true), which rounds once
// where the CPU rounds twice: the CPU's Adam8bit kernel is built with -ffp-contract=off, and
// the other CPU kernels are compiled for a baseline x86-64, which has no fused multiply-add.
// The per-element arithmetic here is therefore written with the _rn intrinsics, which nvcc
// never fuses, and the IEEE division and square root. So an element's new parameter and
// states are the CPU's bit for bit, given the same inputs (and, for Adafactor, the same
// factors and sums). Adam8bit's codes and absmaxes, which depend only on per-element
// arithmetic and block maxima, are the CPU's byte for byte. The sums (sum_squares, and
// Adafactor's row, column and RMS sums) are in double in a fixed order per shape, so each is
// the same on every run, but their order is not the CPU's, and they may differ from it in
// the last bits.
#include "cuda/kernels/device.cuh"
#include "cuda/kernels/optim_device.cuh"
#include "cuda/kernels/optim_launch.h"
#include "tensor/backend/cuda_launch.h"
#include "tensor/backend/cuda_optim_launch.h"

namespace fitgrad::cuda {
namespace {

using backend::CudaAdafactorLayout;
using backend::kCudaAdafactorColTile;
using backend::kCudaAdafactorColWarps;
using backend::kCudaAdam8bitThreads;
using backend::kCudaThreads;

__device__ __forceinline__ bool sign_bit(float x) { return (__float_as_uint(x) >> 31) != 0; }

// ---- AdamW and SGD (tensor/cpu/optim_update.cpp) ----

template <class P, class G>
__global__ void adamw_kernel(AdamWConstants k, UpdateOperands u, float* m, float* v) {
  P* p = static_cast<P*>(u.param);
  const G* g = static_cast<const G*>(u.grad);
  FG_GRID_STRIDE(i, u.n) {
    const float gi = to_f32(g[i]);
    const float mi = rn_add(rn_mul(m[i], k.beta1), rn_mul(k.one_minus_beta1, gi));
    const float vi = rn_add(rn_mul(v[i], k.beta2), rn_mul(rn_mul(k.one_minus_beta2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = rn_add(rn_div(rn_sqrt(vi), k.bias_correction2_sqrt), k.eps);
    const float step = rn_mul(k.neg_step_size, rn_div(mi, denom));
    p[i] = round_param<P>(rn_add(rn_mul(to_f32(p[i]), k.decay), step), i, u);
  }
}

template <class P, class G>
__global__ void sgd_kernel(SgdConstants k, UpdateOperands u, float* buf) {
  P* p = static_cast<P*>(u.param);
  const G* g = static_cast<const G*>(u.grad);
  FG_GRID_STRIDE(i, u.n) {
    const float pi = to_f32(p[i]);
    float d = rn_add(to_f32(g[i]), rn_mul(k.weight_decay, pi));
    if (buf) {
      const float b =
          k.first ? d : rn_add(rn_mul(buf[i], k.momentum), rn_mul(k.one_minus_dampening, d));
      buf[i] = b;
      d = k.nesterov ? rn_add(d, rn_mul(k.momentum, b)) : b;
    }
    p[i] = round_param<P>(rn_sub(pi, rn_mul(k.lr, d)), i, u);
  }
}

// ---- Adam8bit (tensor/cpu/adam8bit.cpp, Note [Adam8bit kernel]) ----

// The parameter after the step from states s1, s2: rounded to its dtype after the step and
// again after the decay, as bitsandbytes' kernel does.
template <class P>
__device__ __forceinline__ P adam8bit_param(const Adam8bitConstants& k, float p, float s1, float s2,
                                            int64_t i, const UpdateOperands& u) {
  const float update = rn_mul(k.step_size, rn_div(s1, rn_add(rn_sqrt(s2), k.eps_c2)));
  const float stepped = rn_add(p, update);
  return round_param<P>(k.weight_decay ? rn_mul(to_f32(from_f32<P>(stepped)), k.decay) : stepped, i,
                        u);
}

template <class P, class G>
__global__ void adam8bit_32bit_kernel(Adam8bitConstants k, UpdateOperands u, float* m, float* v) {
  P* p = static_cast<P*>(u.param);
  const G* g = static_cast<const G*>(u.grad);
  FG_GRID_STRIDE(i, u.n) {
    const float gi = to_f32(g[i]);
    const float mi = rn_add(rn_mul(m[i], k.beta1), rn_mul(k.one_minus_beta1, gi));
    const float vi = rn_add(rn_mul(v[i], k.beta2), rn_mul(k.one_minus_beta2, rn_mul(gi, gi)));
    m[i] = mi;
    v[i] = vi;
    p[i] = adam8bit_param<P>(k, to_f32(p[i]), mi, vi, i, u);
  }
}

// The two dynamic maps, passed by value (2 KiB of kernel parameters) and staged into shared
// memory by each block.
struct CodeMaps {
  float signed_codes[256];
  float unsigned_codes[256];
};
static_assert(kCudaAdam8bitThreads == 256, "one thread stages one code of each map");

// Block b of 256 elements, as the CPU's blockwise() does it: thread j takes element
// 256 b + j; the states dequantize with the old absmaxes and update; the new absmaxes are
// the block's maxima of |s1| and |s2| (fmaxf, which like the CPU's std::max from 0 passes
// over a NaN); then the parameter steps and the states quantize against the new absmaxes.
template <class P, class G>
__global__ void __launch_bounds__(kCudaAdam8bitThreads)
    adam8bit_blockwise_kernel(Adam8bitConstants k, UpdateOperands u, CodeMaps maps, uint8_t* c1,
                              uint8_t* c2, float* absmax1, float* absmax2) {
  constexpr int kWarps = kCudaAdam8bitThreads / 32;
  __shared__ float map1[256], map2[256];
  __shared__ float warp_max[2][kWarps];
  const int t = int(threadIdx.x), lane = t % 32, warp = t / 32;
  map1[t] = maps.signed_codes[t];
  map2[t] = maps.unsigned_codes[t];
  __syncthreads();
  P* p = static_cast<P*>(u.param);
  const G* g = static_cast<const G*>(u.grad);
  const int64_t blocks = backend::cuda_ceil_div(u.n, kCudaAdam8bitThreads);
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t i = b * kCudaAdam8bitThreads + t;
    const bool live = i < u.n;
    const float old1 = absmax1[b], old2 = absmax2[b];
    float s1 = 0.0f, s2 = 0.0f;
    if (live) {
      const float gi = to_f32(g[i]);
      s2 = rn_add(rn_mul(rn_mul(map2[c2[i]], old2), k.beta2),
                  rn_mul(rn_mul(k.one_minus_beta2, gi), gi));
      s1 = rn_add(rn_mul(rn_mul(map1[c1[i]], old1), k.beta1), rn_mul(k.one_minus_beta1, gi));
    }
    float m1 = fabsf(s1), m2 = fabsf(s2);
    for (int o = 16; o > 0; o /= 2) {
      m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, o));
      m2 = fmaxf(m2, __shfl_xor_sync(0xffffffffu, m2, o));
    }
    if (lane == 0) {
      warp_max[0][warp] = m1;
      warp_max[1][warp] = m2;
    }
    __syncthreads();  // also orders every thread's read of the old absmaxes before their write
    float max1 = 0.0f, max2 = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      max1 = fmaxf(max1, warp_max[0][w]);
      max2 = fmaxf(max2, warp_max[1][w]);
    }
    __syncthreads();  // warp_max is written again for the next block
    if (live) {
      p[i] = adam8bit_param<P>(k, to_f32(p[i]), s1, s2, i, u);
      // One code towards s1's sign when the nearest has the other one.
      const uint8_t code = backend::cuda_dynamic_code(map1, rn_div(s1, max1));
      const int fix = int(sign_bit(map1[code]) != sign_bit(s1));
      c1[i] = uint8_t(code + fix * (2 * int(s1 > 0.0f) - 1));
      c2[i] = backend::cuda_dynamic_code(map2, rn_div(s2, max2));
    }
    if (t == 0) {
      absmax1[b] = max1;
      absmax2[b] = max2;
    }
  }
}

// ---- Adafactor (tensor/cpu/adafactor.cpp) ----

// What every Adafactor kernel reads: the constants, the operands and the factors of a
// (batch, rows, cols) parameter (full instead, with (1, 1, n)), and the per-batch mean row
// factors in the workspace.
template <class P, class G>
struct Adafactor {
  AdafactorConstants k;
  UpdateOperands u;
  float* row;   // (batch * rows), or null
  float* col;   // (batch * cols), or null
  float* full;  // (n), or null
  float* exp_avg;
  int64_t batch, rows, cols;
  double* row_means;  // (batch)

  // The factors of one line (row r of batch b = r / rows), read once per line.
  struct Line {
    float row = 0.0f, mean = 1.0f;
    const float* col = nullptr;  // (cols) of the line's batch
  };

  __device__ float grad(int64_t i) const { return to_f32(static_cast<const G*>(u.grad)[i]); }
  __device__ float square(float g) const {
    return k.torch ? rn_mul(g, g) : rn_add(rn_mul(g, g), k.eps0);
  }
  // torch: lerp(old, mean, one_minus_beta2), from the end for a weight >= 0.5; hf: the EMA.
  __device__ float ema(float old, float mean) const {
    if (!k.torch) return rn_add(rn_mul(old, k.beta2t), rn_mul(mean, rn_sub(1.0f, k.beta2t)));
    const float w = k.one_minus_beta2;
    return w < 0.5f ? rn_add(old, rn_mul(w, rn_sub(mean, old)))
                    : rn_sub(mean, rn_mul(rn_sub(mean, old), rn_sub(1.0f, w)));
  }
  __device__ Line line(int64_t r) const {
    if (full) return {};
    const int64_t b = r / rows;
    return {row[r], float(row_means[b]), col + b * cols};
  }
  // The unscaled update u of element i (column c of line l), as update_tile computes it.
  __device__ float update(const Line& l, int64_t c, int64_t i) const {
    const float g = grad(i);
    const float floor = rn_mul(k.eps1, k.eps1);
    if (full) return rn_div(g, rn_sqrt(k.torch ? max_of(full[i], floor) : full[i]));
    if (k.torch)
      return rn_mul(g,
                    rn_div(1.0f, rn_sqrt(max_of(rn_div(rn_mul(l.row, l.col[c]), l.mean), floor))));
    const float r_factor = rn_div(1.0f, rn_sqrt(rn_div(l.row, l.mean)));
    return rn_mul(rn_mul(r_factor, rn_div(1.0f, rn_sqrt(l.col[c]))), g);
  }
};

enum class LineSum { grad_squares, param_squares, update_squares };

// out[r] = the sum over line r's columns of square(g), p^2 or u^2, in double: one block per
// line. Grid-stride over lines; cuda_row_threads(cols) threads.
template <LineSum S, class P, class G>
__global__ void __launch_bounds__(1024)
    line_sums_kernel(Adafactor<P, G> a, int64_t lines, double* out) {
  __shared__ double scratch[32];
  const P* p = static_cast<const P*>(a.u.param);
  for (int64_t r = blockIdx.x; r < lines; r += gridDim.x) {
    using Line = typename Adafactor<P, G>::Line;
    const Line l = S == LineSum::update_squares ? a.line(r) : Line{};
    double acc = 0.0;
    for (int64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
      const int64_t i = r * a.cols + c;
      double x;
      if constexpr (S == LineSum::grad_squares)
        x = double(a.square(a.grad(i)));
      else if constexpr (S == LineSum::param_squares)
        x = double(to_f32(p[i]));
      else
        x = double(a.update(l, c, i));
      acc += S == LineSum::grad_squares ? x : x * x;
    }
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) out[r] = acc;
  }
}

// row[r] = ema(row[r], mean over the line of square(g)), from line_sums' row_sums.
template <class P, class G>
__global__ void row_ema_kernel(Adafactor<P, G> a, const double* row_sums) {
  FG_GRID_STRIDE(r, a.batch * a.rows) {
    a.row[r] = a.ema(a.row[r], float(row_sums[r] / double(a.cols)));
  }
}

// partials (batch, chunks, cols) = the sums of square(g) over each chunk's rows, per column
// (Note [Adafactor's workspace on the device]): a tile of 32 columns (one per lane) of one
// chunk; warp w adds rows w, w + 32, ... of the chunk, then warp 0 adds the 32 warps' sums
// in warp order.
template <class P, class G>
__global__ void __launch_bounds__(kCudaAdafactorColTile* kCudaAdafactorColWarps)
    col_sums_kernel(Adafactor<P, G> a, CudaAdafactorLayout l, double* partials) {
  static_assert(kCudaAdafactorColTile == 32, "a column per lane");
  __shared__ double sums[kCudaAdafactorColWarps][kCudaAdafactorColTile];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  const int64_t col_blocks = backend::cuda_ceil_div(a.cols, kCudaAdafactorColTile);
  for (int64_t t = blockIdx.x; t < l.col_tiles; t += gridDim.x) {
    const int64_t bk = t / col_blocks;  // b * chunks + chunk
    const int64_t b = bk / l.chunks, chunk = bk % l.chunks;
    const int64_t c = (t % col_blocks) * kCudaAdafactorColTile + lane;
    const int64_t r0 = chunk * l.chunk_rows;
    const int64_t r1 = r0 + l.chunk_rows < a.rows ? r0 + l.chunk_rows : a.rows;
    double acc = 0.0;
    if (c < a.cols)
      for (int64_t r = r0 + warp; r < r1; r += kCudaAdafactorColWarps)
        acc += double(a.square(a.grad((b * a.rows + r) * a.cols + c)));
    sums[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && c < a.cols) {
      double s = 0.0;
      for (int w = 0; w < kCudaAdafactorColWarps; ++w) s += sums[w][lane];
      partials[bk * a.cols + c] = s;
    }
    __syncthreads();  // sums is written again for the next tile
  }
}

// col[b, c] = ema(col[b, c], mean over the rows of square(g)), the chunks added in order.
template <class P, class G>
__global__ void col_ema_kernel(Adafactor<P, G> a, int64_t chunks, const double* partials) {
  FG_GRID_STRIDE(j, a.batch * a.cols) {
    const int64_t b = j / a.cols, c = j % a.cols;
    double s = 0.0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      s += partials[(b * chunks + chunk) * a.cols + c];
    a.col[j] = a.ema(a.col[j], float(s / double(a.rows)));
  }
}

// row_means[b] = the f32 mean of batch b's row factors (floored at eps1 by torch): one block
// of kCudaThreads per batch.
template <class P, class G>
__global__ void row_means_kernel(Adafactor<P, G> a) {
  __shared__ double scratch[32];
  for (int64_t b = blockIdx.x; b < a.batch; b += gridDim.x) {
    double acc = 0.0;
    for (int64_t r = threadIdx.x; r < a.rows; r += blockDim.x) acc += double(a.row[b * a.rows + r]);
    acc = block_sum(acc, scratch);
    if (threadIdx.x == 0) {
      const float mean = float(acc / double(a.rows));
      a.row_means[b] = a.k.torch ? max_of(mean, a.k.eps1) : mean;
    }
  }
}

// full = ema(full, square(g)), an unfactored parameter's second moment.
template <class P, class G>
__global__ void full_ema_kernel(Adafactor<P, G> a) {
  FG_GRID_STRIDE(i, a.u.n) { a.full[i] = a.ema(a.full[i], a.square(a.grad(i))); }
}

// *out = the sum of partial[0, count), one block of kCudaThreads threads; out may be
// partial itself (it is written after every read).
__global__ void total_kernel(const double* partial, int64_t count, double* out) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) acc += partial[j];
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) *out = acc;
}

// The step scalars of Adafactor::run from the sums of p^2 and u^2 over the n elements, in
// double as the CPU computes them on the host.
struct AdafactorStep {
  float step, decay_factor;
};
__device__ AdafactorStep adafactor_step(const AdafactorConstants& k, double p_sum, double u_sum,
                                        double n) {
  const double p_rms = __dsqrt_rn(p_sum / n), u_rms = __dsqrt_rn(u_sum / n);
  if (k.torch) {
    const double alpha = max_of(k.eps2, p_rms) * k.rho;
    return {float(-alpha / max_of(1.0, u_rms / k.d)), 0.0f};
  }
  const double lr_t = (k.scale_parameter ? max_of(k.eps_scale, p_rms) : 1.0) * k.rel_step;
  return {float(lr_t / max_of(u_rms / k.clip_threshold, 1.0)), float(-k.weight_decay * lr_t)};
}

// The update, as Adafactor::apply: torch p = p * decay + step * u; hf u * step through the
// first moment, then p = p + p * decay_factor - u. One block per line.
template <class P, class G>
__global__ void __launch_bounds__(1024)
    adafactor_apply_kernel(Adafactor<P, G> a, int64_t lines, const double* p_total,
                           const double* u_total) {
  const AdafactorStep s = adafactor_step(a.k, *p_total, *u_total, double(lines * a.cols));
  P* p = static_cast<P*>(a.u.param);
  for (int64_t r = blockIdx.x; r < lines; r += gridDim.x) {
    const typename Adafactor<P, G>::Line l = a.line(r);
    for (int64_t c = threadIdx.x; c < a.cols; c += blockDim.x) {
      const int64_t i = r * a.cols + c;
      const float u = a.update(l, c, i), pi = to_f32(p[i]);
      float next;
      if (a.k.torch) {
        next = rn_add(a.k.decay != 1.0f ? rn_mul(pi, a.k.decay) : pi, rn_mul(s.step, u));
      } else {
        float scaled = rn_mul(u, s.step);
        if (a.exp_avg) {
          scaled = rn_add(rn_mul(a.exp_avg[i], a.k.beta1), rn_mul(scaled, rn_sub(1.0f, a.k.beta1)));
          a.exp_avg[i] = scaled;
        }
        const float decayed = s.decay_factor != 0.0f ? rn_add(pi, rn_mul(pi, s.decay_factor)) : pi;
        next = rn_sub(decayed, scaled);
      }
      p[i] = round_param<P>(next, i, a.u);
    }
  }
}

// The phases of Adafactor::run in stream order (Note [Adafactor's workspace on the device]):
// the factors (or the full moment), the sum of p^2, the sum of u^2, the update.
template <class P, class G>
cudaError_t adafactor(const Adafactor<P, G>& a, double* workspace, cudaStream_t stream) {
  const CudaAdafactorLayout l = backend::cuda_adafactor_layout(a.batch, a.rows, a.cols);
  const unsigned line_grid = unsigned(backend::cuda_line_blocks(l.lines));
  const unsigned line_threads = unsigned(backend::cuda_row_threads(a.cols));
  if (a.full) {
    full_ema_kernel<<<elementwise_blocks(a.u.n), kCudaThreads, 0, stream>>>(a);
    FG_RETURN_ON_LAUNCH_ERROR();
  } else {
    double* col_partials = workspace + l.col_partials;
    line_sums_kernel<LineSum::grad_squares>
        <<<line_grid, line_threads, 0, stream>>>(a, l.lines, workspace);
    FG_RETURN_ON_LAUNCH_ERROR();
    row_ema_kernel<<<elementwise_blocks(l.lines), kCudaThreads, 0, stream>>>(a, workspace);
    FG_RETURN_ON_LAUNCH_ERROR();
    col_sums_kernel<<<unsigned(std::min(l.col_tiles, backend::kCudaMaxBlocks)),
                      kCudaAdafactorColTile * kCudaAdafactorColWarps, 0, stream>>>(a, l,
                                                                                   col_partials);
    FG_RETURN_ON_LAUNCH_ERROR();
    col_ema_kernel<<<elementwise_blocks(a.batch * a.cols), kCudaThreads, 0, stream>>>(a, l.chunks,
                                                                                      col_partials);
    FG_RETURN_ON_LAUNCH_ERROR();
    row_means_kernel<<<unsigned(backend::cuda_line_blocks(a.batch)), kCudaThreads, 0, stream>>>(a);
    FG_RETURN_ON_LAUNCH_ERROR();
  }
  double* p_total = workspace + l.p_total;
  double* u_total = workspace + l.u_total;
  line_sums_kernel<LineSum::param_squares>
      <<<line_grid, line_threads, 0, stream>>>(a, l.lines, workspace);
  FG_RETURN_ON_LAUNCH_ERROR();
  total_kernel<<<1, kCudaThreads, 0, stream>>>(workspace, l.lines, p_total);
  FG_RETURN_ON_LAUNCH_ERROR();
  line_sums_kernel<LineSum::update_squares>
      <<<line_grid, line_threads, 0, stream>>>(a, l.lines, workspace);
  FG_RETURN_ON_LAUNCH_ERROR();
  total_kernel<<<1, kCudaThreads, 0, stream>>>(workspace, l.lines, u_total);
  FG_RETURN_ON_LAUNCH_ERROR();
  adafactor_apply_kernel<<<line_grid, line_threads, 0, stream>>>(a, l.lines, p_total, u_total);
  return cudaGetLastError();
}

// ---- sum of squares and scale ----

// partials[block] = the block's sum of x^2 over its grid-stride elements.
template <class T>
__global__ void sum_squares_kernel(const T* x, int64_t n, double* partials) {
  __shared__ double scratch[32];
  double acc = 0.0;
  FG_GRID_STRIDE(i, n) {
    const double xi = double(to_f32(x[i]));
    acc += xi * xi;
  }
  acc = block_sum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// *acc += partials[0] + ... + partials[count - 1], in block order (one thread).
__global__ void add_partials_kernel(const double* partials, int64_t count, double* acc) {
  double total = 0.0;
  for (int64_t b = 0; b < count; ++b) total += partials[b];
  *acc += total;
}

// With clip_sum_squares, the factor is the clip coefficient (backend::ScaleInPlaceArgs),
// computed by every thread in double from the same sum, so all agree.
template <class T>
__global__ void scale_kernel(T* x, int64_t n, float factor, const double* clip_sum_squares,
                             double max_norm) {
  if (clip_sum_squares != nullptr) {
    const double total = sqrt(*clip_sum_squares);
    const double coef = max_norm / (total + 1e-6);
    if (!isfinite(total) || coef >= 1) return;
    factor = float(coef);
  }
  FG_GRID_STRIDE(i, n) { x[i] = from_f32<T>(rn_mul(to_f32(x[i]), factor)); }
}

}  // namespace

cudaError_t launch_adamw(const AdamWConstants& k, const UpdateOperands& u, float* exp_avg,
                         float* exp_avg_sq, cudaStream_t stream) {
  if (u.n == 0) return cudaSuccess;
  return with_param_and_grad(u, [&](auto p, auto g) {
    using P = typename decltype(p)::type;
    using G = typename decltype(g)::type;
    adamw_kernel<P, G>
        <<<elementwise_blocks(u.n), kCudaThreads, 0, stream>>>(k, u, exp_avg, exp_avg_sq);
    return cudaGetLastError();
  });
}

cudaError_t launch_sgd(const SgdConstants& k, const UpdateOperands& u, float* momentum_buffer,
                       cudaStream_t stream) {
  if (u.n == 0) return cudaSuccess;
  return with_param_and_grad(u, [&](auto p, auto g) {
    using P = typename decltype(p)::type;
    using G = typename decltype(g)::type;
    sgd_kernel<P, G><<<elementwise_blocks(u.n), kCudaThreads, 0, stream>>>(k, u, momentum_buffer);
    return cudaGetLastError();
  });
}

cudaError_t launch_adam8bit_blockwise(const Adam8bitConstants& k, const UpdateOperands& u,
                                      uint8_t* state1, uint8_t* state2, float* absmax1,
                                      float* absmax2, const float* signed_map,
                                      const float* unsigned_map, cudaStream_t stream) {
  if (u.n == 0) return cudaSuccess;
  CodeMaps maps;
  for (int j = 0; j < 256; ++j) {
    maps.signed_codes[j] = signed_map[j];
    maps.unsigned_codes[j] = unsigned_map[j];
  }
  return with_param_and_grad(u, [&](auto p, auto g) {
    using P = typename decltype(p)::type;
    using G = typename decltype(g)::type;
    adam8bit_blockwise_kernel<P, G>
        <<<unsigned(backend::cuda_adam8bit_blocks(u.n)), kCudaAdam8bitThreads, 0, stream>>>(
            k, u, maps, state1, state2, absmax1, absmax2);
    return cudaGetLastError();
  });
}

cudaError_t launch_adam8bit_32bit(const Adam8bitConstants& k, const UpdateOperands& u,
                                  float* state1, float* state2, cudaStream_t stream) {
  if (u.n == 0) return cudaSuccess;
  return with_param_and_grad(u, [&](auto p, auto g) {
    using P = typename decltype(p)::type;
    using G = typename decltype(g)::type;
    adam8bit_32bit_kernel<P, G>
        <<<elementwise_blocks(u.n), kCudaThreads, 0, stream>>>(k, u, state1, state2);
    return cudaGetLastError();
  });
}

cudaError_t launch_adafactor(const AdafactorConstants& k, const UpdateOperands& u, float* row,
                             float* col, float* full, float* exp_avg, int64_t batch, int64_t rows,
                             int64_t cols, double* workspace, cudaStream_t stream) {
  if (u.n == 0) return cudaSuccess;
  return with_param_and_grad(u, [&](auto p, auto g) {
    using P = typename decltype(p)::type;
    using G = typename decltype(g)::type;
    const int64_t row_means = backend::cuda_adafactor_layout(batch, rows, cols).row_means;
    const Adafactor<P, G> a{k,       u,     row,  col,  full,
                            exp_avg, batch, rows, cols, workspace + row_means};
    return adafactor(a, workspace, stream);
  });
}

cudaError_t launch_sum_squares(const void* x, DType dtype, int64_t n, int64_t blocks,
                               double* workspace, double* acc, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool floating = dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_squares_kernel<T>
        <<<unsigned(blocks), kCudaThreads, 0, stream>>>(static_cast<const T*>(x), n, workspace);
  });
  if (!floating) return cudaErrorInvalidValue;
  FG_RETURN_ON_LAUNCH_ERROR();
  add_partials_kernel<<<1, 1, 0, stream>>>(workspace, blocks, acc);
  return cudaGetLastError();
}

cudaError_t launch_scale_inplace(void* x, DType dtype, int64_t n, float factor,
                                 const double* clip_sum_squares, double max_norm,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const bool floating = dispatch_floating(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scale_kernel<T><<<elementwise_blocks(n), kCudaThreads, 0, stream>>>(
        static_cast<T*>(x), n, factor, clip_sum_squares, max_norm);
  });
  return floating ? cudaGetLastError() : cudaErrorInvalidValue;
}

}  // namespace fitgrad::cuda
