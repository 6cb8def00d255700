// Adafactor's CPU kernel (see adafactor.h). Rows are independent, so the passes over the
// parameter run in parallel over rows, each row's partial sum in its own workspace slot,
// added in row order: the result does not depend on the thread count. Column sums run over
// rows in order, per batch.
#include "tensor/cpu/adafactor.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/convert.h"
#include "tensor/cpu/param_store.h"

namespace fitgrad::cpu {
namespace {

using backend::AdafactorArgs;
using backend::AdafactorVariant;

// torch's lerp: start + w (end - start), computed from the end for w >= 0.5.
inline float lerp(float start, float end, float w) {
  return w < 0.5f ? start + w * (end - start) : end - (end - start) * (1.0f - w);
}

double sum_in_order(const double* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

template <class P, class G>
class Update {
 public:
  Update(const AdafactorArgs& a, P* p, const G* g)
      : a_(a), k_(a.k), p_(p), g_(g), lines_(a.batch * a.rows), cols_(a.cols),
        partial_(reinterpret_cast<double*>(a.workspace.data<float>())),
        col_sum_(partial_ + lines_) {}

  void run() {
    const double n = double(lines_ * cols_);
    const double p_rms = std::sqrt(row_sums([&](int64_t i) {
                           const double x = float(p_[i]);
                           return x * x;
                         }) / n);
    const bool torch = k_.variant == AdafactorVariant::torch;
    if (a_.full.defined())
      update_full();
    else
      update_factors(torch);
    const double u_rms = std::sqrt(row_sums([&](int64_t i) {
                           const double u = update_at(i);
                           return u * u;
                         }) / n);
    if (torch) {
      const double alpha = std::max(k_.eps2, p_rms) * k_.rho;
      apply(float(-alpha / std::max(1.0, u_rms / k_.d)), 0.0f);
    } else {
      const double lr_t =
          (k_.scale_parameter ? std::max(k_.eps_scale, p_rms) : 1.0) * k_.rel_step;
      const float scale = float(lr_t / std::max(u_rms / k_.clip_threshold, 1.0));
      apply(-scale, float(-k_.weight_decay * lr_t));
    }
  }

 private:
  // The sum over every element of term(i), by rows into the workspace, then in row order.
  template <class Term>
  double row_sums(Term&& term) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lines_; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < cols_; ++c) s += term(r * cols_ + c);
      partial_[r] = s;
    }
    return sum_in_order(partial_, lines_);
  }

  float square_term(float g) const {
    return k_.variant == AdafactorVariant::torch ? g * g : g * g + k_.eps0;
  }
  float ema(float old, float mean) const {
    return k_.variant == AdafactorVariant::torch
               ? lerp(old, mean, k_.one_minus_beta2)
               : old * k_.beta2t + mean * (1.0f - k_.beta2t);
  }

  void update_full() {
    float* v = a_.full.data<float>();
    for (int64_t i = 0; i < cols_; ++i) v[i] = ema(v[i], square_term(float(g_[i])));
  }

  void update_factors(bool torch) {
    float* row = a_.row.data<float>();
    float* col = a_.col.data<float>();
    const int64_t rows = a_.rows;
    row_sums([&](int64_t i) { return double(square_term(float(g_[i]))); });
    for (int64_t r = 0; r < lines_; ++r) row[r] = ema(row[r], float(partial_[r] / double(cols_)));
    for (int64_t b = 0; b < a_.batch; ++b) {
      double* cs = col_sum_ + b * cols_;
      std::fill(cs, cs + cols_, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const G* gr = g_ + (b * rows + r) * cols_;
        for (int64_t c = 0; c < cols_; ++c) cs[c] += double(square_term(float(gr[c])));
      }
      for (int64_t c = 0; c < cols_; ++c)
        col[b * cols_ + c] = ema(col[b * cols_ + c], float(cs[c] / double(rows)));
      // The mean of the batch's row factors: torch floors it at eps1.
      double s = 0.0;
      for (int64_t r = 0; r < rows; ++r) s += row[b * rows + r];
      const float mean = float(s / double(rows));
      row_mean_.push_back(torch ? std::max(mean, k_.eps1) : mean);
    }
  }

  // The unscaled update u of element i (adafactor.h), from the updated second moment.
  float update_at(int64_t i) const {
    const float g = float(g_[i]);
    if (a_.full.defined()) {
      const float v = a_.full.data<float>()[i];
      return k_.variant == AdafactorVariant::torch ? g / std::sqrt(std::max(v, k_.eps1 * k_.eps1))
                                                   : g / std::sqrt(v);
    }
    const int64_t line = i / cols_, c = i % cols_, b = line / a_.rows;
    const float row = a_.row.data<float>()[line], col = a_.col.data<float>()[b * cols_ + c];
    const float mean = row_mean_[size_t(b)];
    if (k_.variant == AdafactorVariant::torch) {
      const float v = row * col / mean;
      return g * (1.0f / std::sqrt(std::max(v, k_.eps1 * k_.eps1)));
    }
    return (1.0f / std::sqrt(row / mean)) * (1.0f / std::sqrt(col)) * g;
  }

  // p += step * u (torch), or HF's first moment, weight decay and p -= u with u scaled by
  // -step; decay_factor is HF's -weight_decay * lr_t.
  void apply(float step, float decay_factor) {
    float* m = a_.exp_avg.defined() ? a_.exp_avg.data<float>() : nullptr;
    const bool torch = k_.variant == AdafactorVariant::torch;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lines_; ++r) {
      ParamRounder<P> out(a_.sr);
      for (int64_t c = 0; c < cols_; ++c) {
        const int64_t i = r * cols_ + c;
        const float u = update_at(i);
        const float p = float(p_[i]);
        if (torch) {  // p * decay is torch's weight decay, rounded as f32
          p_[i] = out.round(i, (k_.decay != 1.0f ? p * k_.decay : p) + step * u);
          continue;
        }
        float scaled = u * -step;
        if (m) {
          m[i] = m[i] * k_.beta1 + scaled * (1.0f - k_.beta1);
          scaled = m[i];
        }
        const float decayed = decay_factor != 0.0f ? p + p * decay_factor : p;
        p_[i] = out.round(i, decayed - scaled);
      }
    }
  }

  const AdafactorArgs& a_;
  const backend::AdafactorScalars& k_;
  P* p_;
  const G* g_;
  int64_t lines_, cols_;
  double* partial_;
  double* col_sum_;
  std::vector<float> row_mean_;  // per batch
};

}  // namespace

void adafactor_update(const AdafactorArgs& a) {
  dispatch_floating(a.param.dtype(), "adafactor_update", [&](auto p_tag) {
    dispatch_floating(a.grad.dtype(), "adafactor_update", [&](auto g_tag) {
      Update(a, a.param.data<decltype(p_tag)>(), a.grad.data<decltype(g_tag)>()).run();
    });
  });
}

}  // namespace fitgrad::cpu
