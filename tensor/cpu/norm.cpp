// Layer norm and RMS norm kernels (see norm.h). Row statistics are computed in two passes
// (mean, then the centred sum of squares), which avoids the cancellation of E[x^2] - E[x]^2.
//
// Note [Deterministic weight gradients]
// dw and db sum over every row. Each of the P partitions (backend::norm_partitions) owns a
// fixed contiguous range of rows, sums its rows in order into its own row of `partials`,
// and then every column adds the P partials in partition order. The partition depends only
// on (rows, P), never on timing, so for a fixed thread count the result is the same bit for
// bit on every run. Atomics or a shared accumulator would make the order, and so the
// rounding, vary.
#include "tensor/cpu/norm.h"

#include <algorithm>
#include <cmath>

#include "tensor/convert.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::cpu {
namespace {

// An element widened to f32 (exact).
template <class E>
float f(E v) {
  return convert<float>(v);
}

// Note [Row sums in lanes]
// A row statistic summed in one chain of additions waits an addition's latency per element:
// the bf16 RMSNorm of SmolLM2 (rows of 576) took 5% of an evaluation on the AMX Xeon
// (bench/RESULTS.md, issue 45). The row sums here go to kLanes accumulators, element c to
// lane c % kLanes, and the lanes are then added in order: independent chains the compiler
// can put in vectors, and a fixed order of additions, so the bits depend on the row alone.
constexpr int64_t kLanes = 16;

// sum over c < n of term(c), in lanes (Note [Row sums in lanes]).
template <class Term>
float lane_sum(int64_t n, Term&& term) {
  float acc[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(c + l);
  for (int64_t l = 0; c + l < n; ++l) acc[l] += term(c + l);
  float total = 0;
  for (float a : acc) total += a;
  return total;
}

// Rows [begin, end) of partition p of P.
int64_t partition_begin(int64_t p, int64_t P, int64_t rows) { return p * rows / P; }

// Adds the P partial rows (`stride` floats apart) into out (C), in partition order, in
// parallel over columns.
void sum_partials(const float* partials, int64_t P, int64_t stride, int64_t C, float* out) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    float s = 0;
    for (int64_t p = 0; p < P; ++p) s += partials[p * stride + c];
    out[c] = s;
  }
}

}  // namespace

template <class E>
void layer_norm(const E* x, const E* w, const E* b, E* y, float* mean, float* rstd, int64_t rows,
                int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const E* xr = x + r * C;
    E* yr = y + r * C;
    const float mu = lane_sum(C, [&](int64_t c) { return f(xr[c]); }) / float(C);
    const float sq = lane_sum(C, [&](int64_t c) { return (f(xr[c]) - mu) * (f(xr[c]) - mu); });
    const float rs = 1.0f / std::sqrt(sq / float(C) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (f(xr[c]) - mu) * rs;
      yr[c] = convert<E>((w ? xhat * f(w[c]) : xhat) + (b ? f(b[c]) : 0.0f));
    }
  }
}

template <class E>
void layer_norm_backward(const E* dy, const E* x, const E* w, const float* mean, const float* rstd,
                         E* dx, float* dw, float* db, float* partials, int64_t P, int64_t rows,
                         int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < P; ++p) {
    float* part_w = dw ? partials + p * 2 * C : nullptr;      // (C)
    float* part_b = db ? partials + p * 2 * C + C : nullptr;  // (C)
    if (part_w) std::fill(part_w, part_w + C, 0.0f);
    if (part_b) std::fill(part_b, part_b + C, 0.0f);
    for (int64_t r = partition_begin(p, P, rows); r < partition_begin(p + 1, P, rows); ++r) {
      const E* dyr = dy + r * C;
      const E* xr = x + r * C;
      E* dxr = dx + r * C;
      const float mu = mean[r], rs = rstd[r];
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
      auto g_at = [&](int64_t c) { return w ? f(dyr[c]) * f(w[c]) : f(dyr[c]); };
      const float sum_g = lane_sum(C, g_at);
      const float sum_gx = lane_sum(C, [&](int64_t c) { return g_at(c) * (f(xr[c]) - mu) * rs; });
      const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = (f(xr[c]) - mu) * rs;
        const float g = w ? f(dyr[c]) * f(w[c]) : f(dyr[c]);
        dxr[c] = convert<E>(rs * (g - mean_g - xhat * mean_gx));
        if (part_w) part_w[c] += f(dyr[c]) * xhat;
        if (part_b) part_b[c] += f(dyr[c]);
      }
    }
  }
  if (dw) sum_partials(partials, P, 2 * C, C, dw);
  if (db) sum_partials(partials + C, P, 2 * C, C, db);
}

template <class E>
void rms_norm(const E* x, const E* w, E* y, float* rstd, int64_t rows, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const E* xr = x + r * C;
    E* yr = y + r * C;
    const float sq = lane_sum(C, [&](int64_t c) { return f(xr[c]) * f(xr[c]); });
    const float rs = 1.0f / std::sqrt(sq / float(C) + eps);
    rstd[r] = rs;
    for (int64_t c = 0; c < C; ++c) yr[c] = convert<E>(w ? f(xr[c]) * rs * f(w[c]) : f(xr[c]) * rs);
  }
}

template <class E>
void rms_norm_backward(const E* dy, const E* x, const E* w, const float* rstd, E* dx, float* dw,
                       float* partials, int64_t P, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < P; ++p) {
    float* part = dw ? partials + p * C : nullptr;
    if (part) std::fill(part, part + C, 0.0f);
    for (int64_t r = partition_begin(p, P, rows); r < partition_begin(p + 1, P, rows); ++r) {
      const E* dyr = dy + r * C;
      const E* xr = x + r * C;
      E* dxr = dx + r * C;
      const float rs = rstd[r];
      // dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd.
      const float sum_gx = lane_sum(
          C, [&](int64_t c) { return (w ? f(dyr[c]) * f(w[c]) : f(dyr[c])) * f(xr[c]) * rs; });
      const float mean_gx = sum_gx / float(C);
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = f(xr[c]) * rs;
        const float g = w ? f(dyr[c]) * f(w[c]) : f(dyr[c]);
        dxr[c] = convert<E>(rs * (g - xhat * mean_gx));
        if (part) part[c] += f(dyr[c]) * xhat;
      }
    }
  }
  if (dw) sum_partials(partials, P, C, C, dw);
}

#define FITGRAD_NORM_INSTANTIATE(E)                                                               \
  template void layer_norm(const E*, const E*, const E*, E*, float*, float*, int64_t, int64_t,    \
                           float);                                                                \
  template void layer_norm_backward(const E*, const E*, const E*, const float*, const float*, E*, \
                                    float*, float*, float*, int64_t, int64_t, int64_t);           \
  template void rms_norm(const E*, const E*, E*, float*, int64_t, int64_t, float);                \
  template void rms_norm_backward(const E*, const E*, const E*, const float*, E*, float*, float*, \
                                  int64_t, int64_t, int64_t);
FITGRAD_NORM_INSTANTIATE(float)
FITGRAD_NORM_INSTANTIATE(BFloat16)
FITGRAD_NORM_INSTANTIATE(Half)
#undef FITGRAD_NORM_INSTANTIATE

}  // namespace fitgrad::cpu
