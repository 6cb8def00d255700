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
//
// Note [Cross-entropy on bf16 rows]
// bf16 logits (autocast's head output) are read as they are: each vector of bf16 is widened
// in registers (exactly, bf16_vec.h) and goes through the same f32 operations in the same
// order as the f32 kernel's, so lse and the NLL sum are bitwise those of the f32 kernels on
// a widened copy. The bf16 gradient is the f32 kernel's value rounded once to nearest even:
// each vector is computed in f32, the target's lane has g subtracted in f32 (as the f32
// kernel subtracts it from the stored value), and only then is the vector rounded. So the
// front-end needs neither an f32 copy of the logits nor an f32 gradient to round.
#include "tensor/cpu/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/cpu/bf16_vec.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kParallelMin = int64_t(1) << 15;  // elements worth waking a thread team for

// kLanes<V> logits at x as f32, or the first n < kLanes<V> with the other lanes `fill`.
template <class V>
[[gnu::always_inline]] inline V load_x(const float* x) {
  return load<V>(x);
}
template <class V>
[[gnu::always_inline]] inline V load_x(const BFloat16* x) {
  return load_bf16<V>(x);
}
template <class V>
[[gnu::always_inline]] inline V load_x_partial(const float* x, int64_t n, float fill) {
  return load_partial<V>(x, n, fill);
}
template <class V>
[[gnu::always_inline]] inline V load_x_partial(const BFloat16* x, int64_t n, float fill) {
  return load_bf16_partial<V>(x, n, fill);
}

// log(sum_c exp(x[c])) of one row of v >= 1 floats, in 16-column groups of kSub native
// vectors: the double sums are the 16 lane sums of the Note on every level.
// x is float or BFloat16 (Note [Cross-entropy on bf16 rows]).
template <CpuIsa kIsa, class T>
[[gnu::always_inline]] inline float row_lse_body(int64_t v, const T* __restrict x) {
  using V = typename Native<kIsa>::F;
  using D = typename Native<kIsa>::D;
  constexpr int W = kLanes<V>, kSub = kVecWidth / W;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t full = v / W * W;
  V vmax = splat<V>(kNegInf);
  for (int64_t c = 0; c < full; c += W) {
    const V y = load_x<V>(x + c);
    vmax = y > vmax ? y : vmax;
  }
  if (full < v) {
    const V y = load_x_partial<V>(x + full, v - full, kNegInf);
    vmax = y > vmax ? y : vmax;
  }
  float mx = vmax[0];
  for (int i = 1; i < W; ++i) mx = vmax[i] > mx ? vmax[i] : mx;
  D acc[kSub];
  for (int u = 0; u < kSub; ++u) acc[u] = D{} + 0.0;
  // Column c goes to lane c % 16, that is part (c % 16) / W, lane c % W.
  for (int64_t c = 0; c < full; c += W)
    acc[(c / W) % kSub] += __builtin_convertvector(fast_exp(load_x<V>(x + c) - mx), D);
  if (full < v)  // padding lanes are -inf: exp gives 0
    acc[(full / W) % kSub] +=
        __builtin_convertvector(fast_exp(load_x_partial<V>(x + full, v - full, kNegInf) - mx), D);
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

template <CpuIsa kIsa>
[[gnu::always_inline]] inline float row_lse_bf16_body(int64_t v, const BFloat16* x) {
  return row_lse_body<kIsa>(v, x);
}

// drow(v) = bf16(g * exp(x - l) - g onehot(t)), each element rounded once from the f32 value
// row_grad_body gives it (Note [Cross-entropy on bf16 rows]). The target's vector is written
// again with its lane corrected, which keeps the column loop free of the test.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void row_grad_bf16_body(int64_t v, const BFloat16* x, float l,
                                                      float g, int64_t t, BFloat16* drow) {
  using V = typename Native<kIsa>::F;
  constexpr int W = kLanes<V>;
  const int64_t full = v / W * W;
  for (int64_t c = 0; c < full; c += W) store_bf16(drow + c, g * fast_exp(load_bf16<V>(x + c) - l));
  if (t < full) {
    const int64_t c = t / W * W;
    V y = g * fast_exp(load_bf16<V>(x + c) - l);
    y[t - c] -= g;
    store_bf16(drow + c, y);
  }
  if (full < v) {
    V y = g * fast_exp(load_bf16_partial<V>(x + full, v - full, 0.0f) - l);
    if (t >= full) y[t - full] -= g;
    store_bf16_partial(drow + full, y, v - full);
  }
}

FITGRAD_ISA_KERNEL(float, row_lse, (int64_t v, const float* x), (v, x))
FITGRAD_ISA_KERNEL(float, row_lse_bf16, (int64_t v, const BFloat16* x), (v, x))
FITGRAD_ISA_KERNEL(void, row_grad, (int64_t v, const float* x, float l, float g, float* drow),
                   (v, x, l, g, drow))
FITGRAD_ISA_KERNEL(void, row_grad_bf16,
                   (int64_t v, const BFloat16* x, float l, float g, int64_t t, BFloat16* drow),
                   (v, x, l, g, t, drow))

template <class T>
double nll_sum(int64_t rows, int64_t v, const T* x, const float* lse, const int64_t* targets,
               int64_t ignore_index) {
  double sum = 0.0;
  for (int64_t r = 0; r < rows; ++r)
    if (targets[r] != ignore_index)
      sum += double(lse[r]) - double(static_cast<float>(x[r * v + targets[r]]));
  return sum;
}

}  // namespace

void cross_entropy_lse(int64_t rows, int64_t v, const float* x, float* lse) {
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) lse[r] = row_lse(v, x + r * v);
}

void cross_entropy_lse(int64_t rows, int64_t v, const BFloat16* x, float* lse) {
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) lse[r] = row_lse_bf16(v, x + r * v);
}

double cross_entropy_nll_sum(int64_t rows, int64_t v, const float* x, const float* lse,
                             const int64_t* targets, int64_t ignore_index) {
  return nll_sum(rows, v, x, lse, targets, ignore_index);
}

double cross_entropy_nll_sum(int64_t rows, int64_t v, const BFloat16* x, const float* lse,
                             const int64_t* targets, int64_t ignore_index) {
  return nll_sum(rows, v, x, lse, targets, ignore_index);
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

void cross_entropy_grad(int64_t rows, int64_t v, const BFloat16* x, const float* lse,
                        const int64_t* targets, int64_t ignore_index, float g, BFloat16* dx) {
#pragma omp parallel for schedule(static) if (rows * v >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    BFloat16* drow = dx + r * v;
    if (targets[r] == ignore_index)
      std::fill(drow, drow + v, BFloat16(0.0f));
    else
      row_grad_bf16(v, x + r * v, lse[r], g, targets[r], drow);
  }
}

}  // namespace fitgrad::cpu
