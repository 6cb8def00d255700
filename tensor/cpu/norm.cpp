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

#ifdef _OPENMP
#include <omp.h>
#endif

namespace fitgrad::cpu {
namespace {

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

void layer_norm_f32(const float* x, const float* w, const float* b, float* y, float* mean,
                    float* rstd, int64_t rows, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    float sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += xr[c];
    const float mu = sum / float(C);
    float sq = 0;
    for (int64_t c = 0; c < C; ++c) sq += (xr[c] - mu) * (xr[c] - mu);
    const float rs = 1.0f / std::sqrt(sq / float(C) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t c = 0; c < C; ++c) {
      const float xhat = (xr[c] - mu) * rs;
      yr[c] = (w ? xhat * w[c] : xhat) + (b ? b[c] : 0.0f);
    }
  }
}

void layer_norm_backward_f32(const float* dy, const float* x, const float* w, const float* mean,
                             const float* rstd, float* dx, float* dw, float* db, float* partials,
                             int64_t P, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < P; ++p) {
    float* part_w = dw ? partials + p * 2 * C : nullptr;      // (C)
    float* part_b = db ? partials + p * 2 * C + C : nullptr;  // (C)
    if (part_w) std::fill(part_w, part_w + C, 0.0f);
    if (part_b) std::fill(part_b, part_b + C, 0.0f);
    for (int64_t r = partition_begin(p, P, rows); r < partition_begin(p + 1, P, rows); ++r) {
      const float* dyr = dy + r * C;
      const float* xr = x + r * C;
      float* dxr = dx + r * C;
      const float mu = mean[r], rs = rstd[r];
      // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
      float sum_g = 0, sum_gx = 0;
      for (int64_t c = 0; c < C; ++c) {
        const float g = w ? dyr[c] * w[c] : dyr[c];
        sum_g += g;
        sum_gx += g * (xr[c] - mu) * rs;
      }
      const float mean_g = sum_g / float(C), mean_gx = sum_gx / float(C);
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = (xr[c] - mu) * rs;
        const float g = w ? dyr[c] * w[c] : dyr[c];
        dxr[c] = rs * (g - mean_g - xhat * mean_gx);
        if (part_w) part_w[c] += dyr[c] * xhat;
        if (part_b) part_b[c] += dyr[c];
      }
    }
  }
  if (dw) sum_partials(partials, P, 2 * C, C, dw);
  if (db) sum_partials(partials + C, P, 2 * C, C, db);
}

void rms_norm_f32(const float* x, const float* w, float* y, float* rstd, int64_t rows, int64_t C,
                  float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    float sq = 0;
    for (int64_t c = 0; c < C; ++c) sq += xr[c] * xr[c];
    const float rs = 1.0f / std::sqrt(sq / float(C) + eps);
    rstd[r] = rs;
    for (int64_t c = 0; c < C; ++c) yr[c] = w ? xr[c] * rs * w[c] : xr[c] * rs;
  }
}

void rms_norm_backward_f32(const float* dy, const float* x, const float* w, const float* rstd,
                           float* dx, float* dw, float* partials, int64_t P, int64_t rows,
                           int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < P; ++p) {
    float* part = dw ? partials + p * C : nullptr;
    if (part) std::fill(part, part + C, 0.0f);
    for (int64_t r = partition_begin(p, P, rows); r < partition_begin(p + 1, P, rows); ++r) {
      const float* dyr = dy + r * C;
      const float* xr = x + r * C;
      float* dxr = dx + r * C;
      const float rs = rstd[r];
      // dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd.
      float sum_gx = 0;
      for (int64_t c = 0; c < C; ++c) sum_gx += (w ? dyr[c] * w[c] : dyr[c]) * xr[c] * rs;
      const float mean_gx = sum_gx / float(C);
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = xr[c] * rs;
        const float g = w ? dyr[c] * w[c] : dyr[c];
        dxr[c] = rs * (g - xhat * mean_gx);
        if (part) part[c] += dyr[c] * xhat;
      }
    }
  }
  if (dw) sum_partials(partials, P, C, C, dw);
}

}  // namespace fitgrad::cpu
