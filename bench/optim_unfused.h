// Plain unfused loops of the optimizers that bench/optim_bench.cpp times the fused kernels
// against: the same arithmetic as one pass per tensor operation, with a full-size
// temporary wherever a composition of tensor ops (torch's single-tensor, foreach=False
// path) makes one. They exist only as the benchmark's baseline; the tests check the fused
// kernels against independent references instead.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor/quant/dynamic_map.h"

namespace fitgrad::bench {

struct UnfusedAdamW {
  std::vector<float> m, v;
  int64_t t = 0;
  void step(float* p, const float* g, int64_t n, float lr, float wd) {
    if (m.empty()) m.assign(size_t(n), 0.0f), v.assign(size_t(n), 0.0f);
    ++t;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    const float bc1 = 1 - std::pow(b1, float(t)), bc2 = std::sqrt(1 - std::pow(b2, float(t)));
    for (int64_t i = 0; i < n; ++i) p[i] *= 1 - lr * wd;
    for (int64_t i = 0; i < n; ++i) m[size_t(i)] = m[size_t(i)] * b1 + (1 - b1) * g[i];
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = v[size_t(i)] * b2 + (1 - b2) * g[i] * g[i];
    std::vector<float> denom(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) denom[size_t(i)] = std::sqrt(v[size_t(i)]) / bc2 + eps;
    for (int64_t i = 0; i < n; ++i) p[i] -= lr / bc1 * m[size_t(i)] / denom[size_t(i)];
  }
};

// Dequantize both states into f32 temporaries, update them, find each block's absmax, step
// the parameter, requantize with a binary search (std::lower_bound and the nearer code).
struct UnfusedAdam8bit {
  std::vector<uint8_t> c1, c2;
  std::vector<float> a1, a2;
  int64_t t = 0;
  static uint8_t nearest(const quant::CodeMap& map, float x) {
    const auto it = std::lower_bound(map.begin(), map.end(), x);
    if (it == map.begin()) return 0;
    if (it == map.end()) return 255;
    return uint8_t((x - *(it - 1) < *it - x) ? it - 1 - map.begin() : it - map.begin());
  }
  void step(float* p, const float* g, int64_t n, float lr, float wd) {
    const int64_t blocks = (n + 255) / 256;
    if (c1.empty()) {
      c1.assign(size_t(n), 0), c2.assign(size_t(n), 0);
      a1.assign(size_t(blocks), 0.0f), a2.assign(size_t(blocks), 0.0f);
    }
    ++t;
    const quant::CodeMap& m1 = quant::dynamic_map_signed();
    const quant::CodeMap& m2 = quant::dynamic_map_unsigned();
    std::vector<float> s1(static_cast<size_t>(n)), s2(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) s1[size_t(i)] = m1[c1[size_t(i)]] * a1[size_t(i / 256)];
    for (int64_t i = 0; i < n; ++i) s2[size_t(i)] = m2[c2[size_t(i)]] * a2[size_t(i / 256)];
    for (int64_t i = 0; i < n; ++i) s1[size_t(i)] = s1[size_t(i)] * 0.9f + 0.1f * g[i];
    for (int64_t i = 0; i < n; ++i) s2[size_t(i)] = s2[size_t(i)] * 0.999f + 0.001f * g[i] * g[i];
    for (int64_t b = 0; b < blocks; ++b) {
      float x1 = 0, x2 = 0;
      for (int64_t i = b * 256; i < std::min(n, b * 256 + 256); ++i)
        x1 = std::max(x1, std::fabs(s1[size_t(i)])), x2 = std::max(x2, s2[size_t(i)]);
      a1[size_t(b)] = x1, a2[size_t(b)] = x2;
    }
    const float c1t = 1 - std::pow(0.9f, float(t)), c2t = std::sqrt(1 - std::pow(0.999f, float(t)));
    for (int64_t i = 0; i < n; ++i)
      p[i] += -lr * c2t / c1t * s1[size_t(i)] / (std::sqrt(s2[size_t(i)]) + 1e-8f * c2t);
    for (int64_t i = 0; i < n; ++i) p[i] *= 1 - lr * wd;
    for (int64_t i = 0; i < n; ++i)
      c1[size_t(i)] = nearest(m1, s1[size_t(i)] / a1[size_t(i / 256)]);
    for (int64_t i = 0; i < n; ++i)
      c2[size_t(i)] = nearest(m2, s2[size_t(i)] / a2[size_t(i / 256)]);
  }
};

// torch's single-tensor Adafactor for an R x C matrix: row and column means of g^2, the
// full R x C variance estimate, the update as a temporary, its norm, then the step.
struct UnfusedAdafactor {
  std::vector<float> row, col;
  int64_t t = 0;
  void step(float* p, const float* g, int64_t rows, int64_t cols, float lr) {
    if (row.empty()) row.assign(size_t(rows), 0.0f), col.assign(size_t(cols), 0.0f);
    ++t;
    const int64_t n = rows * cols;
    const float w = std::pow(float(t), -0.8f), rho = std::min(lr, 1.0f / std::sqrt(float(t)));
    double pn = 0;
    for (int64_t i = 0; i < n; ++i) pn += double(p[i]) * p[i];
    const float alpha = std::max(1e-3f, float(std::sqrt(pn / double(n)))) * rho;
    std::vector<float> rm(static_cast<size_t>(rows), 0.0f), cm(static_cast<size_t>(cols), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) rm[size_t(r)] += g[r * cols + c] * g[r * cols + c];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) cm[size_t(c)] += g[r * cols + c] * g[r * cols + c];
    for (int64_t r = 0; r < rows; ++r)
      row[size_t(r)] += w * (rm[size_t(r)] / float(cols) - row[size_t(r)]);
    for (int64_t c = 0; c < cols; ++c)
      col[size_t(c)] += w * (cm[size_t(c)] / float(rows) - col[size_t(c)]);
    float mean = 0;
    for (float x : row) mean += x / float(rows);
    std::vector<float> u(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) u[size_t(r * cols + c)] = row[size_t(r)] * col[size_t(c)];
    for (int64_t i = 0; i < n; ++i) u[size_t(i)] /= std::max(mean, 1.2e-7f);
    for (int64_t i = 0; i < n; ++i)
      u[size_t(i)] = g[i] / std::sqrt(std::max(u[size_t(i)], 1.4e-14f));
    double un = 0;
    for (int64_t i = 0; i < n; ++i) un += double(u[size_t(i)]) * u[size_t(i)];
    const float denom = std::max(1.0f, float(std::sqrt(un / double(n))));
    for (int64_t i = 0; i < n; ++i) p[i] -= alpha / denom * u[size_t(i)];
  }
};

}  // namespace fitgrad::bench
