// Cross-entropy kernels (see cross_entropy.h). Rows are independent, so each parallel
// loop splits rows over threads statically; every row's result is computed by one thread
// in a fixed order, so results do not depend on the thread count. Chunks too small to pay
// for waking a thread team run on the calling thread.
#include "tensor/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>

namespace fitgrad::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements worth waking a thread team for

}  // namespace

void cross_entropy_lse(int64_t rows, int64_t v, const float* x, float* lse) {
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * v;
    const float mx = *std::max_element(row, row + v);
    double sum = 0.0;
    for (int64_t c = 0; c < v; ++c) sum += std::exp(row[c] - mx);
    lse[r] = mx + float(std::log(sum));
  }
}

double cross_entropy_nll_sum(int64_t rows, int64_t v, const float* x, const float* lse,
                             const int64_t* targets, int64_t ignore_index) {
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] != ignore_index) sum += double(lse[r]) - double(x[r * v + targets[r]]);
  return sum;
}

void cross_entropy_grad(int64_t rows, int64_t v, const float* x, const float* lse,
                        const int64_t* targets, int64_t ignore_index, float g, float* dx) {
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * v;
    float* drow = dx + r * v;
    if (targets[r] == ignore_index) {
      std::fill(drow, drow + v, 0.0f);
      continue;
    }
    const float l = lse[r];
    for (int64_t c = 0; c < v; ++c) drow[c] = g * std::exp(row[c] - l);
    drow[targets[r]] -= g;
  }
}

}  // namespace fitgrad::cpu
