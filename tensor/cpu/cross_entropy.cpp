// Cross-entropy kernels (see cross_entropy.h). Rows are independent, so each parallel
// loop splits rows over threads statically; every row's result is computed by one thread
// in a fixed order, so results do not depend on the thread count. Chunks too small to pay
// for waking a thread team run on the calling thread.
//
// Note [Vectorised cross-entropy rows]
// A row of GPT-2 logits is 50257 wide and a training step reads every one twice (the
// log-sum-exp forward, the gradient backward), so the per-row loops are written with the
// native vectors and fast_exp of tensor/cpu/vec.h, compiled per ISA level (Note [Kernel
// ISA variants] there); libm's expf is a scalar call and was most of the kernels' time.
// The sum of exponentials still accumulates in double, lane-wise (16 partial sums, each
// over every 16th column in column order), and the lanes are added in lane order: a fixed
// order, the same for every thread count and every CPU level.
#include "tensor/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cpu/vec.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements worth waking a thread team for

// log(sum_c exp(x[c])) of one row of v >= 1 floats, in 16-column groups of kSub native
// vectors: the double sums are the 16 lane sums of the Note on every level.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline float row_lse_body(int64_t v, const float* __restrict x) {
  using V = typename Native<kIsa>::F;
  using D = typename Native<kIsa>::D;
  constexpr int W = kLanes<V>, kSub = kVecWidth / W;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t full = v / W * W;
  V vmax = splat<V>(kNegInf);
  for (int64_t c = 0; c < full; c += W) {
    const V y = load<V>(x + c);
    vmax = y > vmax ? y : vmax;
  }
  if (full < v) {
    const V y = load_partial<V>(x + full, v - full, kNegInf);
    vmax = y > vmax ? y : vmax;
  }
  float mx = vmax[0];
  for (int i = 1; i < W; ++i) mx = vmax[i] > mx ? vmax[i] : mx;
  D acc[kSub];
  for (int u = 0; u < kSub; ++u) acc[u] = D{} + 0.0;
  // Column c goes to lane c % 16, that is part (c % 16) / W, lane c % W.
  for (int64_t c = 0; c < full; c += W)
    acc[(c / W) % kSub] += __builtin_convertvector(fast_exp(load<V>(x + c) - mx), D);
  if (full < v)  // padding lanes are -inf: exp gives 0
    acc[(full / W) % kSub] +=
        __builtin_convertvector(fast_exp(load_partial<V>(x + full, v - full, kNegInf) - mx), D);
  double sum = 0.0;
  for (int u = 0; u < kSub; ++u)
    for (int i = 0; i < W; ++i) sum += acc[u][i];
  return mx + float(std::log(sum));
}

// drow(v) = g * exp(x - l); drow may be x.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void row_grad_body(int64_t v, const float* x, float l, float g,
                                                 float* drow) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>;
  const int64_t full = v / W * W;
  for (int64_t c = 0; c < full; c += W) store(drow + c, g * fast_exp(load<V>(x + c) - l));
  if (full < v)
    store_partial(drow + full, g * fast_exp(load_partial<V>(x + full, v - full, 0.0f) - l),
                  v - full);
}

FITGRAD_ISA_KERNEL(float, row_lse, (int64_t v, const float* x), (v, x))
FITGRAD_ISA_KERNEL(void, row_grad, (int64_t v, const float* x, float l, float g, float* drow),
                   (v, x, l, g, drow))

}  // namespace

void cross_entropy_lse(int64_t rows, int64_t v, const float* x, float* lse) {
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) lse[r] = row_lse(v, x + r * v);
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
    row_grad(v, row, lse[r], g, drow);
    drow[targets[r]] -= g;
  }
}

}  // namespace fitgrad::cpu
