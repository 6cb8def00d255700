// CPU kernels of the optimizers (see optim_update.h).
//
// Note [Optimizer kernels]
// An optimizer step is memory-bound: AdamW reads p, g, m, v and writes p, m, v, 28 bytes
// per f32 element, and does a dozen flops. Each kernel therefore makes exactly one pass
// over its arrays and allocates nothing. The elements are cut into fixed chunks of kChunk
// that OpenMP threads take statically; every element is computed alone from its own
// inputs, so the result does not depend on the thread count. Inside a chunk AdamW works in
// tiles of kTile elements: a vectorised loop updates m and v, Eigen takes the square roots
// of the tile into a stack buffer (a plain std::sqrt loop does not vectorise: GCC must keep
// errno for negative inputs), and a second vectorised loop updates p while the tile is
// still in L1. The arithmetic is torch's, in its order and in f32, with the step scalars
// rounded to f32 as torch's f32 kernels round them. The squared norm accumulates in double
// in eight interleaved partial sums per chunk, added in a fixed order: deterministic, and
// vectorisable without reassociation.
#include "tensor/cpu/optim_update.h"

#include <Eigen/Core>
#include <algorithm>

#include "tensor/convert.h"
#include "tensor/cpu/param_store.h"
#include "tensor/error.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kChunk = 16384;  // elements per thread work item
constexpr int64_t kTile = 512;     // elements per AdamW tile (6 KiB of f32 per array)

// Runs body(begin, end) over [0, n) in chunks of kChunk, in parallel.
template <class Body>
void parallel_chunks(int64_t n, Body&& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

// Elements [0, n) of a parameter chunk whose first element is element `first` of the
// parameter (stochastic rounding draws by the parameter's index).
template <class P, class G>
void adamw_range(const AdamWScalars& s, P* __restrict p, const G* __restrict g, float* __restrict m,
                 float* __restrict v, int64_t n, int64_t first,
                 const backend::StochasticRounding& sr) {
  alignas(64) float root[kTile];
  ParamRounder<P> out(sr);
  for (int64_t t0 = 0; t0 < n; t0 += kTile) {
    const int64_t len = std::min(kTile, n - t0);
    P* __restrict pt = p + t0;
    const G* __restrict gt = g + t0;
    float* __restrict mt = m + t0;
    float* __restrict vt = v + t0;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) {
      const float gi = float(gt[i]);
      mt[i] = mt[i] * s.beta1 + s.one_minus_beta1 * gi;
      vt[i] = vt[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    }
    Eigen::Map<Eigen::ArrayXf>(root, len) = Eigen::Map<const Eigen::ArrayXf>(vt, len).sqrt();
    if (out.stochastic()) {
      for (int64_t i = 0; i < len; ++i) {
        const float denom = root[i] / s.bias_correction2_sqrt + s.eps;
        pt[i] =
            out.round(first + t0 + i, float(pt[i]) * s.decay + s.neg_step_size * (mt[i] / denom));
      }
      continue;
    }
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) {
      const float denom = root[i] / s.bias_correction2_sqrt + s.eps;
      pt[i] = P(float(pt[i]) * s.decay + s.neg_step_size * (mt[i] / denom));
    }
  }
}

// `first` and `sr` as in adamw_range. With stochastic rounding the updated values go
// through ParamRounder one by one; otherwise the loops vectorise.
template <class P, class G>
void sgd_range(const SgdScalars& s, P* __restrict p, const G* __restrict g, float* __restrict buf,
               int64_t n, int64_t first, const backend::StochasticRounding& sr) {
  ParamRounder<P> out(sr);
  auto direction = [&](int64_t i, float pi) {
    float d = float(g[i]) + s.weight_decay * pi;
    if (!buf) return d;
    const float b = s.first ? d : buf[i] * s.momentum + s.one_minus_dampening * d;
    buf[i] = b;
    return s.nesterov ? d + s.momentum * b : b;
  };
  if (out.stochastic()) {
    for (int64_t i = 0; i < n; ++i) {
      const float pi = float(p[i]);
      p[i] = out.round(first + i, pi - s.lr * direction(i, pi));
    }
    return;
  }
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float pi = float(p[i]);
    p[i] = P(pi - s.lr * direction(i, pi));
  }
}

template <class T>
double sum_squares_range(const T* __restrict x, int64_t n) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const double xi = double(float(x[i + k]));
      acc[k] += xi * xi;
    }
  for (int k = 0; i < n; ++i, ++k) {
    const double xi = double(float(x[i]));
    acc[k] += xi * xi;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Calls fn(p, g) with param and grad as pointers to their storage types.
template <class Fn>
void with_param_and_grad(void* param, DType param_dtype, const void* grad, DType grad_dtype,
                         Fn&& fn) {
  dispatch_floating(param_dtype, "optimizer kernel", [&](auto p_tag) {
    dispatch_floating(grad_dtype, "optimizer kernel", [&](auto g_tag) {
      fn(static_cast<decltype(p_tag)*>(param), static_cast<const decltype(g_tag)*>(grad));
    });
  });
}

}  // namespace

void adamw_update(const AdamWScalars& s, void* param, DType param_dtype, const void* grad,
                  DType grad_dtype, float* exp_avg, float* exp_avg_sq, int64_t n,
                  const backend::StochasticRounding& sr) {
  with_param_and_grad(param, param_dtype, grad, grad_dtype, [&](auto* p, const auto* g) {
    parallel_chunks(n, [&](int64_t b, int64_t e) {
      adamw_range(s, p + b, g + b, exp_avg + b, exp_avg_sq + b, e - b, b, sr);
    });
  });
}

void sgd_update(const SgdScalars& s, void* param, DType param_dtype, const void* grad,
                DType grad_dtype, float* momentum_buffer, int64_t n,
                const backend::StochasticRounding& sr) {
  with_param_and_grad(param, param_dtype, grad, grad_dtype, [&](auto* p, const auto* g) {
    parallel_chunks(n, [&](int64_t b, int64_t e) {
      sgd_range(s, p + b, g + b, momentum_buffer ? momentum_buffer + b : nullptr, e - b, b, sr);
    });
  });
}

int64_t sum_squares_workspace_doubles(int64_t n) { return (n + kChunk - 1) / kChunk; }

double sum_squares(const void* x, DType dtype, int64_t n, double* partial) {
  const int64_t chunks = sum_squares_workspace_doubles(n);
  dispatch_floating(dtype, "optimizer kernel", [&](auto tag) {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(x);
    parallel_chunks(
        n, [&](int64_t b, int64_t e) { partial[b / kChunk] = sum_squares_range(data + b, e - b); });
  });
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

void scale_inplace(void* x, DType dtype, int64_t n, float scale) {
  dispatch_floating(dtype, "optimizer kernel", [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(x);
    parallel_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) data[i] = T(float(data[i]) * scale);
    });
  });
}

}  // namespace fitgrad::cpu
