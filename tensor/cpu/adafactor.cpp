// Adafactor's CPU kernel (see adafactor.h). Rows are independent, so the passes over the
// parameter run in parallel over rows, each row's partial sum in its own workspace slot,
// added in row order; column sums run in parallel over column ranges, each column summed
// over the rows in order. The result does not depend on the thread count. The update u is
// computed a tile of a row at a time into a stack buffer, twice: once for rms(u), once to
// apply it.
#include "tensor/cpu/adafactor.h"

#include <algorithm>
#include <cmath>

#include "tensor/convert.h"
#include "tensor/cpu/param_store.h"

namespace fitgrad::cpu {
namespace {

using backend::AdafactorArgs;
using backend::AdafactorVariant;

constexpr int64_t kTile = 512;  // columns per tile of the update

// torch's lerp: start + w (end - start), computed from the end for w >= 0.5.
inline float lerp(float start, float end, float w) {
  return w < 0.5f ? start + w * (end - start) : end - (end - start) * (1.0f - w);
}

template <class P, class G>
class Update {
 public:
  Update(const AdafactorArgs& a, P* p, const G* g)
      : a_(a),
        k_(a.k),
        torch_(a.k.variant == AdafactorVariant::torch),
        p_(p),
        g_(g),
        lines_(a.batch * a.rows),
        cols_(a.cols),
        partial_(reinterpret_cast<double*>(a.workspace.data<float>())),
        col_sum_(partial_ + lines_),
        row_mean_(col_sum_ + a.batch * cols_) {}

  void run() {
    const double n = double(lines_ * cols_);
    const double p_rms = std::sqrt(row_sums([&](int64_t i) {
                                     const double x = double(float(p_[i]));
                                     return x * x;
                                   }) /
                                   n);
    if (a_.full.defined())
      update_full();
    else
      update_factors();
    const double u_rms = std::sqrt(update_sum_squares() / n);
    if (torch_) {
      const double alpha = std::max(k_.eps2, p_rms) * k_.rho;
      apply(float(-alpha / std::max(1.0, u_rms / k_.d)), 0.0f);
    } else {
      const double lr_t = (k_.scale_parameter ? std::max(k_.eps_scale, p_rms) : 1.0) * k_.rel_step;
      apply(float(lr_t / std::max(u_rms / k_.clip_threshold, 1.0)), float(-k_.weight_decay * lr_t));
    }
  }

 private:
  // The sum over every element i of term(i) (a double), by rows into the workspace, then in
  // row order; each row in eight interleaved partial sums added in a fixed order, so the loop
  // vectorises without reassociating anything.
  template <class Term>
  double row_sums(Term&& term) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lines_; ++r) {
      const int64_t first = r * cols_;
      double acc[8] = {};
      int64_t c = 0;
      for (; c + 8 <= cols_; c += 8)
        for (int k = 0; k < 8; ++k) acc[k] += term(first + c + k);
      for (int k = 0; c < cols_; ++c, ++k) acc[k] += term(first + c);
      partial_[r] =
          ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double total = 0.0;
    for (int64_t r = 0; r < lines_; ++r) total += partial_[r];
    return total;
  }

  float square_term(float g) const { return torch_ ? g * g : g * g + k_.eps0; }
  float ema(float old, float mean) const {
    return torch_ ? lerp(old, mean, k_.one_minus_beta2)
                  : old * k_.beta2t + mean * (1.0f - k_.beta2t);
  }

  void update_full() {
    float* v = a_.full.data<float>();
    for (int64_t i = 0; i < cols_; ++i) v[i] = ema(v[i], square_term(float(g_[i])));
  }

  void update_factors() {
    float* row = a_.row.data<float>();
    float* col = a_.col.data<float>();
    const int64_t rows = a_.rows;
    row_sums([&](int64_t i) { return double(square_term(float(g_[i]))); });
    for (int64_t r = 0; r < lines_; ++r) row[r] = ema(row[r], float(partial_[r] / double(cols_)));
    for (int64_t b = 0; b < a_.batch; ++b) {
      double* cs = col_sum_ + b * cols_;
      const int64_t chunks = (cols_ + kTile - 1) / kTile;
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < chunks; ++t) {
        const int64_t c0 = t * kTile, c1 = std::min(cols_, c0 + kTile);
        std::fill(cs + c0, cs + c1, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const G* gr = g_ + (b * rows + r) * cols_;
          for (int64_t c = c0; c < c1; ++c) cs[c] += double(square_term(float(gr[c])));
        }
      }
      for (int64_t c = 0; c < cols_; ++c)
        col[b * cols_ + c] = ema(col[b * cols_ + c], float(cs[c] / double(rows)));
      double s = 0.0;
      for (int64_t r = 0; r < rows; ++r) s += row[b * rows + r];
      const float mean = float(s / double(rows));
      row_mean_[b] = torch_ ? std::max(mean, k_.eps1) : mean;
    }
  }

  // The unscaled update u (adafactor.h) of columns [c0, c1) of line r, into u[0, c1 - c0).
  void update_tile(int64_t r, int64_t c0, int64_t c1, float* u) const {
    const G* g = g_ + r * cols_;
    if (a_.full.defined()) {
      const float* v = a_.full.data<float>();
      const float floor = k_.eps1 * k_.eps1;
      for (int64_t c = c0; c < c1; ++c)
        u[c - c0] =
            torch_ ? float(g[c]) / std::sqrt(std::max(v[c], floor)) : float(g[c]) / std::sqrt(v[c]);
      return;
    }
    const int64_t b = r / a_.rows;
    const float row = a_.row.data<float>()[r];
    const float* col = a_.col.data<float>() + b * cols_;
    const float mean = float(row_mean_[b]);
    if (torch_) {
      const float floor = k_.eps1 * k_.eps1;
      for (int64_t c = c0; c < c1; ++c)
        u[c - c0] = float(g[c]) * (1.0f / std::sqrt(std::max(row * col[c] / mean, floor)));
    } else {
      const float r_factor = 1.0f / std::sqrt(row / mean);
      for (int64_t c = c0; c < c1; ++c)
        u[c - c0] = r_factor * (1.0f / std::sqrt(col[c])) * float(g[c]);
    }
  }

  double update_sum_squares() {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lines_; ++r) {
      alignas(64) float u[kTile];
      double acc[8] = {};
      for (int64_t c0 = 0; c0 < cols_; c0 += kTile) {
        const int64_t len = std::min(kTile, cols_ - c0);
        update_tile(r, c0, c0 + len, u);
        int64_t c = 0;
        for (; c + 8 <= len; c += 8)
          for (int k = 0; k < 8; ++k) acc[k] += double(u[c + k]) * double(u[c + k]);
        for (int k = 0; c < len; ++c, ++k) acc[k] += double(u[c]) * double(u[c]);
      }
      partial_[r] =
          ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    double total = 0.0;
    for (int64_t r = 0; r < lines_; ++r) total += partial_[r];
    return total;
  }

  // torch: p = p * decay + step * u. hf: u * step, through the first moment, then
  // p = p + p * decay_factor (HF's -weight_decay * lr_t) - u.
  void apply(float step, float decay_factor) {
    float* m = a_.exp_avg.defined() ? a_.exp_avg.data<float>() : nullptr;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < lines_; ++r) {
      alignas(64) float u[kTile];
      ParamRounder<P> out(a_.sr);
      for (int64_t c0 = 0; c0 < cols_; c0 += kTile) {
        const int64_t c1 = std::min(cols_, c0 + kTile);
        update_tile(r, c0, c1, u);
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i = r * cols_ + c;
          const float p = float(p_[i]);
          if (torch_) {
            p_[i] = out.round(i, (k_.decay != 1.0f ? p * k_.decay : p) + step * u[c - c0]);
            continue;
          }
          float scaled = u[c - c0] * step;
          if (m) {
            m[i] = m[i] * k_.beta1 + scaled * (1.0f - k_.beta1);
            scaled = m[i];
          }
          const float decayed = decay_factor != 0.0f ? p + p * decay_factor : p;
          p_[i] = out.round(i, decayed - scaled);
        }
      }
    }
  }

  const AdafactorArgs& a_;
  const backend::AdafactorScalars& k_;
  const bool torch_;
  P* p_;
  const G* g_;
  int64_t lines_, cols_;
  double* partial_;
  double* col_sum_;
  double* row_mean_;  // per batch, the f32 mean (floored at eps1 by torch) held as a double
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
